package lab_test

import (
	"testing"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
	"github.com/trestle/trestle/internal/lab/kinds/cores"
)

// TestKindQueues: every veth end gets the queues a kind asks (the cores
// kind: its largest count), direct's too; other scenarios keep one.
func TestKindQueues(t *testing.T) {
	s := Scenarios["cores"]
	Configure(&s, func(k cores.Kind) cores.Kind { k.Counts = []int{1, 2}; return k })
	if q := s.Shape(MustSpec("direct"), 0).Queues; q != 2 {
		t.Errorf("direct's queues %d, want 2", q)
	}
	if q := s.Shape(MustSpec("trestle:xdp"), 1).Queues; q != 2 {
		t.Errorf("the bridge's queues %d, want 2", q)
	}
	if q := Scenarios["quick"].Shape(MustSpec("trestle:xdp"), 1).Queues; q != 0 {
		t.Errorf("quick's queues %d, want 0 (one)", q)
	}
}
