package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/prometheus/client_golang/prometheus"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// Multicast snooping (docs/switching.md, "Multicast snooping"; RFC 4541).
// The datapath copies every IGMP, MLD and PIM message that comes in by a
// port of a bridge with multicast_snooping to the snoop ring
// (bpf/lib/snoop.h); the daemon parses them here, with gopacket's layers
// (the variable-length IGMPv3 and MLDv2 records are no work for the
// datapath), keeps each bridge's memberships, router ports and queriers,
// and writes the group table the datapath forwards by: for each group with
// members, its member ports and the router ports; for each VLAN where a
// querier has been seen, the router ports, where reports and leaves go
// (the unspecified group of the querier's family: 0.0.0.0 for IGMP, ::
// for MLD). Every membership is a tenant's: a port holds at most
// maxPortGroups of them and a bridge maxBridgeGroups groups, so that one
// port's flood of reports leaves room for the others.

// The RFCs' default timers (RFC 3376 8, RFC 3810 9): robustness 2, query
// interval 125 s, query response interval 10 s.
const (
	// membershipInterval: a membership no report refreshed ends (RFC 3376
	// 8.4: 2 x 125 s + 10 s).
	membershipInterval = 260 * time.Second
	// querierInterval: a querier no query was heard from since is gone,
	// and so is a router port learned from its queries or PIM hellos (RFC
	// 3376 8.5, other querier present interval: 2 x 125 s + 10 s / 2).
	querierInterval = 255 * time.Second
	// lastMemberTime: after a leave, while a querier answers it with
	// group-specific queries, a membership no report confirms ends (RFC
	// 3376 8.9: 2 queries 1 s apart).
	lastMemberTime = 2 * time.Second
	// maxBridgeGroups and maxPortGroups bound the table per bridge and per
	// port (a tenant); the datapath's holds tbpf.MaxGroups of all bridges.
	maxBridgeGroups = 1024
	maxPortGroups   = 128
)

// snoopTable is a dataplane with a group table and a snoop ring
// (internal/datapath).
type snoopTable interface {
	SetGroup(datapath.GroupKey, []uint16) error
	DelGroup(datapath.GroupKey) error
	ClearGroups() error
	Snoop() (snoopReader, error)
	SnoopLost() (uint64, error)
}

type snoopReader = ringReader[datapath.SnoopMsg]

func (d realDataplane) Snoop() (snoopReader, error) { return d.Datapath.Snoop() }

// snooper is every snooping bridge's state, under its own lock: messages
// arrive beside applies, which tell it the ports (configure).
type snooper struct {
	mu      sync.Mutex
	table   snoopTable // nil: the dataplane has none
	log     *slog.Logger
	cleared bool // the table emptied of what an earlier daemon wrote
	bridges map[uint16]*snoopBridge
	full    bool // the table refused an entry: said once until it takes one
	// send sends a frame out of an interface (the querier's queries,
	// querier.go); host makes the querier's addresses this machine's.
	send func(ifindex int, frame []byte) error
	host string
}

// snoopPort is what snooping needs of a port's configuration.
type snoopPort struct {
	name      string
	fastLeave bool
	router    bool // multicast_router: always a router port
	// For the querier: the interface its queries leave by (0: none, a
	// port that does not forward or whose far side is not a host's: a
	// patch, overlay or span port), the VLANs it carries (nil: the bridge
	// is not VLAN-aware), and which of them leaves untagged (pvid, unless
	// nativeTagged).
	ifindex      int
	vlans        []uint16
	pvid         uint16
	nativeTagged bool
	// far: a forwarding patch or overlay port, whose far side is another
	// switch the querier does not query (querier.go, reportSlots).
	far bool
}

type groupID struct {
	vlan uint16
	addr netip.Addr
}

// membership is a port's of a group: since when, until when, and its
// sources (IGMPv3 and MLDv2 include mode); nil sources: any source.
type membership struct {
	seen, expires time.Time
	sources       map[netip.Addr]bool
}

type snoopBridge struct {
	name    string
	ports   map[uint16]snoopPort
	groups  map[groupID]map[uint16]*membership
	routers map[uint16]time.Time     // learned router ports, until
	querier map[groupID]heardQuerier // the querier of a family (0.0.0.0: IGMP, ::: MLD) in the VLAN, heard or the bridge's own
	written map[datapath.GroupKey][]uint16
	counts  snoopCounts
	// The bridge's own querier (querier.go): nil when multicast_querier
	// is off; its state of each family in each VLAN; the group-specific
	// queries that leaves asked for, still to send.
	q       *querierConf
	own     map[groupID]*ownQuerier
	pending []pendingQuery
}

// snoopCounts are a bridge's messages since the daemon started.
type snoopCounts struct {
	Reports, Leaves, Queries, PIM, Malformed uint64
	// QueriesSent: the querier's queries, a frame out of a port each.
	QueriesSent uint64
	// Refused: memberships not taken, the port or the bridge at its bound
	// or the table full.
	Refused uint64
}

func newSnooper(table snoopTable, log *slog.Logger) *snooper {
	return &snooper{table: table, log: log, bridges: map[uint16]*snoopBridge{}, host: hostID()}
}

// snoopConfig is the snooping bridges' ports as an apply leaves them.
func (d *Daemon) snoopConfig() map[uint16]*snoopBridge {
	out := map[uint16]*snoopBridge{}
	for _, b := range d.bridges {
		if !b.cfg.MulticastSnooping {
			continue
		}
		sb := &snoopBridge{name: b.cfg.Name, ports: map[uint16]snoopPort{}}
		if b.cfg.MulticastQuerier {
			sb.q = &querierConf{interval: b.cfg.MulticastQueryInterval}
		}
		for _, p := range b.ports {
			sp := snoopPort{name: p.name(), fastLeave: p.cfg.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_FAST_LEAVE),
				router: p.cfg.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_MCAST_ROUTER),
				vlans:  p.cfg.VLANs(), pvid: p.cfg.PVID(), nativeTagged: p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED)}
			// As the loop probes (sendProbes): an interface's port that
			// forwards, whose far side is a host or a switch.
			switch {
			case !p.forwards():
			case p.cfg.IsPatch() || p.cfg.IsOverlay():
				sp.far = true
			case p.ifindex > 0 && p.span() == nil:
				sp.ifindex = p.ifindex
			}
			sb.ports[p.slot] = sp
		}
		out[b.id] = sb
	}
	return out
}

// configure takes the bridges that snoop and their ports: the state of a
// bridge that no longer snoops, and of a port that left, goes, and the
// table is written again.
func (s *snooper) configure(want map[uint16]*snoopBridge, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == nil {
		return
	}
	if !s.cleared {
		if err := s.table.ClearGroups(); err != nil {
			s.log.Warn("empty the group table", "err", err)
		}
		s.cleared = true
	}
	for id, b := range s.bridges {
		if _, ok := want[id]; !ok {
			b.ports = nil
			b.groups, b.routers, b.querier, b.q = nil, nil, nil, nil
			s.write(id, b, now)
			delete(s.bridges, id)
		}
	}
	for id, w := range want {
		b := s.bridges[id]
		if b == nil {
			b = &snoopBridge{groups: map[groupID]map[uint16]*membership{}, routers: map[uint16]time.Time{},
				querier: map[groupID]heardQuerier{}, own: map[groupID]*ownQuerier{}, written: map[datapath.GroupKey][]uint16{}}
			s.bridges[id] = b
		}
		b.name, b.ports = w.name, w.ports
		s.configureQuerier(b, w.q)
		for g, ms := range b.groups {
			for slot := range ms {
				if _, ok := b.ports[slot]; !ok {
					delete(ms, slot)
				}
			}
			if len(ms) == 0 {
				delete(b.groups, g)
			}
		}
		for slot := range b.routers {
			if _, ok := b.ports[slot]; !ok {
				delete(b.routers, slot)
			}
		}
		s.write(id, b, now)
	}
}

// snoopOp is what one message, or one record of it, says.
type snoopOp struct {
	kind    snoopKind
	group   netip.Addr
	sources []netip.Addr
	src     netip.Addr // a query's: its querier
}

type snoopKind int

const (
	opJoin    snoopKind = iota // a report of any source (IGMPv2, MLDv1, an exclude-mode record)
	opInclude                  // the sources, and only them (IS_IN, TO_IN; none: a leave)
	opAllow                    // the sources too (ALLOW)
	opBlock                    // not the sources any more (BLOCK)
	opLeave                    // an IGMPv2 leave, an MLDv1 done
	opQuery                    // a query: a querier, on a router port
	opPIM                      // a PIM hello: a router
)

func ipOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func ipsOf(ips []net.IP) []netip.Addr {
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ipOf(ip))
	}
	return out
}

// recordOp is an IGMPv3 group record's or an MLDv2 address record's type
// as an op (the types are the same numbers, RFC 3376 4.2.12, RFC 3810
// 5.2.12).
func recordOp(t uint8, group net.IP, sources []net.IP) snoopOp {
	op := snoopOp{group: ipOf(group), sources: ipsOf(sources)}
	switch t {
	case 2, 4: // MODE_IS_EXCLUDE, CHANGE_TO_EXCLUDE: any source (the datapath does not filter by source)
		op.kind = opJoin
	case 1, 3: // MODE_IS_INCLUDE, CHANGE_TO_INCLUDE
		op.kind = opInclude
	case 5:
		op.kind = opAllow
	case 6:
		op.kind = opBlock
	default:
		op.kind = -1
	}
	return op
}

// parseSnoop reads an IGMP, MLD or PIM message (its IP packet, perhaps
// cut short) into ops. A message it cannot read is an error.
func parseSnoop(pkt []byte) ([]snoopOp, error) {
	if len(pkt) == 0 {
		return nil, errors.New("empty message")
	}
	opts := gopacket.DecodeOptions{NoCopy: true}
	var ops []snoopOp
	switch pkt[0] >> 4 {
	case 4:
		p := gopacket.NewPacket(pkt, layers.LayerTypeIPv4, opts)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if ip == nil {
			return nil, fmt.Errorf("not an IPv4 packet: %v", p.ErrorLayer())
		}
		if ip.Protocol == layers.IPProtocol(datapathPIM) {
			return pimOps(ip.Payload)
		}
		switch m := p.Layer(layers.LayerTypeIGMP).(type) {
		case *layers.IGMPv1or2:
			switch m.Type {
			case layers.IGMPMembershipQuery:
				ops = append(ops, snoopOp{kind: opQuery, src: ipOf(ip.SrcIP)})
			case layers.IGMPMembershipReportV1, layers.IGMPMembershipReportV2:
				ops = append(ops, snoopOp{kind: opJoin, group: ipOf(m.GroupAddress)})
			case layers.IGMPLeaveGroup:
				ops = append(ops, snoopOp{kind: opLeave, group: ipOf(m.GroupAddress)})
			}
		case *layers.IGMP:
			switch m.Type {
			case layers.IGMPMembershipQuery:
				ops = append(ops, snoopOp{kind: opQuery, src: ipOf(ip.SrcIP)})
			case layers.IGMPMembershipReportV3:
				for _, r := range m.GroupRecords {
					ops = append(ops, recordOp(uint8(r.Type), r.MulticastAddress, r.SourceAddresses))
				}
			}
		default:
			return nil, fmt.Errorf("not an IGMP message: %v", p.ErrorLayer())
		}
	case 6:
		p := gopacket.NewPacket(pkt, layers.LayerTypeIPv6, opts)
		ip, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if ip == nil {
			return nil, fmt.Errorf("not an IPv6 packet: %v", p.ErrorLayer())
		}
		if ip.NextHeader == layers.IPProtocol(datapathPIM) {
			return pimOps(ip.Payload)
		}
		switch {
		case p.Layer(layers.LayerTypeMLDv1MulticastListenerQuery) != nil, p.Layer(layers.LayerTypeMLDv2MulticastListenerQuery) != nil:
			ops = append(ops, snoopOp{kind: opQuery, src: ipOf(ip.SrcIP)})
		case p.Layer(layers.LayerTypeMLDv1MulticastListenerReport) != nil:
			m := p.Layer(layers.LayerTypeMLDv1MulticastListenerReport).(*layers.MLDv1MulticastListenerReportMessage)
			ops = append(ops, snoopOp{kind: opJoin, group: ipOf(m.MulticastAddress)})
		case p.Layer(layers.LayerTypeMLDv1MulticastListenerDone) != nil:
			m := p.Layer(layers.LayerTypeMLDv1MulticastListenerDone).(*layers.MLDv1MulticastListenerDoneMessage)
			ops = append(ops, snoopOp{kind: opLeave, group: ipOf(m.MulticastAddress)})
		case p.Layer(layers.LayerTypeMLDv2MulticastListenerReport) != nil:
			m := p.Layer(layers.LayerTypeMLDv2MulticastListenerReport).(*layers.MLDv2MulticastListenerReportMessage)
			for _, r := range m.MulticastAddressRecords {
				ops = append(ops, recordOp(uint8(r.RecordType), r.MulticastAddress, r.SourceAddresses))
			}
		default:
			return nil, fmt.Errorf("not an MLD message: %v", p.ErrorLayer())
		}
	default:
		return nil, fmt.Errorf("IP version %d", pkt[0]>>4)
	}
	return ops, nil
}

// datapathPIM is PIM's IP protocol number (bpf/lib/snoop.h's TR_IPPROTO_PIM).
const datapathPIM = 103

// pimOps: a PIM hello (type 0, RFC 7761 4.9.2) says a router is there.
func pimOps(payload []byte) ([]snoopOp, error) {
	if len(payload) < 4 || payload[0]>>4 != 2 {
		return nil, errors.New("not a PIMv2 message")
	}
	if payload[0]&0x0f != 0 {
		return nil, nil // another PIM message: nothing snooping needs
	}
	return []snoopOp{{kind: opPIM}}, nil
}

// snoopable says whether a report of group should be kept: a link-local
// group is flooded whatever is reported (bpf/lib/snoop.h), so it takes no
// room in the table.
func snoopable(group netip.Addr) bool {
	if !group.IsValid() || !group.IsMulticast() {
		return false
	}
	if group.Is4() {
		return !group.IsLinkLocalMulticast()
	}
	return group.As16()[1]&0x0f > 2
}

// handle applies a message that came in by port slot of bridge in VLAN
// vlan, and writes what changed.
func (s *snooper) handle(m datapath.SnoopMsg, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bridges[m.Bridge]
	if b == nil {
		return // not (or no longer) a snooping bridge
	}
	if _, ok := b.ports[m.Slot]; !ok {
		return
	}
	ops, err := parseSnoop(m.Packet)
	if err != nil {
		b.counts.Malformed++
		s.log.Debug("snooped message not read", "bridge", b.name, "port", b.ports[m.Slot].name, "err", err)
		return
	}
	for _, op := range ops {
		b.apply(op, m.VLAN, m.Slot, now)
	}
	if b.q != nil {
		s.flushPending(b, now)
	}
	s.write(m.Bridge, b, now)
}

// apply is one op of a message from port slot in VLAN vlan.
func (b *snoopBridge) apply(op snoopOp, vlan, slot uint16, now time.Time) {
	switch op.kind {
	case opQuery:
		b.counts.Queries++
		b.heard(vlan, slot, op.src, now)
		b.routers[slot] = now.Add(querierInterval)
		return
	case opPIM:
		b.counts.PIM++
		b.routers[slot] = now.Add(querierInterval)
		return
	case opLeave:
		b.counts.Leaves++
		b.leave(groupID{vlan, op.group}, vlan, slot, now)
		return
	case opJoin, opInclude, opAllow, opBlock:
		b.counts.Reports++
	default:
		return
	}
	if !snoopable(op.group) {
		return
	}
	id := groupID{vlan, op.group}
	ms := b.groups[id]
	m := ms[slot]
	if m == nil {
		if (op.kind == opInclude || op.kind == opAllow || op.kind == opBlock) && len(op.sources) == 0 {
			if op.kind == opInclude {
				b.leave(id, vlan, slot, now) // TO_IN({}): a leave
			}
			return
		}
		if op.kind == opBlock {
			return // no sources to block of a group it is no member of
		}
		if (ms == nil && len(b.groups) >= maxBridgeGroups) || b.portGroups(slot) >= maxPortGroups {
			b.counts.Refused++
			return
		}
		if ms == nil {
			ms = map[uint16]*membership{}
			b.groups[id] = ms
		}
		m = &membership{}
		ms[slot] = m
	}
	m.seen, m.expires = now, now.Add(membershipInterval)
	switch op.kind {
	case opJoin:
		m.sources = nil
	case opInclude:
		if len(op.sources) == 0 {
			b.leave(id, vlan, slot, now)
			return
		}
		m.sources = map[netip.Addr]bool{}
		for _, a := range op.sources {
			m.sources[a] = true
		}
	case opAllow:
		if m.sources != nil {
			for _, a := range op.sources {
				m.sources[a] = true
			}
		}
	case opBlock:
		if m.sources != nil {
			for _, a := range op.sources {
				delete(m.sources, a)
			}
			if len(m.sources) == 0 {
				b.leave(id, vlan, slot, now)
			}
		}
	}
}

// leave is a port's leave of a group: at once on a fast_leave port, else
// when no report answers the querier's group-specific queries (without a
// querier, none asks: the membership ages as it would).
func (b *snoopBridge) leave(id groupID, vlan, slot uint16, now time.Time) {
	ms := b.groups[id]
	m := ms[slot]
	if m == nil {
		return
	}
	switch {
	case b.ports[slot].fastLeave:
		delete(ms, slot)
		if len(ms) == 0 {
			delete(b.groups, id)
		}
	case b.unasked(id, slot, now):
		// Nobody asks the far side's other members: the membership ages.
	case b.querier[querierOf(vlan, id.addr)].until.After(now) && now.Add(lastMemberTime).Before(m.expires):
		m.expires = now.Add(lastMemberTime)
		b.askLeft(id, slot, now)
	}
}

// querierOf is the querier entry of a VLAN for the family of addr (a
// query's source, or a group): IGMP's and MLD's queriers are apart, as
// their reports' entries in the table are (0.0.0.0 and ::).
func querierOf(vlan uint16, addr netip.Addr) groupID {
	if addr.Is4() {
		return groupID{vlan, netip.IPv4Unspecified()}
	}
	return groupID{vlan, netip.IPv6Unspecified()}
}

// portGroups counts a port's memberships.
func (b *snoopBridge) portGroups(slot uint16) int {
	n := 0
	for _, ms := range b.groups {
		if ms[slot] != nil {
			n++
		}
	}
	return n
}

// age ends what has expired: memberships, learned router ports, queriers.
func (b *snoopBridge) age(now time.Time) {
	for id, ms := range b.groups {
		for slot, m := range ms {
			if !m.expires.After(now) {
				delete(ms, slot)
			}
		}
		if len(ms) == 0 {
			delete(b.groups, id)
		}
	}
	for slot, t := range b.routers {
		if !t.After(now) {
			delete(b.routers, slot)
		}
	}
	for q, h := range b.querier {
		if !h.until.After(now) {
			delete(b.querier, q)
		}
	}
}

// routerSlots are the bridge's router ports: multicast_router ones and
// those learned.
func (b *snoopBridge) routerSlots(now time.Time) []uint16 {
	var out []uint16
	for slot, p := range b.ports {
		if p.router || b.routers[slot].After(now) {
			out = append(out, slot)
		}
	}
	slices.Sort(out)
	return out
}

// want is the table's entries for the bridge.
func (b *snoopBridge) want(id uint16, now time.Time) map[datapath.GroupKey][]uint16 {
	out := map[datapath.GroupKey][]uint16{}
	routers := b.routerSlots(now)
	for g, ms := range b.groups {
		slots := slices.Clone(routers)
		for slot := range ms {
			slots = append(slots, slot)
		}
		slices.Sort(slots)
		out[datapath.GroupKey{Bridge: id, VLAN: g.vlan, Group: g.addr}] = slices.Compact(slots)
	}
	for q, h := range b.querier {
		if h.until.After(now) {
			out[datapath.GroupKey{Bridge: id, VLAN: q.vlan, Group: q.addr}] = b.reportSlots(h, routers)
		}
	}
	return out
}

// write makes the table's entries of the bridge what its state says.
func (s *snooper) write(id uint16, b *snoopBridge, now time.Time) {
	want := map[datapath.GroupKey][]uint16{}
	if b.ports != nil {
		want = b.want(id, now)
	}
	for k := range b.written {
		if _, ok := want[k]; ok {
			continue
		}
		if err := s.table.DelGroup(k); err != nil {
			s.log.Warn("delete a group's entry", "bridge", b.name, "group", k.Group, "err", err)
			continue
		}
		delete(b.written, k)
	}
	for k, slots := range want {
		if was, ok := b.written[k]; ok && slices.Equal(was, slots) {
			continue
		}
		if err := s.table.SetGroup(k, slots); err != nil {
			if errors.Is(err, datapath.ErrGroupsFull) {
				b.counts.Refused++
				if !s.full {
					s.log.Warn("the group table is full: groups without an entry are flooded", "bridge", b.name, "group", k.Group, "room", tbpf.MaxGroups)
					s.full = true
				}
				continue
			}
			s.log.Warn("write a group's entry", "bridge", b.name, "group", k.Group, "err", err)
			continue
		}
		s.full = false
		b.written[k] = slots
	}
}

// tick ages every bridge's state and writes what changed.
func (s *snooper) tick(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, b := range s.bridges {
		b.age(now)
		s.queryTick(b, now)
		s.write(id, b, now)
	}
}

// watchSnoop reads the snoop ring until ctx is done, and ages the state
// each second: multicast snooping's and the learned neighbours'.
func (d *Daemon) watchSnoop(ctx context.Context) {
	src := d.snoop.table
	if src == nil {
		return
	}
	rd, err := src.Snoop()
	if err != nil {
		d.log.Warn("multicast snooping will not learn groups", "err", err)
		return
	}
	go func() {
		<-ctx.Done()
		rd.Close()
	}()
	last := time.Now()
	for ctx.Err() == nil {
		now := time.Now()
		if now.Sub(last) >= time.Second {
			last = now
			d.snoop.tick(now)
			d.neighs.tick(now)
		}
		m, ok := readRecord(ctx, d, "snoop ring", rd.Read, last.Add(time.Second))
		switch {
		case !ok:
		case m.Neigh:
			d.neighs.handle(m, time.Now()) // a neigh_suppress bridge's ARP, ND or DHCP (neighlearn.go)
		default:
			d.snoop.handle(m, time.Now())
		}
	}
}

// mdbShow is `trestle mdb show [BRIDGE]`.
func (d *Daemon) mdbShow(bridge string) ([]ctl.MDBEntry, error) {
	d.mu.Lock()
	known := bridge == "" || d.bridges[bridge] != nil
	d.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("no bridge %q", bridge)
	}
	return d.snoop.entries(bridge, time.Now()), nil
}

// entries are the memberships and router ports of bridge ("": every one),
// sorted by bridge, VLAN, group and port.
func (s *snooper) entries(bridge string, now time.Time) []ctl.MDBEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ctl.MDBEntry{}
	for _, b := range s.bridges {
		if bridge != "" && b.name != bridge {
			continue
		}
		for g, ms := range b.groups {
			for slot, m := range ms {
				e := ctl.MDBEntry{Bridge: b.name, Group: g.addr.String(), VLAN: g.vlan, Port: b.ports[slot].name,
					Sources: []string{}, AgeSeconds: now.Sub(m.seen).Seconds()}
				for a := range m.sources {
					e.Sources = append(e.Sources, a.String())
				}
				slices.Sort(e.Sources)
				out = append(out, e)
			}
		}
		for _, slot := range b.routerSlots(now) {
			out = append(out, ctl.MDBEntry{Bridge: b.name, Port: b.ports[slot].name, Router: true, Sources: []string{}})
		}
	}
	slices.SortFunc(out, func(a, b ctl.MDBEntry) int {
		if a.Bridge != b.Bridge {
			return cmp.Compare(a.Bridge, b.Bridge)
		}
		if a.Router != b.Router {
			if a.Router {
				return 1
			}
			return -1
		}
		if a.VLAN != b.VLAN {
			return int(a.VLAN) - int(b.VLAN)
		}
		if c := cmp.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
	return out
}

// snoopCounts is each snooping bridge's message counts, by name.
func (s *snooper) snoopCounts() map[string]snoopCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]snoopCounts{}
	for _, b := range s.bridges {
		out[b.name] = b.counts
	}
	return out
}

// collectSnoop gives the snooping bridges' message counts and the snoop
// ring's lost copies.
func (c *collector) collectSnoop(ch chan<- prometheus.Metric) {
	for name, n := range c.d.snoop.snoopCounts() {
		for _, k := range []struct {
			kind string
			v    uint64
		}{{"report", n.Reports}, {"leave", n.Leaves}, {"query", n.Queries}, {"pim", n.PIM}, {"malformed", n.Malformed}, {"refused", n.Refused}, {"query_sent", n.QueriesSent}} {
			ch <- counter(c.snoopMsgs, k.v, name, k.kind)
		}
	}
	if c.d.snoop.table == nil {
		return
	}
	if n, err := c.d.snoop.table.SnoopLost(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.snoopLost, err)
	} else {
		ch <- counter(c.snoopLost, n)
	}
}
