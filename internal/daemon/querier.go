package daemon

import (
	"crypto/sha256"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frame"
)

// The querier (docs/switching.md, "Querier"): a snooping bridge with
// multicast_querier sends IGMP and MLD general queries into each of its
// VLANs while it hears no querier that wins the election over it (RFC
// 3376 6.6.2, RFC 3810 7.6.2: the lowest address), so that hosts report
// their groups where no multicast router asks them. Its queries leave by
// each forwarding interface port that carries the VLAN (tagged where the
// port sends the VLAN tagged), as the loop probes do (edge.go): a patch
// port's peer bridge has its own querier, and an overlay port's far side
// is the fabric, whose VTEPs query their own ports.
//
// Its addresses, as the Linux bridge's (net/bridge/br_multicast.c):
//
//   - IGMP queries come from 0.0.0.0, as the Linux bridge's do unless
//     mcast_query_use_ifaddr: the bridge has no IPv4 address. 0.0.0.0 is
//     not an address that wins an election: any querier with an address
//     silences the bridge's. A query from 0.0.0.0 (another switch's
//     querier) does not, so that two such switches both query rather than
//     both fall silent (duplicate general queries cost a report each);
//   - MLD queries come from a link-local address (RFC 3810 5.1.14: hosts
//     drop others): fe80:: with the EUI-64 of the bridge's querier MAC,
//     which is locally administered and made from the machine's id and
//     the bridge's name, stable across restarts and apart from another
//     machine's bridge of the same name. It takes part in the election
//     as any address does.
//
// The queries are IGMPv3 and MLDv2, which version 2 and version 1 hosts
// answer too (RFC 3376 7.1, RFC 3810 8.2.1); a version 2 query would turn
// version 3 hosts to version 2 (RFC 3376 7.2.1), whose reports name no
// sources. The Linux bridge sends IGMPv2 and MLDv1 by default
// (mcast_igmp_version 2, mcast_mld_version 1).
//
// Its own queries are a querier seen for the snooping (snoopBridge.querier,
// own): reports go to the router ports, and a leave is answered with two
// group-specific queries out of the port it came by, a second apart
// (last member query count 2, interval 1 s), which the remaining members
// answer before lastMemberTime ends their membership.
//
// Beyond a patch or overlay port is another switch, with its own querier,
// whose queries do not cross to this one: no query comes in by that port,
// so it is no router port, and reports sent to router ports only would
// never tell the switches beyond which groups have members here (nor this
// one theirs); a sender's switch with members of its own would then send
// the group's frames to them alone. So while the bridge's own querier is
// the one, reports and leaves go to the far ports as well as the router
// ports (reportSlots), as they would toward a querier across the fabric,
// and a leave that comes in by a far port is not asked about (the bridge
// cannot ask the hosts beyond it): that membership ages.

// querierConf is a querier bridge's configuration.
type querierConf struct {
	interval time.Duration // query interval
	mac      net.HardwareAddr
	ip6      netip.Addr // the MLD queries' link-local source
}

// The timers that follow the query interval (RFC 3376 8, RFC 3810 9, with
// robustness 2).
const (
	startupQueries   = 2 // robustness: the startup query count
	lastMemberCount  = 2
	lastMemberPeriod = time.Second
)

// responseInterval is the query response interval: the RFC's 10 s, or
// half the query interval when that is shorter (it must be less, RFC
// 3376 8.3).
func (q *querierConf) responseInterval() time.Duration { return min(10*time.Second, q.interval/2) }

// otherPresent is the other querier present interval (RFC 3376 8.5):
// how long a querier that won is heard of before the bridge's resumes.
func (q *querierConf) otherPresent() time.Duration {
	return startupQueries*q.interval + q.responseInterval()/2
}

// ownQuerier is the bridge's querier of one family in one VLAN.
type ownQuerier struct {
	startup    int       // startup queries still to send after the next
	next       time.Time // when the next general query goes
	otherUntil time.Time // silenced by another querier until then
	// by: the querier that silenced it, said in the log once until it
	// resumes (silent).
	by     netip.Addr
	silent bool
}

// heardQuerier is the querier of a family in a VLAN as snooping knows it:
// one heard (its address and the port it came by), or the bridge's own.
type heardQuerier struct {
	until time.Time
	addr  netip.Addr
	slot  uint16
	own   bool
}

// beats says whether querier x wins the election over y: an address wins
// over 0.0.0.0, the lower of two addresses wins, and of two 0.0.0.0 the
// bridge's own (a switch's 0.0.0.0 silences no other).
func (x heardQuerier) beats(y heardQuerier) bool {
	switch xu, yu := x.addr.IsUnspecified(), y.addr.IsUnspecified(); {
	case xu && yu:
		return x.own && !y.own
	case xu != yu:
		return yu
	}
	return x.addr.Less(y.addr)
}

// hostID is what makes the querier's MAC this machine's: its machine id,
// else its host name.
func hostID() string {
	if b, err := os.ReadFile("/etc/machine-id"); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	h, _ := os.Hostname()
	return h
}

// querierAddrs are a bridge's querier MAC, locally administered and
// unicast, and the link-local IPv6 address of its EUI-64 (RFC 4291
// appendix A).
func querierAddrs(host, bridge string) (net.HardwareAddr, netip.Addr) {
	h := sha256.Sum256([]byte("trestle querier\x00" + host + "\x00" + bridge))
	mac := net.HardwareAddr{h[0]&0xfc | 0x02, h[1], h[2], h[3], h[4], h[5]}
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15] = mac[0]^0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]
	return mac, netip.AddrFrom16(a)
}

// ownAddr is the bridge's querier address of the family of key.
func (b *snoopBridge) ownAddr(key groupID) netip.Addr {
	if key.addr.Is4() {
		return netip.IPv4Unspecified()
	}
	return b.q.ip6
}

// vlans are the VLANs the bridge's ports that queries leave by carry (0:
// a bridge that is not VLAN-aware), sorted: a VLAN no query reaches has
// no querier of the bridge's, which would keep its reports from the other
// ports for nothing.
func (b *snoopBridge) vlans() []uint16 {
	var out []uint16
	for _, p := range b.ports {
		if p.ifindex <= 0 {
			continue
		}
		if p.vlans == nil {
			out = append(out, 0)
		}
		out = append(out, p.vlans...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// heard is a query from src by port slot in VLAN vlan: the querier
// snooping knows of, unless the one it knows beats it still, and the
// bridge's own querier silenced if src wins over it.
func (b *snoopBridge) heard(vlan, slot uint16, src netip.Addr, now time.Time) {
	key := querierOf(vlan, src)
	h := heardQuerier{until: now.Add(querierInterval), addr: src, slot: slot}
	if b.q != nil {
		if src == b.q.ip6 {
			return // the bridge's own query, come back by a loop
		}
		if src.Is6() && !src.IsLinkLocalUnicast() {
			// Hosts drop an MLD query from any other source (RFC 3810
			// 5.1.14), as the Linux bridge does (ipv6_mc_check_mld): it
			// asks nobody, so it silences no querier that does.
			return
		}
		own := heardQuerier{addr: b.ownAddr(key), own: true}
		if h.beats(own) {
			o := b.ownOf(key, now)
			// Silent until then; then a query at once, and one an
			// interval (RFC 3376 6.6.2: no startup again).
			o.otherUntil = now.Add(b.q.otherPresent())
			o.startup, o.by = 0, src
		}
	}
	if was, ok := b.querier[key]; ok && was.until.After(now) && (was.addr != src || was.own) && was.beats(h) {
		return
	}
	b.querier[key] = h
}

// ownOf is the bridge's querier of key, made when first asked: it sends
// its startup queries at once.
func (b *snoopBridge) ownOf(key groupID, now time.Time) *ownQuerier {
	o := b.own[key]
	if o == nil {
		o = &ownQuerier{startup: startupQueries - 1, next: now}
		b.own[key] = o
	}
	return o
}

// reportSlots are the ports reports and leaves of querier h's family go
// to: the router ports, and while h is the bridge's own querier the far
// ports too.
func (b *snoopBridge) reportSlots(h heardQuerier, routers []uint16) []uint16 {
	if !h.own {
		return routers
	}
	out := slices.Clone(routers)
	for slot, p := range b.ports {
		if p.far {
			out = append(out, slot)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// unasked says whether a leave from port slot goes unasked: the port is a
// far one and the bridge's own querier is the one.
func (b *snoopBridge) unasked(id groupID, slot uint16, now time.Time) bool {
	h := b.querier[querierOf(id.vlan, id.addr)]
	return b.ports[slot].far && h.own && h.until.After(now)
}

// pendingQuery is a group-specific query still to send, after a leave.
type pendingQuery struct {
	key  groupID // the group, in its VLAN
	slot uint16
	at   time.Time
	left int
}

// askLeft answers a leave from port slot with the group-specific queries,
// if the bridge's own querier is the one: the first goes with the next
// flush.
func (b *snoopBridge) askLeft(id groupID, slot uint16, now time.Time) {
	if h := b.querier[querierOf(id.vlan, id.addr)]; b.q == nil || !h.own || !h.until.After(now) {
		return
	}
	for _, p := range b.pending {
		if p.key == id && p.slot == slot {
			return
		}
	}
	b.pending = append(b.pending, pendingQuery{key: id, slot: slot, at: now, left: lastMemberCount})
}

// queryTick sends the general queries that are due and the pending
// group-specific ones. Called with s.mu held.
func (s *snooper) queryTick(b *snoopBridge, now time.Time) {
	if b.q == nil {
		return
	}
	vlans := b.vlans()
	for key := range b.own {
		if !slices.Contains(vlans, key.vlan) {
			delete(b.own, key)
		}
	}
	for _, v := range vlans {
		for _, fam := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
			key := groupID{v, fam}
			o := b.ownOf(key, now)
			if o.otherUntil.After(now) {
				if !o.silent {
					o.silent = true
					s.log.Info("multicast querier: another querier wins the election; the bridge's stops", "bridge", b.name, "vlan", v, "querier", o.by, "resumes_when_quiet_for", b.q.otherPresent())
				}
				continue
			}
			if o.silent {
				o.silent = false
				s.log.Info("multicast querier: the other querier went quiet; the bridge's queries again", "bridge", b.name, "vlan", v, "was", o.by)
			}
			if o.next.After(now) {
				continue
			}
			s.sendQuery(b, key, netip.Addr{}, nil, now)
			b.querier[key] = heardQuerier{until: now.Add(b.q.otherPresent()), addr: b.ownAddr(key), own: true}
			if o.startup > 0 {
				o.startup--
				o.next = now.Add(b.q.interval / 4)
			} else {
				o.next = now.Add(b.q.interval)
			}
		}
	}
	s.flushPending(b, now)
}

// flushPending sends the group-specific queries that are due.
func (s *snooper) flushPending(b *snoopBridge, now time.Time) {
	keep := b.pending[:0]
	for _, p := range b.pending {
		if p.at.After(now) {
			keep = append(keep, p)
			continue
		}
		if _, ok := b.ports[p.slot]; !ok {
			continue
		}
		s.sendQuery(b, groupID{p.key.vlan, querierOf(p.key.vlan, p.key.addr).addr}, p.key.addr, []uint16{p.slot}, now)
		if p.left--; p.left > 0 {
			p.at = now.Add(lastMemberPeriod)
			keep = append(keep, p)
		}
	}
	b.pending = keep
}

// sendQuery sends the bridge's query of key's family into key's VLAN: a
// general one (group invalid) out of every port that carries the VLAN, or
// one of group out of the ports only.
func (s *snooper) sendQuery(b *snoopBridge, key groupID, group netip.Addr, only []uint16, now time.Time) {
	maxResp := b.q.responseInterval()
	if group.IsValid() {
		maxResp = lastMemberPeriod
	}
	slots := make([]uint16, 0, len(b.ports))
	for slot := range b.ports {
		slots = append(slots, slot)
	}
	slices.Sort(slots)
	for _, slot := range slots {
		p := b.ports[slot]
		if p.ifindex <= 0 || (only != nil && !slices.Contains(only, slot)) {
			continue
		}
		var tags []frame.Tag
		switch {
		case p.vlans == nil && key.vlan == 0:
		case !slices.Contains(p.vlans, key.vlan):
			continue
		case key.vlan != p.pvid || p.nativeTagged:
			tags = []frame.Tag{frame.CTag(key.vlan)}
		}
		var f []byte
		if key.addr.Is4() {
			f = frame.IGMPv3QueryOf(tags, b.q.mac, netip.IPv4Unspecified(), group, maxResp, b.q.interval)
		} else {
			f = frame.MLDv2Query(tags, b.q.mac, b.q.ip6, group, maxResp, b.q.interval)
		}
		if s.send == nil {
			continue
		}
		if err := s.send(p.ifindex, f); err != nil {
			s.log.Debug("send a multicast query", "bridge", b.name, "port", p.name, "vlan", key.vlan, "err", err)
			continue
		}
		b.counts.QueriesSent++
	}
}

// queriers are bridge's queriers as `trestle show` lists them: of each
// family in each VLAN, the one heard last within its interval or the
// bridge's own, sorted by VLAN and family.
func (s *snooper) queriers(bridge string, now time.Time) []ctl.Querier {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ctl.Querier{}
	for _, b := range s.bridges {
		if b.name != bridge {
			continue
		}
		for key, h := range b.querier {
			if !h.until.After(now) {
				continue
			}
			q := ctl.Querier{VLAN: key.vlan, Family: "igmp", Address: h.addr.String(), Own: h.own, ExpiresSeconds: h.until.Sub(now).Seconds()}
			if key.addr.Is6() {
				q.Family = "mld"
			}
			if !h.own {
				q.Port = b.ports[h.slot].name
			}
			out = append(out, q)
		}
	}
	slices.SortFunc(out, func(a, b ctl.Querier) int {
		if a.VLAN != b.VLAN {
			return int(a.VLAN) - int(b.VLAN)
		}
		return strings.Compare(a.Family, b.Family)
	})
	return out
}

// configureQuerier turns the bridge's querier on (its addresses from the
// machine and the bridge's name), changes its interval, or turns it off:
// its state goes, and snooping forgets it as a querier seen.
func (s *snooper) configureQuerier(b *snoopBridge, q *querierConf) {
	if q == nil {
		b.q, b.pending = nil, nil
		clear(b.own)
		for key, h := range b.querier {
			if h.own {
				delete(b.querier, key)
			}
		}
		return
	}
	if b.q != nil && b.q.interval != q.interval {
		for _, o := range b.own {
			o.next = time.Time{} // a query at once, then at the new interval
		}
	}
	q.mac, q.ip6 = querierAddrs(s.host, b.name)
	b.q = q
}
