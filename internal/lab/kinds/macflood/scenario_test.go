package macflood_test

import (
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all" // the mac-flood preset, which has a throughput test too
	"github.com/trestle/trestle/internal/lab/kinds/macflood"
)

// TestMACFloodScenario: the mac-flood preset, its estimate, what its
// stream refuses, and its note.
func TestMACFloodScenario(t *testing.T) {
	s := lab.Scenarios["mac-flood"]
	if sources(s) != 1000000 || s.MaxEntries != 65536 || s.Duration != 30*time.Second || s.Load != 0.5 || s.Hosts != 4 || !s.Has(lab.TestThroughput) || !s.Has(lab.TestMACFlood) {
		t.Errorf("mac-flood: %+v", s)
	}
	if _, err := s.PrepareKinds(); err != nil {
		t.Error(err)
	}
	if total := s.Estimate(); total < 4*time.Minute || total > 12*time.Minute {
		t.Errorf("mac-flood estimated at %v", total)
	}
	for _, c := range []struct {
		edit func(*lab.Scenario)
		want string
	}{
		{func(s *lab.Scenario) { s.Load = 0 }, "load 0"},
		{func(s *lab.Scenario) { s.Duration = 0 }, "duration above 0"},
		{func(s *lab.Scenario) {
			lab.Configure(s, func(k macflood.Kind) macflood.Kind { k.Sources = 1<<24 + 1; return k })
		}, "sources"},
		{func(s *lab.Scenario) { s.Hosts = 3 }, "need 4"},
	} {
		bad := s
		c.edit(&bad)
		if _, err := bad.PrepareKinds(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkStream: %v, want %q", err, c.want)
		}
	}
	notes, _ := s.PrepareKinds()
	if len(notes) != 1 || !strings.Contains(notes[0], "1000000 source addresses") || !strings.Contains(notes[0], "Table size asked of every DUT: 65536") {
		t.Errorf("notes: %q", notes)
	}
}

// sources is the flood's source addresses of s's mac-flood test.
func sources(s lab.Scenario) int {
	k, _ := lab.TestOf[macflood.Kind](s)
	return k.Sources
}
