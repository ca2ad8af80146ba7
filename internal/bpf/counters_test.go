package bpf

import (
	"strings"
	"testing"
)

// The counters' names come from the enums themselves; this checks that they
// can be read, are unique, and agree with the constants bpf2go generated.
func TestCounterNames(t *testing.T) {
	if err := CounterNamesErr(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		names []string
		n     int
	}{{CounterNames(), NumCounters}, {VLANCounterNames(), NumVLANCounters}} {
		if len(c.names) != c.n {
			t.Fatalf("%d names for %d counters: %v", len(c.names), c.n, c.names)
		}
		seen := map[string]bool{}
		for i, n := range c.names {
			if n == "" || seen[n] || strings.ToLower(n) != n || strings.ContainsAny(n, " -") {
				t.Errorf("counter %d: name %q is empty, repeated or not snake case", i, n)
			}
			seen[n] = true
		}
	}
	for c, want := range map[Counter]string{RxPackets: "rx_packets", TxBytes: "tx_bytes", Flooded: "flooded", Moved: "moved", Unlearned: "unlearned"} {
		if c.String() != want {
			t.Errorf("counter %d is %q, want %q", uint32(c), c.String(), want)
		}
	}
	if VLANFlooded.String() != "flooded" || VLANRxBytes.String() != "rx_bytes" {
		t.Errorf("VLAN counters: %v", VLANCounterNames())
	}
}
