package bpf

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/cilium/ebpf/btf"
)

// Counters are indexes of PortStats.C and VLANStats.C (enum tr_counter and
// enum tr_vlan_counter of bpf/types.h). Their names come from the object's
// BTF, not from a list here: TR_CNT_RX_PACKETS is "rx_packets", so a
// counter added to the enum reaches `trestle stats`, `trestle top` and the
// metrics with no Go change.
type (
	Counter     = TrestleTrCounter
	VLANCounter = TrestleTrVlanCounter
)

const (
	NumCounters     = int(TrestleTrCounterTR_CNT__MAX)
	NumVLANCounters = int(TrestleTrVlanCounterTR_VCNT__MAX)

	// The counters the control plane itself reads by meaning.
	RxPackets = TrestleTrCounterTR_CNT_RX_PACKETS
	RxBytes   = TrestleTrCounterTR_CNT_RX_BYTES
	TxPackets = TrestleTrCounterTR_CNT_TX_PACKETS
	TxBytes   = TrestleTrCounterTR_CNT_TX_BYTES
	Flooded   = TrestleTrCounterTR_CNT_FLOODED
	Learned   = TrestleTrCounterTR_CNT_LEARNED
	Moved     = TrestleTrCounterTR_CNT_MOVED
	Unlearned = TrestleTrCounterTR_CNT_UNLEARNED
	TxDropped = TrestleTrCounterTR_CNT_TX_DROPPED
	// Of Unlearned: the new sources a bridge's table refused (issue 29).
	UnlearnedFull = TrestleTrCounterTR_CNT_UNLEARNED_FULL
	// Of TxPackets: the frames an overlay port sent encapsulated by the
	// datapath (in XDP or at tc), not through its vxlan device.
	Encap = TrestleTrCounterTR_CNT_ENCAP

	VLANRxPackets = TrestleTrVlanCounterTR_VCNT_RX_PACKETS
	VLANRxBytes   = TrestleTrVlanCounterTR_VCNT_RX_BYTES
	VLANTxPackets = TrestleTrVlanCounterTR_VCNT_TX_PACKETS
	VLANTxBytes   = TrestleTrVlanCounterTR_VCNT_TX_BYTES
	VLANFlooded   = TrestleTrVlanCounterTR_VCNT_FLOODED
)

var enumNames = sync.OnceValues(func() (map[string][]string, error) {
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(_TrestleBytes))
	if err != nil {
		return nil, fmt.Errorf("read the object's BTF: %w", err)
	}
	out := map[string][]string{}
	for _, e := range []struct{ enum, prefix string }{{"tr_counter", "TR_CNT_"}, {"tr_vlan_counter", "TR_VCNT_"}} {
		names, err := indexNames(spec, e.enum, e.prefix)
		if err != nil {
			return nil, err
		}
		out[e.enum] = names
	}
	return out, nil
})

// indexNames reads an index enum: values 0..n-1, then the PREFIX_MAX
// sentinel n; each name is the value's with the prefix cut, in lower case.
func indexNames(spec *btf.Spec, enum, prefix string) ([]string, error) {
	var e *btf.Enum
	if err := spec.TypeByName(enum, &e); err != nil {
		return nil, fmt.Errorf("enum %s: %w", enum, err)
	}
	var names []string
	for _, v := range e.Values {
		if v.Name == prefix+"_MAX" {
			if int(v.Value) != len(names) {
				return nil, fmt.Errorf("enum %s: %s is %d after %d values", enum, v.Name, v.Value, len(names))
			}
			return names, nil
		}
		if !strings.HasPrefix(v.Name, prefix) || int(v.Value) != len(names) {
			return nil, fmt.Errorf("enum %s: %s = %d: want %s%s = %d", enum, v.Name, v.Value, prefix, "...", len(names))
		}
		names = append(names, strings.ToLower(strings.TrimPrefix(v.Name, prefix)))
	}
	return nil, fmt.Errorf("enum %s has no %s_MAX", enum, prefix)
}

func namesOf(enum string, n int, fallback string) []string {
	m, err := enumNames()
	if err == nil && len(m[enum]) == n {
		return m[enum]
	}
	// Only a broken build gets here (TestCounterNames fails on it); the
	// counters are still shown, by index.
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s_%d", fallback, i)
	}
	return out
}

// CounterNames are the port counters' names in index order. The slice is
// shared: do not change it.
func CounterNames() []string { return namesOf("tr_counter", NumCounters, "counter") }

// VLANCounterNames are the VLAN counters' names in index order (shared).
func VLANCounterNames() []string {
	return namesOf("tr_vlan_counter", NumVLANCounters, "vlan_counter")
}

// CounterNamesErr says why the names could not be read, for the test.
func CounterNamesErr() error {
	_, err := enumNames()
	return err
}

func (c Counter) String() string {
	if n := CounterNames(); int(c) < len(n) {
		return n[c]
	}
	return fmt.Sprintf("counter_%d", uint32(c))
}

func (c VLANCounter) String() string {
	if n := VLANCounterNames(); int(c) < len(n) {
		return n[c]
	}
	return fmt.Sprintf("vlan_counter_%d", uint32(c))
}
