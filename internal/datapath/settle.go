package datapath

import (
	"fmt"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
)

// Settles: the waits a bridge's write leaves for the next write, taken
// beside whatever comes next instead of on its way (docs/performance.md
// "Pod churn").
//
// Two things a write leaves make the next one wait an RCU grace period
// (7-15 ms on a busy 2-CPU machine):
//   - a flip (SetBridge): the copy it left is the next write's, once no
//     frame can still be reading it (sync);
//   - a flood set with no room for another member, or far larger than its
//     members need (sizedSet.fill): the next write that adds a member
//     replaces it by one of the right size, and putting a map into a map
//     of maps waits a grace period in the kernel (maybe_wait_bpf_programs),
//     as every floods' broadcast visits each bucket of an oversized one.
//     Pods added one after another met that at every power of two.
//
// The daemon takes both once it has answered a port.add or port.del, or
// ended an apply: SettleBegin, under its lock, marks the flips so far and
// makes the replacement sets, filled; Settle.Wait, without the lock, puts
// them in place in their maps of maps (each a grace period) or waits one
// grace period when there are none; SettleEnd, under the lock again, takes
// the replacements for the sets and forgets the flips marked, unless a
// bridge was flipped since. A write that comes meanwhile: SetBridge's wait
// for a flip (sync) is the settle's own when it covers every flip, not a
// new one; a write of a flood set (SetBridge, DelBridge) waits until the
// settle's replacements are in (awaitSettles), or takes back those not
// yet begun, so that a replacement is never out of date when it goes in.

// Settle is one settle under way (SettleBegin).
type Settle struct {
	d     *Datapath
	mark  uint64 // the flips when it began
	mu    sync.Mutex
	begun bool         // Wait has begun: its swaps are going in
	swaps []*floodSwap // replacements, taken back (nil) if a write came first
	done  chan struct{}
	// waited: a grace period passed after SettleBegin (Wait's, or a
	// swap's).
	waited bool
	err    error
}

// floodSwap is a flood set's replacement of the right size, filled with
// the members the set holds.
type floodSwap struct {
	set      sizedSet
	id       uint16
	old, new *ebpf.Map
	held     map[uint32]bool
	err      error
}

// aheadKey names a flood set: its map of maps and its bridge.
type aheadKey struct {
	outer *ebpf.Map
	id    uint16
}

// SettleBegin begins a settle, or says (nil) that no write waits for
// anything. Called as the other methods are (under the daemon's lock);
// the caller then calls Wait without its lock, and SettleEnd with it.
func (d *Datapath) SettleBegin() *Settle {
	s := &Settle{d: d, mark: d.flips, done: make(chan struct{})}
	for k, set := range d.ahead {
		sw, err := set.replacement(k.id)
		if err != nil {
			// The set stays as it is; a write that outgrows it
			// replaces it on its way, as before.
			d.log("could not make a flood set of the right size ahead of the next write", "set", set.what, "bridge", k.id, "err", err)
		} else if sw != nil {
			s.swaps = append(s.swaps, sw)
		}
	}
	clear(d.ahead)
	if len(d.unsynced) == 0 && len(s.swaps) == 0 {
		return nil
	}
	d.settles = append(d.settles, s)
	return s
}

// Wait puts the settle's replacement flood sets in place, or waits for a
// grace period when it has none. It runs beside the datapath's other
// methods, which it does not call.
func (s *Settle) Wait() error {
	s.mu.Lock()
	s.begun = true
	swaps := s.swaps
	s.mu.Unlock()
	defer close(s.done)
	if len(swaps) == 0 {
		s.err = s.d.WaitGrace()
		s.waited = s.err == nil
		return s.err
	}
	for _, sw := range swaps {
		if sw.err = sw.set.outer.Put(uint32(sw.id), sw.new); sw.err != nil {
			continue
		}
		s.waited = true
		empty(sw.old, sw.held)
	}
	return nil
}

// SettleEnd ends a settle whose Wait has returned: its replacements take
// their sets' places, and the flips it marked need no wait unless a bridge
// was flipped since.
func (d *Datapath) SettleEnd(s *Settle) {
	<-s.done
	d.endSettle(s)
}

// endSettle ends a settle that is done, once.
func (d *Datapath) endSettle(s *Settle) {
	if !slices.Contains(d.settles, s) {
		return
	}
	d.settles = slices.DeleteFunc(d.settles, func(x *Settle) bool { return x == s })
	for _, sw := range s.swaps {
		if sw.err != nil {
			sw.new.Close()
			d.ahead[aheadKey{sw.set.outer, sw.id}] = sw.set // the next settle tries again
			d.log("could not put a flood set of the right size in place ahead of the next write", "set", sw.set.what, "bridge", sw.id, "err", sw.err)
			continue
		}
		sw.set.sets[sw.id] = sw.new
		sw.old.Close()
	}
	if s.waited && d.flips == s.mark {
		clear(d.unsynced)
	}
}

// awaitSettles is called before a write of the flood sets: a settle whose
// replacements are going in is waited for and ended; one whose Wait has
// not begun gives its replacements back (to the next settle) and waits
// only for a grace period.
func (d *Datapath) awaitSettles() {
	for _, s := range slices.Clone(d.settles) {
		s.mu.Lock()
		begun, swaps := s.begun, s.swaps
		if !begun {
			for _, sw := range swaps {
				sw.new.Close()
				d.ahead[aheadKey{sw.set.outer, sw.id}] = sw.set
			}
			s.swaps = nil
		}
		s.mu.Unlock()
		if begun && len(swaps) > 0 {
			<-s.done
			d.endSettle(s)
		}
	}
}

// settled waits for a settle under way whose wait covers every flip so far
// (it began after the last, and its Wait has begun), and says whether
// there was one: SetBridge's wait for a flip is then the rest of its wait,
// not a grace period of its own.
func (d *Datapath) settled() bool {
	for _, s := range d.settles {
		s.mu.Lock()
		begun := s.begun
		s.mu.Unlock()
		if begun && s.mark == d.flips {
			<-s.done
			if s.waited {
				return true
			}
		}
	}
	return false
}

// replacement is bridge id's set of the right size for its members, room
// for one more (floodSetSize), filled; nil when it has that size, or no
// set.
func (s sizedSet) replacement(id uint16) (*floodSwap, error) {
	old, ok := s.sets[id]
	if !ok {
		return nil, nil
	}
	held, err := members(old)
	if err != nil {
		return nil, err
	}
	size := floodSetSize(len(held)+1, s.limit)
	if int(old.MaxEntries()) == size {
		return nil, nil
	}
	m, err := s.create(id, size, held)
	if err != nil {
		return nil, err
	}
	return &floodSwap{set: s, id: id, old: old, new: m, held: held}, nil
}

// create makes bridge id's set of size, holding want.
func (s sizedSet) create(id uint16, size int, want map[uint32]bool) (*ebpf.Map, error) {
	spec := floodSpec(fmt.Sprintf("%s_%d", s.name, id), s.valueSize)
	spec.MaxEntries = uint32(size)
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", s.what, err)
	}
	for ifindex := range want {
		if err := s.put(m, ifindex); err != nil {
			m.Close()
			return nil, fmt.Errorf("add ifindex %d to the %s: %w", ifindex, s.what, err)
		}
	}
	return m, nil
}

// noteSize asks the next settle for bridge id's set m of n members of
// another size: it has no room for one more, or is more than twice the
// size it needs (floodSetSize).
func (s sizedSet) noteSize(id uint16, m *ebpf.Map, n int) {
	if s.ahead == nil {
		return
	}
	k := aheadKey{s.outer, id}
	size, have := floodSetSize(n+1, s.limit), int(m.MaxEntries())
	if have != size && (have < n+1 || have > 2*size) {
		s.ahead[k] = s
	} else {
		delete(s.ahead, k)
	}
}
