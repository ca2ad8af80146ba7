package datapath

import (
	"net"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
)

// TestWalkFDBLargeTable fills the learning table with 60,000 learned
// entries and walks it: every entry is handed over once, in chunks of at
// most FDBChunk; deleting each chunk's idle half as it is handed over (as
// the aging sweep does) deletes exactly those, and the address counts of
// the ports and the bridge follow each deletion.
func TestWalkFDBLargeTable(t *testing.T) {
	testutil.RequireRoot(t)
	const n = 60000
	dp, err := Load(Options{FDBCapacity: 65536, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	mac := func(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)} }
	index := func(m net.HardwareAddr) int { return int(m[3])<<16 | int(m[4])<<8 | int(m[5]) }
	for i := range n {
		if _, _, err := dp.PutLearned(FDBEntry{Bridge: 1, MAC: mac(i), Slot: uint16(1 + i%3), Ifindex: uint32(10 + i%3)}); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if got, _ := dp.BridgeMACs(1); got != n {
		t.Fatalf("bridge counts %d addresses, want %d", got, n)
	}

	seen := make([]bool, n)
	chunks := 0
	err = dp.WalkFDB(func(es []FDBEntry) error {
		chunks++
		if len(es) > FDBChunk {
			t.Fatalf("a chunk of %d entries, more than %d", len(es), FDBChunk)
		}
		var odd []FDBEntry
		for _, e := range es {
			i := index(e.MAC)
			if seen[i] {
				t.Fatalf("entry %s handed over twice", e.MAC)
			}
			seen[i] = true
			if i%2 == 1 {
				odd = append(odd, e)
			}
		}
		got, err := dp.DelFDBs(odd)
		if err != nil || got != len(odd) {
			t.Fatalf("delete %d of a chunk: %d, %v", len(odd), got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("entry %d never handed over", i)
		}
	}
	if chunks < n/FDBChunk {
		t.Errorf("%d chunks for %d entries", chunks, n)
	}
	left, err := dp.FDB()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != n/2 {
		t.Errorf("%d entries left, want %d", len(left), n/2)
	}
	for _, e := range left {
		if index(e.MAC)%2 == 1 {
			t.Fatalf("entry %s was to go", e.MAC)
		}
	}
	want := [4]int{}
	for i := 0; i < n; i += 2 {
		want[1+i%3]++
	}
	for slot := uint16(1); slot <= 3; slot++ {
		if got, _ := dp.PortMACs(slot); got != want[slot] {
			t.Errorf("slot %d counts %d addresses, want %d", slot, got, want[slot])
		}
	}
	if got, _ := dp.BridgeMACs(1); got != n/2 {
		t.Errorf("bridge counts %d addresses, want %d", got, n/2)
	}
}
