package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
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

// Learned neighbours (docs/switching.md, "Learned entries"). In a bridge
// with neigh_suppress the datapath copies the ARP messages with a sender,
// the neighbour solicitations and advertisements, and the DHCP servers'
// messages of its ports to the snoop ring (bpf/lib/neigh.h,
// tr_neigh_copy), beside multicast snooping's; the daemon parses them here
// with gopacket's layers and writes what a station claims as a learned
// entry of the neighbour table: its address, its MAC, its port, when last
// seen. Every port is a tenant's (docs/security.md), so a claim is taken
// only when
//
//   - the MAC it names is the frame's Ethernet source (ARP's sender, the
//     solicitation's source or the advertisement's target link-layer
//     address), and that source is the port's: the FDB has it on the
//     port, or the port's allowed_macs bind it;
//   - the address is a station's (not unspecified, multicast, broadcast
//     or loopback) and, on an ip_guard port, one of its allowed_ips;
//   - the table holds no static (a port's allowed_ips) or remote (EVPN)
//     entry for it: those are facts of the configuration and the fabric;
//   - no other station holds it: the first claim holds until its holder
//     is gone (its MAC left the port in the FDB, or it claimed nothing for
//     the bridge's neigh_aging);
//   - the port is under max_neighs_per_port learned entries and the table
//     under maxLearned.
//
// A DHCPACK binds its yiaddr to its chaddr when it came in by a port
// without dhcp_guard (whose server is trusted) and the chaddr is learned
// on another port of the bridge: the entry is that port's. A DHCPv6 REPLY
// binds its IA_NA addresses so to the MAC it was sent to (its client
// names itself by a DUID, not a MAC).
//
// A refused claim is counted by reason and reported (event
// neigh_refused, at most one a minute for one address and MAC). Learned
// entries are aged each second: one unseen for neigh_aging, or whose MAC
// left its port, goes. The table's entries persist in the pinned map
// across a restart with persist; the next daemon adopts those of ports it
// still has, with their age, and ages them as its own.

// maxLearned bounds the learned entries of all bridges together: half the
// table, so that the ports' static entries and the fabric's remote ones
// always find room.
const maxLearned = tbpf.MaxNeigh / 2

// refuseEvery is how often one address's refused claims by one MAC are
// reported; refuseRate and refuseBurst bound the reports of all addresses
// together (as the moves' lines, moves.go), so that a tenant that claims
// address after address is counted, not logged without end.
const (
	refuseEvery = time.Minute
	refuseRate  = 10 // a second
	refuseBurst = 50
)

// Why a claim was refused: the metric's reason and the event's why.
const (
	refusedSpoofed   = "spoofed"     // the MAC named is not the frame's source
	refusedForeign   = "foreign_mac" // the source is not the port's
	refusedAddress   = "address"     // not a station's address
	refusedIPGuard   = "ip_guard"    // outside an ip_guard port's allowed_ips
	refusedStatic    = "static"      // a static or remote entry holds it
	refusedHeld      = "held"        // another station holds it
	refusedPortLimit = "port_limit"  // the port has max_neighs_per_port
	refusedFull      = "table_full"  // maxLearned reached
	refusedDHCPGuard = "dhcp_guard"  // a DHCPACK or DHCPv6 REPLY from a port with dhcp_guard
)

var refuseReasons = []string{refusedSpoofed, refusedForeign, refusedAddress, refusedIPGuard, refusedStatic, refusedHeld,
	refusedPortLimit, refusedFull, refusedDHCPGuard}

// learnTable is a dataplane with a neighbour table and an FDB to look
// addresses up in (internal/datapath).
type learnTable interface {
	LookupFDB(bridge, vlan uint16, mac net.HardwareAddr) (datapath.FDBEntry, bool, error)
	PutNeigh(datapath.NeighKey, datapath.Neigh) error
	DelNeigh(datapath.NeighKey) error
	Neighs() ([]datapath.NeighEntry, error)
}

// neighLearner is the learned entries of every neigh_suppress bridge,
// under its own lock: copies arrive beside applies, which tell it the
// ports (configure) and the static and remote entries (fix). Lock order:
// the daemon's d.mu, then this one.
type neighLearner struct {
	mu      sync.Mutex
	table   learnTable // nil: the dataplane has none
	log     *slog.Logger
	emit    func(ctl.Event)
	clock   func() uint64 // the datapath's (datapath.Now), for the entries' seen_ns
	changed func()        // an address learned, moved or gone: the overlay gives it to FRR (nil: none)
	adopted bool
	bridges map[uint16]*learnBridge
	fixed   map[datapath.NeighKey]bool // static and remote entries: never learned over
	learned map[datapath.NeighKey]*learnedNeigh
	perPort map[[2]uint16]int     // learned entries by bridge and slot
	refused map[refusal]time.Time // when each was last reported
	tokens  float64               // reports that may go now (refuseRate, refuseBurst)
	filled  time.Time             // when tokens was last filled
	checked time.Time             // the last look at the FDB for every entry's holder
}

// learnBridge is what learning needs of a bridge with neigh_suppress.
type learnBridge struct {
	name      string
	aging     time.Duration // neigh_aging
	portLimit int           // max_neighs_per_port
	ports     map[uint16]learnPort
	counts    learnCounts
}

// learnPort is what learning needs of a port: a station's port that
// forwards (patch, overlay and span ports, and ports that do not forward,
// are left out: their frames teach nothing).
type learnPort struct {
	name      string
	guard     []netip.Addr // ip_guard: its allowed addresses (GuardIPs); nil: no ip_guard
	ipGuard   bool
	dhcpGuard bool
	macs      []net.HardwareAddr // allowed_macs
}

// learnCounts are a bridge's claims since the daemon started.
type learnCounts struct {
	Learned   uint64            // new entries
	Moved     uint64            // an address taken by another station once its holder was gone
	Refused   map[string]uint64 // by reason
	Malformed uint64
}

type learnedNeigh struct {
	mac  net.HardwareAddr
	slot uint16
	seen time.Time
}

type refusal struct {
	key datapath.NeighKey
	mac string
}

// claim is a station's claim of an address read from a copy.
type claim struct {
	addr netip.Addr
	mac  net.HardwareAddr
	dhcp bool // from a DHCPACK or a DHCPv6 REPLY: mac is its client's, on another port
}

func newNeighLearner(t learnTable, log *slog.Logger, emit func(ctl.Event)) *neighLearner {
	return &neighLearner{table: t, log: log, emit: emit, clock: datapath.Now, bridges: map[uint16]*learnBridge{},
		fixed: map[datapath.NeighKey]bool{}, learned: map[datapath.NeighKey]*learnedNeigh{}, perPort: map[[2]uint16]int{},
		refused: map[refusal]time.Time{}, tokens: refuseBurst}
}

// learnConfig is the bridges with neigh_suppress and their stations'
// ports. Called with d.mu held.
func (d *Daemon) learnConfig() map[uint16]*learnBridge {
	out := map[uint16]*learnBridge{}
	for _, b := range d.bridges {
		if !b.cfg.NeighSuppress {
			continue
		}
		lb := &learnBridge{name: b.cfg.Name, aging: b.cfg.NeighAging, portLimit: b.cfg.MaxNeighsPerPort, ports: map[uint16]learnPort{}}
		for _, p := range b.ports {
			if !p.forwards() || p.cfg.IsPatch() || p.cfg.IsOverlay() || p.span() != nil {
				continue
			}
			lb.ports[p.slot] = learnPort{name: p.name(), guard: p.cfg.GuardIPs(), ipGuard: p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD),
				dhcpGuard: p.cfg.Has(tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD), macs: p.cfg.AllowedMACs}
		}
		out[b.id] = lb
	}
	return out
}

// configure takes the bridges that learn and their ports: the entries of a
// bridge that no longer learns, of a port that left (or another port in
// its slot), and those an ip_guard port's addresses no longer allow, go.
// The first call adopts what an earlier daemon learned (persist).
func (l *neighLearner) configure(want map[uint16]*learnBridge, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.table == nil {
		return
	}
	old := l.bridges
	l.bridges = want
	for id, b := range want {
		if o := old[id]; o != nil {
			b.counts = o.counts
		}
		if b.counts.Refused == nil {
			b.counts.Refused = map[string]uint64{}
		}
	}
	if !l.adopted {
		l.adopted = true
		l.adopt(now)
	}
	for k, n := range l.learned {
		b := l.bridges[k.Bridge]
		var p learnPort
		ok := b != nil
		if ok {
			p, ok = b.ports[n.slot]
		}
		if ok && old[k.Bridge] != nil {
			if was, in := old[k.Bridge].ports[n.slot]; in && was.name != p.name {
				ok = false // another port in the slot
			}
		}
		if !ok || (p.ipGuard && !slices.Contains(p.guard, k.Addr)) {
			l.forget(k)
		}
	}
}

// adopt takes the learned entries the table holds (an earlier daemon's,
// kept by persist) of ports that learn, with their age; the rest go.
func (l *neighLearner) adopt(now time.Time) {
	es, err := l.table.Neighs()
	if err != nil {
		l.log.Warn("read the neighbour table's learned entries", "err", err)
		return
	}
	n := 0
	for _, e := range es {
		if !e.Learned {
			continue
		}
		if b := l.bridges[e.Bridge]; b != nil {
			if _, ok := b.ports[e.Slot]; ok && len(l.learned) < maxLearned {
				l.set(e.NeighKey, &learnedNeigh{mac: e.MAC, slot: e.Slot, seen: now.Add(-e.Age)})
				n++
				continue
			}
		}
		if err := l.table.DelNeigh(e.NeighKey); err != nil {
			l.log.Warn("delete a learned neighbour", "ip", e.Addr, "err", err)
		}
	}
	if n > 0 {
		l.log.Info("learned neighbours adopted", "entries", n)
	}
}

// set keeps a learned entry (written to the table already).
func (l *neighLearner) set(k datapath.NeighKey, n *learnedNeigh) {
	if o := l.learned[k]; (o == nil || !bytes.Equal(o.mac, n.mac)) && l.changed != nil {
		l.changed()
	}
	l.drop(k)
	l.learned[k] = n
	l.perPort[[2]uint16{k.Bridge, n.slot}]++
}

// drop lets the learner forget an entry, the table untouched.
func (l *neighLearner) drop(k datapath.NeighKey) {
	if o := l.learned[k]; o != nil {
		pk := [2]uint16{k.Bridge, o.slot}
		if l.perPort[pk]--; l.perPort[pk] <= 0 {
			delete(l.perPort, pk)
		}
		delete(l.learned, k)
	}
}

// forget deletes a learned entry from the table and the learner.
func (l *neighLearner) forget(k datapath.NeighKey) {
	if l.changed != nil {
		l.changed()
	}
	l.drop(k)
	if err := l.table.DelNeigh(k); err != nil {
		l.log.Warn("delete a learned neighbour", "ip", k.Addr, "vlan", k.VLAN, "err", err)
	}
}

// fix says which addresses the table holds as static or remote entries
// (syncNeighs, which writes them with write while the learner's lock is
// held, so that no learned entry is written between): they are learned no
// more, and learned entries of theirs were written over. Where the table
// would not hold them beside the learned ones, the oldest learned ones go.
func (l *neighLearner) fix(keys map[datapath.NeighKey]datapath.Neigh, write func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fixed = map[datapath.NeighKey]bool{}
	for k := range keys {
		l.fixed[k] = true
		l.drop(k)
	}
	// Room for them first: the oldest learned entries give way.
	if over := len(keys) + len(l.learned) - tbpf.MaxNeigh; over > 0 {
		ks := slices.Collect(maps.Keys(l.learned))
		slices.SortFunc(ks, func(a, b datapath.NeighKey) int { return l.learned[a].seen.Compare(l.learned[b].seen) })
		for _, k := range ks[:min(over, len(ks))] {
			l.forget(k)
		}
	}
	return write()
}

// handle reads a copy that came in by port m.Slot of bridge m.Bridge, and
// takes or refuses what it claims.
func (l *neighLearner) handle(m datapath.SnoopMsg, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bridges[m.Bridge]
	if b == nil || l.table == nil {
		return // not (or no longer) a bridge with neigh_suppress
	}
	p, ok := b.ports[m.Slot]
	if !ok {
		return
	}
	cs, why, err := parseClaims(m)
	if err != nil {
		b.counts.Malformed++
		l.log.Debug("neighbour copy not read", "bridge", b.name, "port", p.name, "err", err)
		return
	}
	if why != "" {
		l.refuse(b, m, p.name, cs[0], why, now)
		return
	}
	for _, c := range cs {
		l.claim(b, m, p, c, now)
	}
}

// parseClaims reads the claims of a copy: an ARP sender, a solicitation's
// source, an advertisement's target, a DHCPACK's yiaddr, a DHCPv6 REPLY's
// addresses. why: the copy
// claims for a MAC not its source (refusedSpoofed, the claim in cs[0]).
func parseClaims(m datapath.SnoopMsg) (cs []claim, why string, err error) {
	switch m.Proto {
	case uint16(layers.EthernetTypeARP):
		var a layers.ARP
		if err := a.DecodeFromBytes(m.Packet, gopacket.NilDecodeFeedback); err != nil {
			return nil, "", fmt.Errorf("ARP: %w", err)
		}
		if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || len(a.SourceProtAddress) != 4 {
			return nil, "", fmt.Errorf("ARP: not IPv4 over Ethernet")
		}
		spa := netip.AddrFrom4([4]byte(a.SourceProtAddress))
		if spa.IsUnspecified() {
			return nil, "", nil // a probe claims nothing
		}
		c := claim{addr: spa, mac: net.HardwareAddr(slices.Clone(a.SourceHwAddress))}
		if !bytes.Equal(c.mac, m.Src) {
			return []claim{c}, refusedSpoofed, nil
		}
		return []claim{c}, "", nil
	case uint16(layers.EthernetTypeIPv6):
		return parseND(m)
	case uint16(layers.EthernetTypeIPv4):
		return parseDHCP(m)
	}
	return nil, "", fmt.Errorf("EtherType %#04x", m.Proto)
}

func parseND(m datapath.SnoopMsg) ([]claim, string, error) {
	pkt := gopacket.NewPacket(m.Packet, layers.LayerTypeIPv6, gopacket.DecodeOptions{NoCopy: true, Lazy: true})
	ip, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if ip != nil && ip.NextHeader == layers.IPProtocolUDP {
		return parseDHCPv6(m, pkt)
	}
	if ip == nil || ip.HopLimit != 255 || ip.NextHeader != layers.IPProtocolICMPv6 {
		return nil, "", fmt.Errorf("not neighbour discovery")
	}
	var c claim
	var opts layers.ICMPv6Options
	var want layers.ICMPv6Opt
	switch l := pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(type) {
	case *layers.ICMPv6NeighborSolicitation:
		c.addr, _ = netip.AddrFromSlice(ip.SrcIP)
		opts, want = l.Options, layers.ICMPv6OptSourceAddress
	default:
		na, _ := pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
		if na == nil {
			if e := pkt.ErrorLayer(); e != nil {
				return nil, "", e.Error()
			}
			return nil, "", fmt.Errorf("neither a solicitation nor an advertisement")
		}
		c.addr, _ = netip.AddrFromSlice(na.TargetAddress)
		opts, want = na.Options, layers.ICMPv6OptTargetAddress
	}
	for _, o := range opts {
		if o.Type == want && len(o.Data) == 6 {
			c.mac = net.HardwareAddr(slices.Clone(o.Data))
		}
	}
	if c.mac == nil || !c.addr.IsValid() || c.addr.IsUnspecified() {
		return nil, "", nil // no link-layer address, or duplicate address detection: no claim
	}
	if !bytes.Equal(c.mac, m.Src) {
		return []claim{c}, refusedSpoofed, nil
	}
	return []claim{c}, "", nil
}

func parseDHCP(m datapath.SnoopMsg) ([]claim, string, error) {
	pkt := gopacket.NewPacket(m.Packet, layers.LayerTypeIPv4, gopacket.DecodeOptions{NoCopy: true, Lazy: true})
	d, _ := pkt.Layer(layers.LayerTypeDHCPv4).(*layers.DHCPv4)
	if d == nil {
		if e := pkt.ErrorLayer(); e != nil {
			return nil, "", e.Error()
		}
		return nil, "", fmt.Errorf("not DHCP")
	}
	ack := false
	for _, o := range d.Options {
		if o.Type == layers.DHCPOptMessageType && len(o.Data) == 1 && layers.DHCPMsgType(o.Data[0]) == layers.DHCPMsgTypeAck {
			ack = true
		}
	}
	yi, _ := netip.AddrFromSlice(d.YourClientIP.To4())
	if !ack || d.HardwareType != layers.LinkTypeEthernet || len(d.ClientHWAddr) != 6 || !yi.IsValid() || yi.IsUnspecified() {
		return nil, "", nil // an offer, a NAK, an ACK to an INFORM: no binding
	}
	return []claim{{addr: yi, mac: net.HardwareAddr(slices.Clone(d.ClientHWAddr)), dhcp: true}}, "", nil
}

// parseDHCPv6 reads a DHCPv6 REPLY's IA_NA addresses (RFC 8415 21.4,
// 21.6), each a claim for the MAC the reply was sent to: its client's, as
// a DHCPACK's chaddr. One with a valid lifetime of 0 is released, no
// claim; a REPLY to a multicast or broadcast MAC names no client.
func parseDHCPv6(m datapath.SnoopMsg, pkt gopacket.Packet) ([]claim, string, error) {
	d, _ := pkt.Layer(layers.LayerTypeDHCPv6).(*layers.DHCPv6)
	if d == nil {
		if e := pkt.ErrorLayer(); e != nil {
			return nil, "", e.Error()
		}
		return nil, "", fmt.Errorf("not DHCPv6")
	}
	if d.MsgType != layers.DHCPv6MsgTypeReply || len(m.Dst) != 6 || m.Dst[0]&1 != 0 {
		return nil, "", nil
	}
	var cs []claim
	for _, o := range d.Options {
		if o.Code != layers.DHCPv6OptIANA || len(o.Data) < 12 {
			continue
		}
		for b := o.Data[12:]; len(b) >= 4; {
			code, n := uint16(b[0])<<8|uint16(b[1]), int(b[2])<<8|int(b[3])
			if len(b) < 4+n {
				return nil, "", fmt.Errorf("DHCPv6: an IA_NA option of %d bytes past its end", n)
			}
			if code == uint16(layers.DHCPv6OptIAAddr) && n >= 24 {
				a := netip.AddrFrom16([16]byte(b[4:20]))
				if valid := uint32(b[24])<<24 | uint32(b[25])<<16 | uint32(b[26])<<8 | uint32(b[27]); valid > 0 {
					cs = append(cs, claim{addr: a, mac: slices.Clone(m.Dst), dhcp: true})
				}
			}
			b = b[4+n:]
		}
	}
	return cs, "", nil
}

// stationAddr: an address a station may hold.
func stationAddr(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// claim takes or refuses one claim of a copy from port p.
func (l *neighLearner) claim(b *learnBridge, m datapath.SnoopMsg, p learnPort, c claim, now time.Time) {
	c.addr = c.addr.Unmap()
	slot := m.Slot
	if c.dhcp {
		if p.dhcpGuard {
			l.refuse(b, m, p.name, c, refusedDHCPGuard, now)
			return
		}
		// The client's port: where the FDB has the chaddr, another than
		// the server's.
		e, ok, err := l.table.LookupFDB(m.Bridge, m.VLAN, c.mac)
		if err != nil {
			l.log.Debug("look up a DHCP client", "mac", c.mac, "err", err)
			return
		}
		cp, in := b.ports[e.Slot]
		if !ok || e.Slot == m.Slot || !in {
			l.refuse(b, m, p.name, c, refusedForeign, now)
			return
		}
		slot, p = e.Slot, cp
	} else if !l.ownMAC(m, p, c.mac) {
		l.refuse(b, m, p.name, c, refusedForeign, now)
		return
	}
	k := datapath.NeighKey{Bridge: m.Bridge, VLAN: m.VLAN, Addr: c.addr}
	switch {
	case !stationAddr(c.addr):
		l.refuse(b, m, p.name, c, refusedAddress, now)
		return
	case p.ipGuard && !slices.Contains(p.guard, c.addr):
		l.refuse(b, m, p.name, c, refusedIPGuard, now)
		return
	case l.fixed[k]:
		l.refuse(b, m, p.name, c, refusedStatic, now)
		return
	}
	held := l.learned[k]
	switch {
	case held != nil && bytes.Equal(held.mac, c.mac):
		// Its holder again (on another port, if it moved: the FDB says so).
	case held != nil && !l.gone(b, k, held, now):
		l.refuse(b, m, p.name, c, refusedHeld, now)
		return
	case l.perPort[[2]uint16{k.Bridge, slot}] >= b.portLimit:
		l.refuse(b, m, p.name, c, refusedPortLimit, now)
		return
	case held == nil && len(l.learned) >= maxLearned:
		l.refuse(b, m, p.name, c, refusedFull, now)
		return
	}
	n := datapath.Neigh{MAC: c.mac, Slot: slot, Learned: true, SeenNs: l.clock()}
	if err := l.table.PutNeigh(k, n); err != nil {
		l.log.Warn("write a learned neighbour", "bridge", b.name, "ip", c.addr, "err", err)
		return
	}
	switch {
	case held == nil:
		b.counts.Learned++
	case !bytes.Equal(held.mac, c.mac):
		b.counts.Moved++
	}
	l.set(k, &learnedNeigh{mac: c.mac, slot: slot, seen: now})
}

// ownMAC: the frame's source is the port's, by the FDB or its
// allowed_macs.
func (l *neighLearner) ownMAC(m datapath.SnoopMsg, p learnPort, mac net.HardwareAddr) bool {
	for _, a := range p.macs {
		if bytes.Equal(a, mac) {
			return true
		}
	}
	e, ok, err := l.table.LookupFDB(m.Bridge, m.VLAN, mac)
	return err == nil && ok && e.Slot == m.Slot
}

// gone: the holder of k has claimed nothing for the bridge's neigh_aging,
// or its MAC is no longer on its port.
func (l *neighLearner) gone(b *learnBridge, k datapath.NeighKey, n *learnedNeigh, now time.Time) bool {
	if now.Sub(n.seen) >= b.aging {
		return true
	}
	e, ok, err := l.table.LookupFDB(k.Bridge, k.VLAN, n.mac)
	return err == nil && (!ok || e.Slot != n.slot)
}

// refuse counts a refused claim and reports it, at most once every
// refuseEvery for one address and MAC, and refuseRate a second of all.
func (l *neighLearner) refuse(b *learnBridge, m datapath.SnoopMsg, port string, c claim, why string, now time.Time) {
	b.counts.Refused[why]++
	r := refusal{key: datapath.NeighKey{Bridge: m.Bridge, VLAN: m.VLAN, Addr: c.addr}, mac: c.mac.String()}
	if last, ok := l.refused[r]; ok && now.Sub(last) < refuseEvery {
		return
	}
	if l.tokens = min(refuseBurst, l.tokens+now.Sub(l.filled).Seconds()*refuseRate); l.tokens < 1 {
		l.filled = now
		return // counted only
	}
	l.filled = now
	l.tokens--
	if len(l.refused) >= maxLearned {
		clear(l.refused) // a flood of claims: reported afresh
	}
	l.refused[r] = now
	if l.emit == nil {
		return
	}
	v := m.VLAN
	reason := refuseWords[why]
	if why == refusedHeld {
		if h := l.learned[r.key]; h != nil {
			reason += " (" + h.mac.String() + ")"
		}
	}
	l.emit(ctl.Event{Event: ctl.EventNeighRefused, Bridge: b.name, Port: port, MAC: c.mac.String(), VLAN: &v, IP: c.addr.String(),
		Why: why, Reason: reason})
}

var refuseWords = map[string]string{
	refusedSpoofed:   "the address it claims for is not the frame's source",
	refusedForeign:   "its MAC is not the port's",
	refusedAddress:   "not a station's address",
	refusedIPGuard:   "not among the ip_guard port's allowed_ips",
	refusedStatic:    "a static or remote entry holds the address",
	refusedHeld:      "another station holds the address",
	refusedPortLimit: "the port holds max_neighs_per_port learned entries",
	refusedFull:      "the table holds as many learned entries as it takes",
	refusedDHCPGuard: "a DHCP answer from a port with dhcp_guard",
}

// tick ages the learned entries: one unseen for its bridge's neigh_aging
// goes; every 5 s, so does one whose MAC left its port.
func (l *neighLearner) tick(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.table == nil {
		return
	}
	look := now.Sub(l.checked) >= 5*time.Second
	if look {
		l.checked = now
	}
	for k, n := range l.learned {
		b := l.bridges[k.Bridge]
		if b == nil {
			continue
		}
		if now.Sub(n.seen) >= b.aging {
			l.forget(k)
			continue
		}
		if look {
			if e, ok, err := l.table.LookupFDB(k.Bridge, k.VLAN, n.mac); err == nil && (!ok || e.Slot != n.slot) {
				l.forget(k)
			}
		}
	}
}

// learnedIn is the learned entries of a bridge's VLAN, for the overlay
// (overlayneigh.go).
func (l *neighLearner) learnedIn(bridge, vlan uint16) map[netip.Addr]net.HardwareAddr {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[netip.Addr]net.HardwareAddr{}
	for k, n := range l.learned {
		if k.Bridge == bridge && k.VLAN == vlan {
			out[k.Addr] = n.mac
		}
	}
	return out
}

// learnCountsOf is each bridge's counts, by name, and its learned entries.
func (l *neighLearner) learnCountsOf() (map[string]learnCounts, map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out, n := map[string]learnCounts{}, map[string]int{}
	for id, b := range l.bridges {
		c := b.counts
		c.Refused = maps.Clone(c.Refused)
		out[b.name] = c
		n[b.name] = 0
		for pk, c := range l.perPort {
			if pk[0] == id {
				n[b.name] += c
			}
		}
	}
	return out, n
}

// collectNeighLearn gives each neigh_suppress bridge's claims and learned
// entries.
func (c *collector) collectNeighLearn(ch chan<- prometheus.Metric) {
	counts, entries := c.d.neighs.learnCountsOf()
	for name, n := range counts {
		ch <- counter(c.neighClaims, n.Learned, name, "learned")
		ch <- counter(c.neighClaims, n.Moved, name, "moved")
		ch <- counter(c.neighClaims, n.Malformed, name, "malformed")
		for _, why := range refuseReasons {
			ch <- counter(c.neighClaims, n.Refused[why], name, "refused_"+why)
		}
		ch <- gauge(c.neighLearned, float64(entries[name]), name)
	}
}
