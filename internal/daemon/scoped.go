package daemon

import "github.com/trestle/trestle/internal/mode"

// Scoped applies. A run-time port added or removed changes one port of a
// bridge, yet a full apply looks again at every interface of every
// bridge (a netlink lookup and its XDP features each, an in-place upgrade
// check of each attachment, each run-time port's interface): at 50 ports
// that was most of a CNI ADD's time (docs/performance.md "Pod churn").
// A scoped apply plans and commits the whole model as a full one does
// (bridges, flood lists, port maps, statics, stages), but takes every
// port outside its scope as it is. That is the full apply's result
// whenever the ports in scope cannot change how the others are attached,
// which scopedFor checks: no port of the bridge's tree is at XDP, nor an
// "auto" NIC (the one kind of port whose mode another port decides, by
// taking XDP redirects or not), and the port added is neither. A bridge
// tree with XDP ports takes full applies: a tc port joining it must take
// their redirects, a port at XDP changes what the others' peers need.

// portScope is the ports a scoped apply looks at, by bridge and key (a
// run-time port's key is its interface).
type portScope map[portID]bool

// ifindexes are the interfaces the ports in the scope are attached to in
// the next model.
func (s portScope) ifindexes(c *change) map[int]bool {
	out := map[int]bool{}
	for _, b := range c.order {
		for _, p := range b.ports {
			if p.mode != "" && s[portID{b.cfg.Name, p.key()}] {
				out[p.ifindex] = true
			}
		}
	}
	return out
}

// scopedFor is the scope of an apply that adds (l, the port's interface:
// its kind) or removes the run-time ports rps of bridge b, or nil when
// only a full apply gets it right.
func (d *Daemon) scopedFor(b *bridgeState, l *Link, rps ...*runPort) portScope {
	for _, tb := range b.tree {
		for _, p := range tb.ports {
			if p.mode == mode.XDP || p.cfg.Mode == mode.Auto && p.physical {
				return nil
			}
		}
	}
	only := portScope{}
	for _, rp := range rps {
		if rp.port.Mode == mode.XDP || l != nil && rp.port.Mode == mode.Auto && l.Physical {
			return nil
		}
		only[portID{rp.Bridge, rp.Interface}] = true
	}
	return only
}
