package datapath

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
)

// A settle (SettleBegin, Wait, SettleEnd) takes the wait that a flipped
// bridge's next write would take (sync): after it no bridge is left to
// wait for, but for one flipped while it waited, and the bridge is written
// again whole.
func TestSettle(t *testing.T) {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	ports := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}}
	set := func(ports []PortInfo) error {
		return r.ns.Do(func() error { return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports}) })
	}
	if err := set(ports); err != nil {
		t.Fatal(err)
	}
	if !r.dp.unsynced[1] {
		t.Fatal("a bridge just written is not waited for")
	}
	settle := func() {
		t.Helper()
		s := r.dp.SettleBegin()
		if s == nil {
			t.Fatal("SettleBegin: no bridge to wait for")
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		r.dp.SettleEnd(s)
	}
	settle()
	if len(r.dp.unsynced) != 0 {
		t.Errorf("after a settle, bridges %v are still to be waited for", r.dp.unsynced)
	}
	if s := r.dp.SettleBegin(); s != nil {
		t.Error("SettleBegin after a settle: a bridge to wait for")
	}
	// A bridge flipped while the wait ran is still waited for.
	if err := set(ports); err != nil {
		t.Fatal(err)
	}
	s := r.dp.SettleBegin()
	if err := set(ports); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	r.dp.SettleEnd(s)
	if !r.dp.unsynced[1] {
		t.Error("a bridge flipped after the settle began is no longer waited for")
	}
	settle()
	if err := set(ports[:1]); err != nil {
		t.Fatal(err)
	}
	bs, err := r.dp.Bridges()
	if err != nil || len(bs) != 1 || len(bs[0].Ports) != 1 || bs[0].Ports[0].Ifindex != r.port[1] {
		t.Errorf("the bridge written after Settle reads back as %+v (%v)", bs, err)
	}
}

// A flood set that a write leaves with no room for another member is
// written in place, and the next settle gives it twice the size, so that
// the next port joins without a map of maps' wait on its way; one left
// more than twice the size it needs is made smaller the same way. A write
// that comes before the settle's Wait takes its replacement back (it
// would be out of date), and the next settle makes it again; no member is
// lost on the way.
func TestSettleResizesFloodSets(t *testing.T) {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	all := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}, {Ifindex: r.port[3], Bridge: 1, Slot: 3}}
	err := r.ns.Do(func() error {
		more, err := morePorts(r, 5)
		if err != nil {
			return err
		}
		all = append(all, more...)
		set := func(ports []PortInfo) error {
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports})
		}
		settle := func() error {
			s := r.dp.SettleBegin()
			if s == nil {
				return nil
			}
			if err := s.Wait(); err != nil {
				return err
			}
			r.dp.SettleEnd(s)
			return nil
		}
		// check: the set holds ports, has size, and is the one frames use.
		check := func(ports []PortInfo, size uint32) error {
			m := r.dp.floods[1]
			held, err := members(m)
			if err != nil {
				return err
			}
			if len(held) != len(ports) || m.MaxEntries() != size {
				return fmt.Errorf("flood set of size %d holds %v, want size %d holding %v", m.MaxEntries(), held, size, ports)
			}
			for _, p := range ports {
				if !held[p.Ifindex] {
					return fmt.Errorf("flood set holds %v, not ifindex %d", held, p.Ifindex)
				}
			}
			var id ebpf.MapID
			if err := r.dp.objs.Floods.Lookup(uint32(1), &id); err != nil {
				return err
			}
			info, err := m.Info()
			if err != nil {
				return err
			}
			if want, _ := info.ID(); id != want {
				return fmt.Errorf("frames use flood set %d, the datapath holds %d", id, want)
			}
			return nil
		}
		if err := set(all[:3]); err != nil {
			return err
		}
		if err := check(all[:3], 4); err != nil {
			return err
		}
		if err := settle(); err != nil {
			return err
		}
		if len(r.dp.ahead) != 0 {
			return fmt.Errorf("a set of 3 of 4 is given another size: %v", r.dp.ahead)
		}

		// Full: written in place, grown by the settle.
		was := r.dp.floods[1]
		if err := set(all[:4]); err != nil {
			return err
		}
		if r.dp.floods[1] != was {
			return fmt.Errorf("a set with room for one more was replaced on the write's way")
		}
		if err := check(all[:4], 4); err != nil {
			return err
		}
		s := r.dp.SettleBegin()
		if s == nil || len(s.swaps) != 1 {
			return fmt.Errorf("a full set is not grown by the settle: %+v", s)
		}
		// A write before the Wait takes the replacement back.
		if err := set(all[:4]); err != nil {
			return err
		}
		if err := s.Wait(); err != nil {
			return err
		}
		r.dp.SettleEnd(s)
		if err := check(all[:4], 4); err != nil {
			return fmt.Errorf("after a settle whose replacement a write took back: %w", err)
		}
		if err := settle(); err != nil {
			return err
		}
		if err := check(all[:4], 8); err != nil {
			return fmt.Errorf("after the settle: %w", err)
		}
		if err := set(all); err != nil {
			return err
		}
		if err := settle(); err != nil {
			return err
		}
		if err := check(all, 16); err != nil {
			return fmt.Errorf("after the settle: %w", err)
		}

		// More than twice the size it needs: made smaller by the
		// settle. Twice (16 for 5, which need 8) is not: a set at the
		// edge of two sizes would be replaced at every port that comes
		// or goes.
		if err := set(all[:5]); err != nil {
			return err
		}
		if err := settle(); err != nil {
			return err
		}
		if err := check(all[:5], 16); err != nil {
			return fmt.Errorf("twice the size it needs: %w", err)
		}
		if err := set(all[:1]); err != nil {
			return err
		}
		if err := check(all[:1], 16); err != nil {
			return err
		}
		if err := settle(); err != nil {
			return err
		}
		if err := check(all[:1], 4); err != nil {
			return fmt.Errorf("after the settle: %w", err)
		}
		if s := r.dp.SettleBegin(); s != nil {
			return fmt.Errorf("nothing left to settle, yet %+v", s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
