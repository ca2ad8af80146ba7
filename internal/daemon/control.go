package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// handle answers the control socket. A request never panics the daemon: an
// error is the answer.
func (d *Daemon) handle(_ context.Context, req ctl.Request) (_ any, err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("a control request failed inside the daemon", "cmd", req.Cmd, "panic", r)
			err = fmt.Errorf("%s: internal error: %v", req.Cmd, r)
		}
	}()
	switch req.Cmd {
	case ctl.CmdShow:
		return d.statusOf(req.Bridge)
	case ctl.CmdStats:
		return d.stats(req.Bridge)
	case ctl.CmdVLANStats:
		return d.vlanStats(req.Bridge)
	case ctl.CmdFDBAdd:
		return nil, d.fdbAdd(req)
	case ctl.CmdFDBDel:
		return nil, d.fdbDel(req)
	case ctl.CmdFDBFlush:
		return d.fdbFlush(req)
	case ctl.CmdReload:
		return nil, d.Reload()
	case ctl.CmdRuleShow:
		return d.ruleShow(req.Bridge)
	case ctl.CmdRuleAdd:
		return nil, d.ruleAdd(req)
	case ctl.CmdRuleDel:
		return nil, d.ruleDel(req)
	case ctl.CmdStateShow:
		return d.stateShow(req.Bridge)
	case ctl.CmdNeighShow:
		return d.neighShow(req.Bridge)
	case ctl.CmdMDBShow:
		return d.mdbShow(req.Bridge)
	case ctl.CmdEvents:
		return d.recentEvents(), nil
	case ctl.CmdPortAdd:
		return d.portAdd(req)
	case ctl.CmdPortDel:
		return d.portDel(req)
	case ctl.CmdPortList:
		return d.portList(req.Bridge)
	case ctl.CmdPortEnable:
		return d.portEnable(req)
	}
	return nil, fmt.Errorf("unknown command %q", req.Cmd)
}

func (d *Daemon) sortedBridges(only string) ([]*bridgeState, error) {
	if only != "" {
		b, ok := d.bridges[only]
		if !ok {
			return nil, errNoBridge(only)
		}
		return []*bridgeState{b}, nil
	}
	var bs []*bridgeState
	for _, b := range d.bridges {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].id < bs[j].id })
	return bs, nil
}

func (d *Daemon) status() (ctl.Status, error) { return d.statusOf("") }

// statusOf is `trestle show`: of bridge only, or of every bridge ("").
func (d *Daemon) statusOf(only string) (ctl.Status, error) {
	// The table is counted before the lock is taken, a chunk at a time
	// (architecture.md, "The control plane", "Around the reconcile"): a
	// tenant who fills it makes the walk longer, not the time every other
	// request waits, and the daemon holds a chunk of it, never all.
	entries, err := d.tableCounts()
	d.mu.Lock()
	defer d.mu.Unlock()
	st := ctl.Status{Config: d.opts.ConfigPath, Persist: d.persist, PinDir: d.pins.PinDir()}
	if err != nil {
		return st, err
	}
	bs, err := d.sortedBridges(only)
	if err != nil {
		return st, err
	}
	for _, b := range bs {
		bst := ctl.BridgeStatus{Name: b.cfg.Name, ID: b.id, VLANAware: b.cfg.VLANAware(), AgingSeconds: b.cfg.Aging.Seconds(), MaxEntries: b.cfg.MaxEntries, Entries: entries[b.id], Ports: []ctl.PortStatus{},
			Filter: b.cfg.Filter, Rules: len(b.rules()), DefaultAction: config.ActionPass, NeighSuppress: b.cfg.NeighSuppress,
			MulticastSnooping: b.cfg.MulticastSnooping, MulticastQuerier: b.cfg.MulticastQuerier, Queriers: d.snoop.queriers(b.cfg.Name, time.Now())}
		if b.cfg.DefaultBlock {
			bst.DefaultAction = config.ActionBlock
		}
		for _, p := range b.ports {
			bst.Ports = append(bst.Ports, d.portStatus(b, p))
		}
		for _, m := range b.cfg.Mirrors {
			cm := ctl.Mirror{Name: m.Name, Ports: m.Ports, Direction: m.Direction(), To: m.To}
			cm.VLANs = m.VLANs
			if to := b.port(m.To); to != nil {
				cm.Active = to.forwards()
			}
			bst.Mirrors = append(bst.Mirrors, cm)
		}
		st.Bridges = append(st.Bridges, bst)
	}
	if s, err := d.counters.Stats(0); err == nil {
		st.Unattached = dropMap(s)
	}
	return st, nil
}

// portStatus is a port as `trestle show` and `trestle port list` give it.
func (d *Daemon) portStatus(b *bridgeState, p *portState) ctl.PortStatus {
	ps := ctl.PortStatus{Name: p.name(), Interface: p.cfg.Interface, Config: string(p.cfg.Mode), Mode: string(p.mode), Reason: p.why, MaxMACs: p.cfg.MaxMACs, State: p.state(),
		Learning: !p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_LEARN), Protected: p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED),
		Flood: !p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_FLOOD), McastFlood: !p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_MFLOOD),
		BcastFlood: !p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_BFLOOD), Locked: p.cfg.Has(flagLocked)}
	for _, m := range p.cfg.AllowedMACs {
		ps.AllowedMACs = append(ps.AllowedMACs, m.String())
	}
	ps.IPGuard = p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD)
	ps.RAGuard = p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD)
	ps.DHCPGuard = p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD)
	ps.BPDUGuard = p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_BPDU_GUARD)
	if p.state() == stateBlocked {
		ps.Why, ps.Reason = p.blocked, d.blockReason(b, p)
	}
	for _, a := range p.cfg.AllowedIPs {
		ps.AllowedIPs = append(ps.AllowedIPs, a.String())
	}
	if p.cfg.MaxMACs > 0 {
		ps.MACLimitAction = config.LimitDrop
		if p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_LIMIT_FORWARD) {
			ps.MACLimitAction = config.LimitForward
		}
	}
	if p.cfg.IsPatch() {
		ps.Patch, ps.Mode, ps.Config = p.cfg.Patch, "", ""
		if n, err := d.counters.PortMACs(p.slot); err == nil {
			ps.MACs = n
		}
	} else if p.mode == "" {
		ps.Mode = string(p.cfg.Mode)
	} else {
		ps.Ifindex = p.ifindex
		if n, err := d.counters.PortMACs(p.slot); err == nil {
			ps.MACs = n
		}
		if f := d.peers[p.ifindex]; f != nil {
			ps.Peer = f.String()
		}
	}
	if b.cfg.VLANAware() {
		if p.cfg.IsTrunk() {
			ps.Trunk, ps.Native = p.cfg.VLANs(), p.cfg.Native
			ps.NativeTagged = p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED)
		} else {
			ps.VLAN, ps.QinQ = p.cfg.VLAN, p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_QINQ)
		}
	}
	if st := p.cfg.Storm; st.Any() {
		ps.Storm = &ctl.Storm{Broadcast: st.Broadcast, Multicast: st.Multicast, UnknownUnicast: st.UnknownUnicast}
	}
	if m := p.span(); m != nil {
		ps.Span = m.Name
	}
	if m := b.cfg.MirrorOf(p.name()); m != nil {
		ps.Mirror = m.Name
	}
	if p.cfg.IsOverlay() {
		ps.Overlay = d.overlayStatus(p)
	}
	if p.state() == stateLinkDown {
		ps.Reason = fmt.Sprintf("interface down or without carrier: out of floods, its entries flushed; back when it is up (%s)", p.why)
	}
	return ps
}

// namedCounts names counters as their enum does (tbpf.CounterNames for a
// port's, tbpf.VLANCounterNames for a VLAN's).
func namedCounts(names []string, vals []uint64) ctl.Counts {
	out := make(ctl.Counts, len(names))
	for i, n := range names {
		out[i] = ctl.Count{Name: n, Value: vals[i]}
	}
	return out
}

func dropMap(s tbpf.PortStats) map[string]uint64 {
	m := map[string]uint64{}
	for i, n := range s.Drops {
		m[tbpf.DropReason(i).String()] = n
	}
	return m
}

func (d *Daemon) stats(only string) ([]ctl.PortStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs, err := d.sortedBridges(only)
	if err != nil {
		return nil, err
	}
	out := []ctl.PortStats{}
	for _, b := range bs {
		for _, p := range b.ports {
			s, err := d.counters.Stats(p.slot)
			if err != nil {
				return nil, fmt.Errorf("bridge %q: port %q: %w", b.cfg.Name, p.name(), err)
			}
			m := string(p.mode)
			if p.mode == "" {
				m = stateDown
			}
			out = append(out, ctl.PortStats{
				Bridge: b.cfg.Name, Port: p.name(), Mode: m,
				Counters: namedCounts(tbpf.CounterNames(), s.C[:]), Drops: dropMap(s),
			})
		}
	}
	return out, nil
}

// vlanStats are the counters of every VLAN of the VLAN-aware bridges.
func (d *Daemon) vlanStats(only string) ([]ctl.VLANStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs, err := d.sortedBridges(only)
	if err != nil {
		return nil, err
	}
	held, err := d.counters.VLANs()
	if err != nil {
		return nil, err
	}
	index := map[[2]uint16]uint16{}
	for _, v := range held {
		index[[2]uint16{v.Bridge, v.VID}] = v.Index
	}
	out := []ctl.VLANStats{}
	for _, b := range bs {
		for _, vid := range b.vlans() {
			vs := ctl.VLANStats{Bridge: b.cfg.Name, VLAN: vid, Ports: []string{}}
			for _, p := range b.ports {
				if p.cfg.Carries(vid) {
					vs.Ports = append(vs.Ports, p.name())
				}
			}
			var s tbpf.VLANStats
			if idx, ok := index[[2]uint16{b.id, vid}]; ok {
				if s, err = d.counters.VLANStats(idx); err != nil {
					return nil, fmt.Errorf("bridge %q: VLAN %d: %w", b.cfg.Name, vid, err)
				}
			}
			vs.Counters = namedCounts(tbpf.VLANCounterNames(), s.C[:]) // zeros for a VLAN the datapath has no index for yet
			out = append(out, vs)
		}
	}
	return out, nil
}

// fdbNames are what the table's entries are named by, taken under d.mu
// so that a walk of the table needs not hold it: each bridge's name and
// its ports' by slot, with an overlay port's VNI.
type fdbNames map[uint16]*fdbBridge

type fdbBridge struct {
	name   string
	ports  map[uint16]fdbPort
	frozen map[moveKey]bool // its frozen addresses (mobility.go)
}

type fdbPort struct {
	name string
	vni  uint32 // an overlay port's; 0: none
}

// fdbFilter is what fdb show and fdb flush take of the table's entries:
// those on one of slots (nil: on any port) of VLAN vlan (nil: of any).
type fdbFilter struct {
	slots map[uint16]bool
	vlan  *uint16
}

func (f fdbFilter) takes(e datapath.FDBEntry) bool {
	return (f.slots == nil || f.slots[e.Slot]) && (f.vlan == nil || e.VLAN == *f.vlan)
}

// fdbFilterOf is the filter of an fdb show or flush request over the
// bridges bs: its port, by name, must be one of theirs.
func fdbFilterOf(req ctl.Request, bs []*bridgeState) (fdbFilter, error) {
	f := fdbFilter{vlan: req.OnlyVLAN}
	if f.vlan != nil && *f.vlan > 4094 {
		return f, fmt.Errorf("vlan %d: a VLAN is 0 (untagged) to 4094", *f.vlan)
	}
	if req.Port == "" {
		return f, nil
	}
	f.slots = map[uint16]bool{}
	for _, b := range bs {
		if p := b.port(req.Port); p != nil {
			f.slots[p.slot] = true
		}
	}
	switch {
	case len(f.slots) > 0:
		return f, nil
	case req.Bridge != "":
		return f, fmt.Errorf("bridge %q has no port %q", req.Bridge, req.Port)
	}
	return f, fmt.Errorf("no bridge has a port %q", req.Port)
}

// tableNames takes the names of the bridge of an fdb show request (every
// bridge: ""), and the filter of its entries.
func (d *Daemon) tableNames(req ctl.Request) (fdbNames, fdbFilter, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs, err := d.sortedBridges(req.Bridge)
	if err != nil {
		return nil, fdbFilter{}, err
	}
	f, err := fdbFilterOf(req, bs)
	if err != nil {
		return nil, f, err
	}
	names := fdbNames{}
	for _, b := range bs {
		nb := &fdbBridge{name: b.cfg.Name, ports: map[uint16]fdbPort{}}
		for _, p := range b.ports {
			fp := fdbPort{name: p.name()}
			if p.cfg.IsOverlay() {
				fp.vni = p.cfg.VXLAN
			}
			nb.ports[p.slot] = fp
		}
		for _, f := range b.frozen {
			if nb.frozen == nil {
				nb.frozen = map[moveKey]bool{}
			}
			k := moveKey{vlan: f.VLAN}
			copy(k.mac[:], f.MAC)
			nb.frozen[k] = true
		}
		names[b.id] = nb
	}
	return names, f, nil
}

// fdbStream serves `trestle fdb show`: the table is walked a chunk at a
// time, without the daemon's lock, and each chunk named and sent as it is
// read, so that the daemon holds a chunk of it, never all, and a slow
// client holds up nothing but its own answer (ctl/fdb.go says how the
// client makes one table of them).
func (d *Daemon) fdbStream(_ context.Context, req ctl.Request, s *ctl.Stream) (err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("an fdb show failed inside the daemon", "panic", r)
			err = fmt.Errorf("%s: internal error: %v", req.Cmd, r)
		}
	}()
	names, filter, err := d.tableNames(req)
	if err != nil {
		return err
	}
	if err := s.Header(ctl.FDBHeader{Chunk: datapath.FDBChunk}); err != nil {
		return nil // the client is gone
	}
	n, werr := d.walkFDBShow(names, filter, s.FDBChunk)
	end := ctl.FDBEnd{Entries: n}
	if werr != nil {
		end.Error = werr.Error()
	}
	_ = s.EndFDB(end)
	return nil
}

// walkFDBShow walks the table and sends the entries of the bridges names
// holds that filter takes, a chunk at a time, named as `fdb show` gives
// them; it returns how many it sent.
func (d *Daemon) walkFDBShow(names fdbNames, filter fdbFilter, send func([]ctl.FDBEntry) error) (int, error) {
	sent := 0
	out := make([]ctl.FDBEntry, 0, datapath.FDBChunk)
	err := d.table.WalkFDB(func(es []datapath.FDBEntry) error {
		out = out[:0]
		for _, e := range es {
			b := names[e.Bridge]
			if b == nil || !filter.takes(e) {
				continue
			}
			port, vtep, stale := "", "", false
			if p, ok := b.ports[e.Slot]; ok {
				port = p.name
				if p.vni != 0 {
					if a, ok := d.ovl.mgr.RemoteOf(p.vni, e.MAC); ok {
						vtep, stale = a.String(), d.ovl.mgr.IsStale(p.vni, e.MAC)
					}
				}
			}
			age := 0.0
			if !e.Static {
				age = e.Age.Round(time.Millisecond).Seconds()
			}
			fk := moveKey{vlan: e.VLAN}
			copy(fk.mac[:], e.MAC)
			out = append(out, ctl.FDBEntry{Bridge: b.name, MAC: e.MAC.String(), VLAN: e.VLAN, Port: port, Static: e.Static, AgeSeconds: age, VTEP: vtep, Stale: stale,
				Frozen: e.Static && b.frozen[fk]})
		}
		if len(out) == 0 {
			return nil
		}
		if err := send(out); err != nil {
			return fmt.Errorf("send the table: %w", err)
		}
		sent += len(out)
		return nil
	})
	return sent, err
}

// tableCounts counts the entries of each bridge (by id), walking the table
// a chunk at a time.
func (d *Daemon) tableCounts() (map[uint16]int, error) {
	counts := map[uint16]int{}
	err := d.table.WalkFDB(func(es []datapath.FDBEntry) error {
		for _, e := range es {
			counts[e.Bridge]++
		}
		return nil
	})
	return counts, err
}

func parseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("%q is not a MAC address like 02:00:00:00:00:01", s)
	}
	return mac, nil
}

// entryOf finds the bridge and address of an fdb add or del request, and
// refuses an address the config holds static (what to do says how).
func (d *Daemon) entryOf(req ctl.Request, what string) (*bridgeState, net.HardwareAddr, error) {
	b, ok := d.bridges[req.Bridge]
	if !ok {
		return nil, nil, errNoBridge(req.Bridge)
	}
	mac, err := parseMAC(req.MAC)
	if err != nil {
		return nil, nil, err
	}
	k := staticKey(config.Static{MAC: mac, VLAN: req.VLAN})
	for _, cs := range b.cfg.Static {
		if staticKey(cs) == k {
			return nil, nil, fmt.Errorf("%s vlan %d is a static entry of the config (line %d): %s", mac, req.VLAN, cs.Line, what)
		}
	}
	for i := range b.cfg.Ports {
		for _, as := range b.cfg.Ports[i].AllowedStatics() {
			if staticKey(as) == k {
				return nil, nil, fmt.Errorf("%s vlan %d is bound to locked port %q by its allowed_macs: %s", mac, req.VLAN, as.Port, what)
			}
		}
	}
	return b, mac, nil
}

// fdbAdd writes a static entry from the CLI. It is not in the config: a
// reload keeps it, and so does a restart with persist (the table marks it as
// the CLI's); without persist a restart forgets it.
func (d *Daemon) fdbAdd(req ctl.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.entryVLAN(&req); err != nil {
		return err
	}
	b, mac, err := d.entryOf(req, "change it there")
	if err != nil {
		return err
	}
	if mac[0]&1 != 0 || net.HardwareAddr(make([]byte, 6)).String() == mac.String() {
		return fmt.Errorf("%s: a static entry needs a unicast address", mac)
	}
	if req.VLAN > 4094 {
		return fmt.Errorf("vlan %d: must be 0..4094", req.VLAN)
	}
	p := b.port(req.Port)
	if p == nil {
		return fmt.Errorf("%q is not a port of bridge %q", req.Port, b.cfg.Name)
	}
	if m := p.span(); m != nil {
		return fmt.Errorf("%q is the span port of mirror %q: it sends copies, and no station lives there", req.Port, m.Name)
	}
	st := config.Static{MAC: mac, Port: req.Port, VLAN: req.VLAN}
	why, err := d.macHolder(b, mac, req.VLAN, req.Port)
	if err != nil {
		return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
	}
	if why != "" {
		return fmt.Errorf("%s vlan %d: %s; an address is bound to one port (trestle fdb del it first if it moved)", mac, req.VLAN, why)
	}
	k := staticKey(st)
	if _, ok := b.cliStatics[k]; !ok && len(b.cliStatics) >= maxCLIStatics {
		return fmt.Errorf("bridge %q holds %d static entries from the CLI, the most it may: put them in the config", b.cfg.Name, maxCLIStatics)
	}
	if p.mode == "" {
		b.cliStatics[k] = st
		return fmt.Errorf("port %q is down (%s): the entry is kept and written when it comes up", req.Port, p.why)
	}
	e := datapath.FDBEntry{Bridge: b.id, VLAN: st.VLAN, MAC: mac, Ifindex: uint32(p.ifindex), Slot: p.slot, Static: true, User: true}
	if err := d.table.AddFDB(e); err != nil {
		return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
	}
	b.cliStatics[k] = st
	b.written[k] = staticEntry{Static: st, Ifindex: p.ifindex, Slot: p.slot, User: true}
	delete(b.frozen, k) // bound now by the CLI (where it was frozen)
	d.nudgeOverlay()    // advertised as static at once, if an overlay's
	return nil
}

// entryVLAN checks an fdb add's VLAN on a VLAN-aware bridge: it must be one
// its port carries; none means the port's untagged VLAN.
func (d *Daemon) entryVLAN(req *ctl.Request) error {
	b, ok := d.bridges[req.Bridge]
	if !ok || !b.cfg.VLANAware() {
		return nil
	}
	p := b.port(req.Port)
	if p == nil {
		return nil // entryOf's checks say what is wrong
	}
	if req.VLAN == 0 {
		if req.VLAN = p.cfg.PVID(); req.VLAN == 0 {
			return fmt.Errorf("port %q is a trunk with no native VLAN: give --vlan", req.Port)
		}
	}
	if !p.cfg.Carries(req.VLAN) {
		return fmt.Errorf("port %q does not carry VLAN %d (it carries %s)", req.Port, req.VLAN, config.VLANRanges(p.cfg.VLANs()))
	}
	return nil
}

// fdbDel deletes an entry, learned or static (from the CLI); its room on
// the port and in the bridge is free at once.
func (d *Daemon) fdbDel(req ctl.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, mac, err := d.entryOf(req, "remove it there and reload")
	if err != nil {
		return err
	}
	k := staticKey(config.Static{MAC: mac, VLAN: req.VLAN})
	_, wasCLI := b.cliStatics[k]
	delete(b.cliStatics, k)
	delete(b.frozen, k) // released (mobility.go)
	delete(b.written, k)
	if _, err := d.table.DelFDB(b.id, req.VLAN, mac); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			if wasCLI {
				return nil
			}
			if req.VLAN == 0 && b.cfg.VLANAware() {
				return fmt.Errorf("bridge %q is VLAN-aware: give the entry's --vlan", b.cfg.Name)
			}
			return fmt.Errorf("bridge %q has no entry for %s in vlan %d", b.cfg.Name, mac, req.VLAN)
		}
		return fmt.Errorf("bridge %q: %w", b.cfg.Name, err)
	}
	d.nudgeOverlay() // withdrawn at once, if an overlay's
	return nil
}

// FlushResult says how many learned entries a flush removed.
type FlushResult struct {
	Removed int `json:"removed"`
}

// fdbFlush removes learned entries (of one bridge or every one, of one
// port, of one VLAN); static entries stay.
func (d *Daemon) fdbFlush(req ctl.Request) (FlushResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var res FlushResult
	bs, err := d.sortedBridges(req.Bridge)
	if err != nil {
		return res, err
	}
	ids := map[uint16]*bridgeState{}
	for _, b := range bs {
		ids[b.id] = b
	}
	filter, err := fdbFilterOf(req, bs)
	if err != nil {
		return res, err
	}
	// A chunk at a time: its learned entries go before the next is read.
	var gone []datapath.FDBEntry
	err = d.table.WalkFDB(func(es []datapath.FDBEntry) error {
		gone = gone[:0]
		for _, e := range es {
			if !e.Static && ids[e.Bridge] != nil && filter.takes(e) {
				gone = append(gone, e)
			}
		}
		n, err := d.table.DelFDBs(gone)
		res.Removed += n
		return err
	})
	if res.Removed > 0 {
		d.nudgeOverlay() // withdrawn at once, if an overlay's
	}
	if err != nil {
		return res, fmt.Errorf("flush: %d removed, then: %w", res.Removed, err)
	}
	return res, nil
}

// badRequest logs a request the socket could not read: at most one line a
// second, with how many more came meanwhile, so that a client spraying
// garbage cannot flood the log.
func (d *Daemon) badRequest(err error) {
	d.badMu.Lock()
	defer d.badMu.Unlock()
	if now := time.Now(); now.Sub(d.badLogged) >= time.Second {
		d.log.Warn("bad request on the control socket", "err", err, "suppressed", d.badSuppressed)
		d.badLogged, d.badSuppressed = now, 0
		return
	}
	d.badSuppressed++
}
