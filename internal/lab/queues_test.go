package lab

import (
	"slices"
	"strings"
	"testing"
)

// TestQueues: Open vSwitch's AF_XDP ports get a socket on every queue,
// none asked with one; a trial without CPUs of its own runs its generator
// on the placement's CPU.
func TestQueues(t *testing.T) {
	tp := &Topo{Shape: Shape{Queues: 2}, Bridges: []Bridge{{Name: "br1", Ports: []string{"p1", "p2"}}}}
	if args := strings.Join(ovsArgs(tp, &Env{DUTCPU: 1}, "afxdp"), " "); strings.Count(args, "options:n_rxq=2") != 2 {
		t.Errorf("ovs-vsctl args lack n_rxq=2 on both ports:\n%s", args)
	}
	tp.Shape.Queues = 0
	if args := strings.Join(ovsArgs(tp, &Env{DUTCPU: 1}, "afxdp"), " "); strings.Contains(args, "n_rxq") {
		t.Errorf("n_rxq with one queue:\n%s", args)
	}
	p := Placement{GenCPU: 3}
	if got := (TrialSpec{}).genCPUs(p); !slices.Equal(got, []int{p.GenCPU}) {
		t.Errorf("a trial without CPUs runs on %v", got)
	}
	if got := (TrialSpec{CPUs: []int{0, 1}}).genCPUs(p); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("a trial with CPUs 0 and 1 runs on %v", got)
	}
}
