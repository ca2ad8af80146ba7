package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The filter stage (bpf/lib/filter.h): a bridge's rules compiled into a
// tuple space (one mask per rule shape, one hash entry per rule and mask),
// written for the copy of the bridge no frame reads and made live by its
// flip (SetBridge), so that a frame sees one whole rule set.

// FilterRule is one rule as the datapath takes it: ports by slot, 0 (or
// an invalid prefix, a nil MAC, a range with Hi 0) matching anything.
type FilterRule struct {
	Block, KeepState bool
	In, Out          uint16 // port slots
	EtherType        uint16
	VLAN             uint16
	Proto            uint8
	HasProto         bool
	ICMPType         uint8
	HasICMPType      bool
	Src, Dst         netip.Prefix
	SrcPort, DstPort PortRange
	SrcMAC, DstMAC   net.HardwareAddr
}

// PortRange is a TCP or UDP port range; Hi 0: any port.
type PortRange struct{ Lo, Hi uint16 }

// Filter is a bridge's filter, on: its rules in order, what a frame that
// none matches gets, and how many established connections the bridge and
// each of its ports may hold (0: as many as the table holds).
type Filter struct {
	Rules         []FilterRule
	DefaultBlock  bool
	MaxStates     uint32
	MaxPortStates uint32
}

// hasOut says whether a rule matches the egress port: then floods are
// filtered copy by copy, in the walk.
func (f *Filter) hasOut() bool {
	return slices.ContainsFunc(f.Rules, func(r FilterRule) bool { return r.Out != 0 })
}

// filterCopy is what one copy of a bridge (an index of the bridges map)
// holds of the filter: its classifier entries and its counters.
type filterCopy struct {
	entries map[tbpf.FilterKey]tbpf.FilterHit
	// ids: each rule's counter by the rule's identity (its bridge, its
	// content and which of the identical ones it is), so that a rule that
	// stays across a reload keeps counting where it was.
	ids   map[string]uint16
	rules []uint16 // the counter of each rule, in order
	def   uint16
	state uint16
}

func (c *filterCopy) counters() []uint16 {
	return append(slices.Clone(c.rules), c.def, c.state)
}

// filterState is the datapath's record of every copy's filter, and of which
// counters are in use.
type filterState struct {
	copies map[uint32]*filterCopy
	refs   map[uint16]int // counter -> the copies that use it
	total  int            // classifier entries of all copies
	// gen is the last rule set generation given out: each write of a set
	// has a new one, which ends the CPUs' cached decisions made under the
	// set before (bpf/lib/filter.h). It starts at random, so that a
	// restarted daemon does not give a set a generation some CPU's cache
	// holds for the old daemon's rules.
	gen uint32
}

func (d *Datapath) filters() (*filterState, error) {
	if d.filt != nil {
		return d.filt, nil
	}
	f := &filterState{copies: map[uint32]*filterCopy{}, refs: map[uint16]int{}, gen: rand.Uint32()}
	// An adopted datapath holds the rule sets of the daemon before: take
	// them in, so that their entries are replaced and their counters not
	// given out twice. Their rules' identities are not kept in the maps: a
	// restarted daemon's rules count from 0.
	var k tbpf.FilterKey
	var h tbpf.FilterHit
	it := d.objs.FilterRules.Iterate()
	for it.Next(&k, &h) {
		c := f.copy(uint32(k.Set & 0xff))
		c.entries[k] = h
		f.total++
		if !slices.Contains(c.rules, h.Counter) {
			c.rules = append(c.rules, h.Counter)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read filter rules: %w", err)
	}
	var set tbpf.FilterSet
	for i := uint32(2); i < 2*uint32(tbpf.MaxBridges+1); i++ {
		if err := d.objs.FilterSets.Lookup(i, &set); err != nil {
			return nil, fmt.Errorf("read filter set %d: %w", i, err)
		}
		if set.DefCounter == 0 && f.copies[i] == nil {
			continue
		}
		c := f.copy(i)
		c.def, c.state = set.DefCounter, set.StateCounter
	}
	for _, c := range f.copies {
		for _, n := range c.counters() {
			if n != 0 {
				f.refs[n]++
			}
		}
	}
	d.filt = f
	return f, nil
}

func (f *filterState) copy(i uint32) *filterCopy {
	c := f.copies[i]
	if c == nil {
		c = &filterCopy{entries: map[tbpf.FilterKey]tbpf.FilterHit{}, ids: map[string]uint16{}}
		f.copies[i] = c
	}
	return c
}

// counter gives a counter to identity id in the copy being written: the
// live copy's if it has one for id, else a free one, zeroed.
func (d *Datapath) counter(f *filterState, live *filterCopy, id string, taken map[uint16]bool) (uint16, error) {
	if live != nil {
		if n, ok := live.ids[id]; ok && !taken[n] {
			return n, nil
		}
	}
	for n := uint16(1); int(n) < tbpf.FilterCounters; n++ {
		if f.refs[n] == 0 && !taken[n] {
			zero := make([]tbpf.FilterCount, d.ncpu)
			if err := d.objs.FilterCounts.Put(uint32(n), zero); err != nil {
				return 0, fmt.Errorf("zero rule counter %d: %w", n, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no free rule counter: at most %d rules (counting each bridge's default) in all bridges, the running and the next rule sets together", tbpf.FilterCounters-1)
}

// writeFilter writes bridge b's filter for its copy next, which no frame
// reads; nil clears what the copy held. Returns the bridge flags it needs.
func (d *Datapath) writeFilter(b BridgeInfo, next, live uint32) (uint32, error) {
	f, err := d.filters()
	if err != nil {
		return 0, err
	}
	old := f.copies[next]
	if b.Filter == nil {
		return 0, d.clearFilterCopy(f, next)
	}
	liveCopy := f.copies[live]
	nc := &filterCopy{entries: map[tbpf.FilterKey]tbpf.FilterHit{}, ids: map[string]uint16{}}
	taken := map[uint16]bool{}
	seen := map[string]int{}
	give := func(id string) (uint16, error) {
		seen[id]++
		id = fmt.Sprintf("%s#%d", id, seen[id])
		n, err := d.counter(f, liveCopy, id, taken)
		if err != nil {
			return 0, fmt.Errorf("bridge %q: %w", b.Name, err)
		}
		taken[n] = true
		nc.ids[id] = n
		return n, nil
	}
	if nc.def, err = give(fmt.Sprintf("default %v", b.Filter.DefaultBlock)); err != nil {
		return 0, err
	}
	if nc.state, err = give("state"); err != nil {
		return 0, err
	}
	for _, r := range b.Filter.Rules {
		n, err := give(fmt.Sprintf("%+v", r))
		if err != nil {
			return 0, err
		}
		nc.rules = append(nc.rules, n)
	}
	set, err := compileFilter(uint16(next), b.Filter, nc)
	if err != nil {
		return 0, fmt.Errorf("bridge %q: %w", b.Name, err)
	}
	oldN := 0
	if old != nil {
		oldN = len(old.entries)
	}
	if need := f.total - oldN + len(nc.entries); need > tbpf.FilterEntries {
		return 0, fmt.Errorf("bridge %q: its rules need %d classifier entries (a port range is one per prefix that covers it), and %d of %d are free",
			b.Name, len(nc.entries), tbpf.FilterEntries-f.total+oldN, tbpf.FilterEntries)
	}
	// Entries the copy held and no longer does go first, so that the map
	// never holds more than both.
	if old != nil {
		for k, h := range old.entries {
			if _, keep := nc.entries[k]; !keep {
				if err := d.objs.FilterRules.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					return 0, fmt.Errorf("bridge %q: remove a rule entry: %w", b.Name, err)
				}
				delete(old.entries, k)
				f.total--
				_ = h
			}
		}
	}
	for k, h := range nc.entries {
		if old != nil {
			if was, ok := old.entries[k]; ok && was == h {
				continue
			}
		}
		if err := d.objs.FilterRules.Put(k, h); err != nil {
			return 0, fmt.Errorf("bridge %q: write a rule entry: %w", b.Name, err)
		}
		if old == nil || !hasKey(old.entries, k) {
			f.total++
		}
	}
	if set.Flags&tbpf.FilterKeepState != 0 {
		if err := d.ensureHalfOpen(b.ID); err != nil {
			return 0, fmt.Errorf("bridge %q: %w", b.Name, err)
		}
	}
	f.gen++
	set.Gen = f.gen
	if err := d.objs.FilterSets.Put(next, set); err != nil {
		return 0, fmt.Errorf("bridge %q: write its rule set: %w", b.Name, err)
	}
	if old != nil {
		for _, n := range old.counters() {
			f.release(n)
		}
	}
	for _, n := range nc.counters() {
		f.refs[n]++
	}
	f.copies[next] = nc
	flags := tbpf.BridgeFilter
	if b.Filter.hasOut() {
		flags |= tbpf.BridgeFilterOut
	}
	return flags, nil
}

func hasKey[K comparable, V any](m map[K]V, k K) bool { _, ok := m[k]; return ok }

func (f *filterState) release(n uint16) {
	if n == 0 {
		return
	}
	if f.refs[n]--; f.refs[n] <= 0 {
		delete(f.refs, n)
	}
}

// clearFilterCopy removes what copy i holds of a filter; no frame may
// read it.
func (d *Datapath) clearFilterCopy(f *filterState, i uint32) error {
	c := f.copies[i]
	if c == nil {
		return nil
	}
	for k := range c.entries {
		if err := d.objs.FilterRules.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove a rule entry: %w", err)
		}
		delete(c.entries, k)
		f.total--
	}
	if err := d.objs.FilterSets.Put(i, tbpf.FilterSet{}); err != nil {
		return fmt.Errorf("clear rule set %d: %w", i, err)
	}
	for _, n := range c.counters() {
		f.release(n)
	}
	delete(f.copies, i)
	return nil
}

// dropFilters removes both copies' filters of a bridge no frame reads any
// more (DelBridge, after a grace period).
func (d *Datapath) dropFilters(id uint16) error {
	if d.filt == nil {
		return nil
	}
	for _, i := range []uint32{2 * uint32(id), 2*uint32(id) + 1} {
		if err := d.clearFilterCopy(d.filt, i); err != nil {
			return fmt.Errorf("bridge %d: %w", id, err)
		}
	}
	if err := d.delProgFlood(d.halfOpenSets(), id); err != nil {
		return fmt.Errorf("bridge %d: %w", id, err)
	}
	return nil
}

// hasFilterCopies says whether a copy of bridge id holds a filter.
func (d *Datapath) hasFilterCopies(id uint16) bool {
	return d.filt != nil && (d.filt.copies[2*uint32(id)] != nil || d.filt.copies[2*uint32(id)+1] != nil)
}

// FilterCount is the frames and bytes a rule decided.
type FilterCount struct{ Packets, Bytes uint64 }

// FilterCounts are a bridge's filter counters: each rule's in order, the
// default action's, and those of frames passed as part of a tracked
// connection. ok is false when the bridge's live copy has no filter.
type FilterCounts struct {
	Rules          []FilterCount
	Default, State FilterCount
}

// FilterCounterIDs names the counters of bridge id's running rule set:
// each rule's in order, the default action's and the tracked connections'.
// ok is false when the bridge's live copy has no filter. It reads the
// datapath's own record of the rule sets, which writing a bridge's filter
// changes: call it where nothing writes the datapath (the daemon's lock).
type FilterCounterIDs struct {
	Rules          []uint16
	Default, State uint16
}

func (d *Datapath) FilterCounterIDs(id uint16) (FilterCounterIDs, bool, error) {
	var out FilterCounterIDs
	f, err := d.filters()
	if err != nil {
		return out, false, err
	}
	live, err := d.liveCopy(id)
	if err != nil {
		return out, false, err
	}
	c := f.copies[live]
	if c == nil || live == 0 {
		return out, false, nil
	}
	return FilterCounterIDs{Rules: slices.Clone(c.rules), Default: c.def, State: c.state}, true, nil
}

// ReadFilterCounters reads the counters ids names from the map alone, so
// it may run while the datapath is written (a metrics scrape): a counter
// given to another rule meanwhile reads as that rule's.
func (d *Datapath) ReadFilterCounters(ids FilterCounterIDs) (FilterCounts, error) {
	var out FilterCounts
	read := func(n uint16) (FilterCount, error) {
		per := make([]tbpf.FilterCount, d.ncpu)
		if err := d.objs.FilterCounts.Lookup(uint32(n), &per); err != nil {
			return FilterCount{}, fmt.Errorf("read rule counter %d: %w", n, err)
		}
		var s FilterCount
		for _, p := range per {
			s.Packets += p.Packets
			s.Bytes += p.Bytes
		}
		return s, nil
	}
	for _, n := range ids.Rules {
		s, err := read(n)
		if err != nil {
			return out, err
		}
		out.Rules = append(out.Rules, s)
	}
	var err error
	if out.Default, err = read(ids.Default); err != nil {
		return out, err
	}
	if out.State, err = read(ids.State); err != nil {
		return out, err
	}
	return out, nil
}

// FilterCounters reads the counters of bridge id's running rule set
// (FilterCounterIDs, then ReadFilterCounters: where nothing writes the
// datapath).
func (d *Datapath) FilterCounters(id uint16) (FilterCounts, bool, error) {
	ids, ok, err := d.FilterCounterIDs(id)
	if err != nil || !ok {
		return FilterCounts{}, false, err
	}
	out, err := d.ReadFilterCounters(ids)
	if err != nil {
		return out, false, err
	}
	return out, true, nil
}

// ---- the compiler ----

// filterMatch is one mask and the values under it: a rule is one or more
// (an IP rule of no stated version is one per version; a port range one
// per prefix that covers it).
type filterMatch struct{ mask, val tbpf.FilterKey }

// compileFilter makes the classifier of rule set set: its entries into
// c.entries, and the set's value, masks ordered by their first rule.
func compileFilter(set uint16, f *Filter, c *filterCopy) (tbpf.FilterSet, error) {
	var fs tbpf.FilterSet
	type entry struct {
		m   filterMatch
		hit tbpf.FilterHit
	}
	var all []entry
	minPrio := map[tbpf.FilterKey]uint32{}
	unreadable := map[tbpf.FilterKey]bool{} // masks of unreadableMatches
	for i, r := range f.Rules {
		var flags uint16
		if r.Block {
			flags |= tbpf.FilterBlock
		}
		if r.KeepState {
			flags |= tbpf.FilterKeepState
			fs.Flags |= tbpf.FilterKeepState
		}
		hit := tbpf.FilterHit{Prio: uint32(i), Counter: c.rules[i], Flags: flags}
		add := func(ms []filterMatch, hit tbpf.FilterHit) {
			for _, m := range ms {
				if p, ok := minPrio[m.mask]; !ok || uint32(i) < p {
					minPrio[m.mask] = uint32(i)
				}
				all = append(all, entry{m, hit})
			}
		}
		add(ruleMatches(set, r), hit)
		if r.Block && readsL4(r) {
			hit.Flags |= tbpf.FilterUnread
			um := unreadableMatches(set, r)
			add(um, hit)
			for _, m := range um {
				unreadable[m.mask] = true
			}
		}
	}
	if len(minPrio) > len(fs.Tuples) {
		return fs, fmt.Errorf("its rules have %d shapes (which fields they match, with which prefix lengths; a port range adds one per prefix length that covers it, a block rule with proto, ports or icmp_type one without them), at most %d: use fewer distinct prefix lengths or port ranges",
			len(minPrio), len(fs.Tuples))
	}
	masks := make([]tbpf.FilterKey, 0, len(minPrio))
	for m := range minPrio {
		masks = append(masks, m)
	}
	slices.SortFunc(masks, func(a, b tbpf.FilterKey) int {
		if c := cmp.Compare(minPrio[a], minPrio[b]); c != 0 {
			return c
		}
		return slices.Compare(keyBytes(a), keyBytes(b))
	})
	index := map[tbpf.FilterKey]uint16{}
	fs.Ntuples = uint32(len(masks))
	for i, m := range masks {
		fs.Tuples[i].Mask = m
		fs.Tuples[i].MinPrio = minPrio[m]
		if unreadable[m] {
			fs.Tuples[i].Unreadable = 1
		}
		index[m] = uint16(i)
	}
	// Each entry under its mask's index (the datapath looks up mask i's
	// masked key with i in the high byte of set): entries of two masks
	// with the same masked values are two entries.
	for _, e := range all {
		k := maskKey(e.m.val, e.m.mask)
		k.Set |= index[e.m.mask] << 8
		if h, ok := c.entries[k]; !ok || e.hit.Prio < h.Prio {
			c.entries[k] = e.hit // an earlier rule with the same match shadows a later one
		}
	}
	if f.DefaultBlock {
		fs.Flags |= tbpf.FilterBlock
	}
	fs.DefCounter = c.def
	fs.StateCounter = c.state
	fs.MaxStates, fs.MaxPortStates = f.MaxStates, f.MaxPortStates
	if fs.MaxStates == 0 {
		fs.MaxStates = uint32(tbpf.FilterStates)
	}
	if fs.MaxPortStates == 0 {
		fs.MaxPortStates = fs.MaxStates
	}
	return fs, nil
}

// keyBytes is a key's fields in order, to sort masks the same way each time.
func keyBytes(k tbpf.FilterKey) []byte {
	b := []byte{byte(k.Set >> 8), byte(k.Set), byte(k.In >> 8), byte(k.In), byte(k.Out >> 8), byte(k.Out),
		byte(k.Ethertype >> 8), byte(k.Ethertype), byte(k.Vlan >> 8), byte(k.Vlan), k.Proto, k.IcmpType,
		byte(k.Sport >> 8), byte(k.Sport), byte(k.Dport >> 8), byte(k.Dport), k.L4}
	b = append(b, k.Smac[:]...)
	b = append(b, k.Dmac[:]...)
	b = append(b, k.Src[:]...)
	return append(b, k.Dst[:]...)
}

func maskKey(v, m tbpf.FilterKey) tbpf.FilterKey {
	k := v
	k.Set &= m.Set
	k.In &= m.In
	k.Out &= m.Out
	k.Ethertype &= m.Ethertype
	k.Vlan &= m.Vlan
	k.Proto &= m.Proto
	k.IcmpType &= m.IcmpType
	k.Sport &= m.Sport
	k.Dport &= m.Dport
	k.L4 &= m.L4
	for i := range k.Smac {
		k.Smac[i] &= m.Smac[i]
		k.Dmac[i] &= m.Dmac[i]
	}
	for i := range k.Src {
		k.Src[i] &= m.Src[i]
		k.Dst[i] &= m.Dst[i]
	}
	return k
}

const (
	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
)

// ruleMatches expands a rule into its masks and values.
func ruleMatches(set uint16, r FilterRule) []filterMatch {
	var base filterMatch
	base.mask.Set, base.val.Set = 0xffff, set
	if r.In != 0 {
		base.mask.In, base.val.In = 0xffff, r.In
	}
	if r.Out != 0 {
		base.mask.Out, base.val.Out = 0xffff, r.Out
	}
	if r.VLAN != 0 {
		base.mask.Vlan, base.val.Vlan = 0xffff, r.VLAN
	}
	if r.HasProto {
		base.mask.Proto, base.val.Proto = 0xff, r.Proto
	}
	if r.HasICMPType {
		base.mask.IcmpType, base.val.IcmpType = 0xff, r.ICMPType
	}
	// A rule with port or ICMP keys matches only frames whose transport
	// header was read: never a fragment's or a hidden one's as port 0.
	if r.HasICMPType || r.SrcPort.Hi != 0 || r.DstPort.Hi != 0 {
		base.mask.L4, base.val.L4 = 0xff, tbpf.L4Read
	}
	if len(r.SrcMAC) == 6 {
		copy(base.val.Smac[:], r.SrcMAC)
		base.mask.Smac = [6]uint8{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	if len(r.DstMAC) == 6 {
		copy(base.val.Dmac[:], r.DstMAC)
		base.mask.Dmac = [6]uint8{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	setPrefix := func(p netip.Prefix, val, mask *[16]uint8) {
		if !p.IsValid() {
			return
		}
		a := p.Addr().AsSlice()
		copy(val[:], a)
		for i := 0; i < p.Bits(); i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
	}
	setPrefix(r.Src, &base.val.Src, &base.mask.Src)
	setPrefix(r.Dst, &base.val.Dst, &base.mask.Dst)

	// The EtherType: as given, or the IP version the rule's fields imply,
	// or, for IP fields of no stated version, one match for each.
	ip := r.HasProto || r.Src.IsValid() || r.Dst.IsValid() || r.SrcPort.Hi != 0 || r.DstPort.Hi != 0 || r.HasICMPType
	var types []uint16
	switch {
	case r.EtherType != 0:
		types = []uint16{r.EtherType}
	case r.Src.IsValid() && r.Src.Addr().Is4(), r.Dst.IsValid() && r.Dst.Addr().Is4(), r.HasProto && r.Proto == 1:
		types = []uint16{etherIPv4}
	case r.Src.IsValid(), r.Dst.IsValid(), r.HasProto && r.Proto == 58:
		types = []uint16{etherIPv6}
	case ip:
		types = []uint16{etherIPv4, etherIPv6}
	default:
		types = []uint16{0}
	}
	var out []filterMatch
	for _, t := range types {
		m := base
		if t != 0 {
			m.mask.Ethertype, m.val.Ethertype = 0xffff, t
		}
		for _, sp := range portPrefixes(r.SrcPort) {
			for _, dp := range portPrefixes(r.DstPort) {
				x := m
				x.val.Sport, x.mask.Sport = sp.val, sp.mask
				x.val.Dport, x.mask.Dport = dp.val, dp.mask
				out = append(out, x)
			}
		}
	}
	return out
}

// readsL4 says whether a rule reads past the IP header: a protocol, ports
// or an ICMP type.
func readsL4(r FilterRule) bool {
	return r.HasProto || r.HasICMPType || r.SrcPort.Hi != 0 || r.DstPort.Hi != 0
}

// unreadableMatches are the matches by which block rule r, one that reads
// past the IP header, blocks a frame whose transport header should be there
// and could not be read (bpf/types.h, TR_L4_UNREADABLE: past the extension
// headers the filter reads, or cut short): its other keys, the EtherTypes
// its fields imply, and not the protocol, which such a frame may hide too.
// The filter fails closed: a port it cannot read is not a port the rule
// does not name.
func unreadableMatches(set uint16, r FilterRule) []filterMatch {
	var out []filterMatch
	for _, m := range ruleMatches(set, r) {
		m.mask.Proto, m.val.Proto = 0, 0
		m.mask.IcmpType, m.val.IcmpType = 0, 0
		m.mask.Sport, m.val.Sport = 0, 0
		m.mask.Dport, m.val.Dport = 0, 0
		m.mask.L4, m.val.L4 = 0xff, tbpf.L4Unreadable
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

type portPrefix struct{ val, mask uint16 }

// portPrefixes covers a port range with the fewest prefixes (any port:
// one of mask 0).
func portPrefixes(r PortRange) []portPrefix {
	if r.Hi == 0 {
		return []portPrefix{{0, 0}}
	}
	var out []portPrefix
	lo, hi := uint32(r.Lo), uint32(r.Hi)
	for lo <= hi {
		size := uint32(1)
		for size < 1<<16 && lo%(size*2) == 0 && lo+size*2-1 <= hi {
			size *= 2
		}
		out = append(out, portPrefix{uint16(lo), uint16(^(size - 1))})
		lo += size
	}
	return out
}

// ---- tracked connections ----

// State is one tracked connection: From opened it to To.
type State struct {
	Bridge           uint16
	VLAN             uint16
	Proto            uint8
	From, To         netip.AddrPort
	Port             uint16 // the slot of the port it was opened from
	Replied, Closing bool
	// Established: seen both ways (TCP: the handshake's ACK after the
	// reply); Held: established, and in the bridge's bounded table (not
	// held: still among the unestablished, which go first when full).
	Established, Held bool
	Rule              int    // index from 0 of the rule that opened it
	AgeNs, IdleNs     uint64 // since it was opened, since its last frame (to within a second)
	TimeoutNs         uint64 // how long it lives idle, as it is now
	ExpiresNs         uint64 // idle time left
}

// stateTimeout is tr_state_timeout of bpf/lib/filter.h.
func stateTimeout(proto uint8, flags uint32) uint64 {
	var s uint64
	switch {
	case proto == 6 && flags&tbpf.StateClosing != 0:
		s = uint64(tbpf.TrestleTrStateTimeoutsTR_STATE_TCP_CLOSING)
	case proto == 6 && flags&tbpf.StateEstablished != 0:
		s = uint64(tbpf.TrestleTrStateTimeoutsTR_STATE_TCP_ESTABLISHED)
	case proto == 6:
		s = uint64(tbpf.TrestleTrStateTimeoutsTR_STATE_TCP_OPENING)
	case proto == 17:
		s = uint64(tbpf.TrestleTrStateTimeoutsTR_STATE_UDP)
	default:
		s = uint64(tbpf.TrestleTrStateTimeoutsTR_STATE_ICMP)
	}
	return s * 1e9
}

func stateAddr(family uint8, b [16]uint8, port uint16) netip.AddrPort {
	if family == 4 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(b), port)
}

func stateOf(k tbpf.StateKey, v tbpf.State, now, wall uint64, held bool) State {
	a, b := stateAddr(k.Family, k.A, k.Aport), stateAddr(k.Family, k.B, k.Bport)
	s := State{Bridge: k.Bridge, VLAN: k.Vlan, Proto: k.Proto, From: b, To: a, Port: v.Port,
		Replied: v.Flags&tbpf.StateReplied != 0, Closing: v.Flags&tbpf.StateClosing != 0,
		Established: v.Flags&tbpf.StateEstablished != 0, Held: held,
		Rule: int(v.Rule), TimeoutNs: stateTimeout(k.Proto, v.Flags)}
	if v.Flags&tbpf.StateAOpened != 0 {
		s.From, s.To = a, b
	}
	if now > v.SeenNs {
		s.IdleNs = now - v.SeenNs
	}
	if wall > v.CreatedNs {
		s.AgeNs = wall - v.CreatedNs
	}
	if s.IdleNs < s.TimeoutNs {
		s.ExpiresNs = s.TimeoutNs - s.IdleNs
	}
	return s
}

// stateTables are the tables of tracked connections: the established ones
// each bridge and port holds within its bounds, then the rest, each
// bridge's in its own LRU.
func (d *Datapath) stateTables() []*ebpf.Map {
	ms := []*ebpf.Map{d.objs.FilterStates}
	ids := slices.Sorted(maps.Keys(d.halfOpen))
	for _, id := range ids {
		ms = append(ms, d.halfOpen[id])
	}
	return ms
}

// halfOpenSets are the bridges' tables of unestablished connections
// (bpf/lib/filter.h, filter_halfopen), as the flood sets are held.
func (d *Datapath) halfOpenSets() progFloods {
	return progFloods{what: "table of unestablished connections", outer: d.objs.FilterHalfopen, sets: d.halfOpen}
}

// ensureHalfOpen makes bridge id's table of unestablished connections, if
// it has none: before a rule set that keeps state is written, so that the
// datapath finds it (without, a new connection is blocked as state_full).
// It stays until the bridge goes (dropFilters): a reload that stops
// keeping state and starts again keeps the connections in it.
func (d *Datapath) ensureHalfOpen(id uint16) error {
	if _, ok := d.halfOpen[id]; ok {
		return nil
	}
	spec := d.spec.Maps[tbpf.TrestleMapFilterHalfopen].InnerMap.Copy()
	spec.Name = fmt.Sprintf("tr_halfopen_%d", id)
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return fmt.Errorf("create the table of unestablished connections: %w", err)
	}
	if err := d.objs.FilterHalfopen.Put(uint32(id), m); err != nil {
		m.Close()
		return fmt.Errorf("install the table of unestablished connections: %w", err)
	}
	d.halfOpen[id] = m
	return nil
}

// adoptHalfOpen takes hold of the tables of unestablished connections an
// adopted datapath holds.
func (d *Datapath) adoptHalfOpen() error {
	return adoptInner(d.objs.FilterHalfopen, d.halfOpen, "table of unestablished connections")
}

// States lists the tracked connections of every bridge.
func (d *Datapath) States() ([]State, error) {
	var out []State
	var k tbpf.StateKey
	var v tbpf.State
	now, wall := Now(), monotonicNow()
	for i, m := range d.stateTables() {
		it := m.Iterate()
		for it.Next(&k, &v) {
			out = append(out, stateOf(k, v, now, wall, i == 0))
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("read tracked connections: %w", err)
		}
	}
	return out, nil
}

// AgeStates removes the tracked connections idle past their timeout (the
// datapath already treats them as gone), and those of bridges for which
// keep(bridge) is false; it returns how many it removed. Then it counts
// the established connections each bridge and port holds again, for the
// datapath's bounds.
func (d *Datapath) AgeStates(keep func(bridge uint16) bool) (int, error) {
	var k tbpf.StateKey
	var v tbpf.State
	n := 0
	now := Now()
	counts := make([]uint32, tbpf.StateCountPort+tbpf.MaxPorts)
	for i, m := range d.stateTables() {
		var gone []tbpf.StateKey
		it := m.Iterate()
		for it.Next(&k, &v) {
			if (now > v.SeenNs && now-v.SeenNs > stateTimeout(k.Proto, v.Flags)) || (keep != nil && !keep(k.Bridge)) {
				gone = append(gone, k)
			} else if i == 0 {
				if int(k.Bridge) <= tbpf.MaxBridges {
					counts[k.Bridge]++
				}
				if int(v.Port) < tbpf.MaxPorts {
					counts[tbpf.StateCountPort+int(v.Port)]++
				}
			}
		}
		if err := it.Err(); err != nil {
			return n, fmt.Errorf("read tracked connections: %w", err)
		}
		for _, k := range gone {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return n, fmt.Errorf("remove a tracked connection: %w", err)
			}
			n++
		}
	}
	if err := d.writeStateCounts(counts); err != nil {
		return n, err
	}
	return n, nil
}

// writeStateCounts writes the counts of established connections by bridge
// and port. A connection the datapath establishes between the sweep's read
// and this write is not counted until the next sweep: a bound may be
// passed by the few established in that moment.
func (d *Datapath) writeStateCounts(counts []uint32) error {
	keys := make([]uint32, len(counts))
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := d.objs.FilterStateCounts.BatchUpdate(keys, counts, nil); err != nil {
		for i, c := range counts {
			if err := d.objs.FilterStateCounts.Put(uint32(i), c); err != nil {
				return fmt.Errorf("write the counts of tracked connections: %w", err)
			}
		}
	}
	return nil
}

// StateCounts reads the datapath's counts of established connections: of
// bridge id, and of each port slot that has any.
func (d *Datapath) StateCounts(id uint16) (bridge uint32, ports map[uint16]uint32, err error) {
	if err := d.objs.FilterStateCounts.Lookup(uint32(id), &bridge); err != nil {
		return 0, nil, fmt.Errorf("read the count of bridge %d's connections: %w", id, err)
	}
	ports = map[uint16]uint32{}
	for s := 0; s < tbpf.MaxPorts; s++ {
		var c uint32
		if err := d.objs.FilterStateCounts.Lookup(uint32(tbpf.StateCountPort+s), &c); err != nil {
			return 0, nil, fmt.Errorf("read the count of slot %d's connections: %w", s, err)
		}
		if c != 0 {
			ports[uint16(s)] = c
		}
	}
	return bridge, ports, nil
}

// FilterUnread is how many times bridge id's filter judged a frame whose
// transport header it could not read, by the reason (enum
// tr_filter_unread: a non-first fragment, too many IPv6 extension headers,
// a header cut short or out of reach).
type FilterUnread struct{ Fragment, ExtHeaders, Truncated uint64 }

func (d *Datapath) FilterUnread(id uint16) (FilterUnread, error) {
	var out FilterUnread
	read := func(reason int) (uint64, error) {
		per := make([]uint64, d.ncpu)
		if err := d.objs.FilterUnread.Lookup(uint32(int(id)*tbpf.UnreadReasons+reason), &per); err != nil {
			return 0, fmt.Errorf("read bridge %d's unread transport headers: %w", id, err)
		}
		var s uint64
		for _, p := range per {
			s += p
		}
		return s, nil
	}
	var err error
	if out.Fragment, err = read(int(tbpf.TrestleTrFilterUnreadTR_UNREAD_FRAGMENT)); err != nil {
		return out, err
	}
	if out.ExtHeaders, err = read(int(tbpf.TrestleTrFilterUnreadTR_UNREAD_EXTHDRS)); err != nil {
		return out, err
	}
	if out.Truncated, err = read(int(tbpf.TrestleTrFilterUnreadTR_UNREAD_TRUNCATED)); err != nil {
		return out, err
	}
	return out, nil
}

// monotonicNow is bpf_ktime_get_ns()'s clock (CLOCK_MONOTONIC).
func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
