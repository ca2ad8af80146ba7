package lab_test

import (
	"testing"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all" // every kind, as `trestle lab` has them
	"github.com/trestle/trestle/internal/lab/kinds/idle"
)

// TestKindsRegistry: every kind is registered once, under the name its
// results carry, and every preset's tests are registered kinds.
func TestKindsRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds {
		if seen[k.Name()] {
			t.Errorf("%s registered twice", k.Name())
		}
		seen[k.Name()] = true
		if KindOf(k.Name()) == nil {
			t.Errorf("KindOf(%s) is nil", k.Name())
		}
	}
	if u := Unplaced(); len(u) > 0 {
		t.Errorf("kinds registered after a kind that never was: %v", u)
	}
	for _, want := range []string{idle.TestIdle} {
		if !seen[want] {
			t.Errorf("%s, a kind of its own package, is not registered (internal/lab/kinds/all)", want)
		}
	}
	for _, n := range ScenarioNames() {
		for _, test := range Scenarios[n].Tests {
			if !seen[test.Name()] {
				t.Errorf("%s: test %s is not a registered kind", n, test.Name())
			}
		}
	}
}
