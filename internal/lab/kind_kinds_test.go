package lab_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
	"github.com/trestle/trestle/internal/lab/kinds/restart"
	"github.com/trestle/trestle/internal/lab/kinds/soak"
	"github.com/trestle/trestle/internal/lab/kinds/tcp"
	"github.com/trestle/trestle/internal/lab/kinds/udp"

	"github.com/spf13/pflag"
)

// parsed is a flag set with every kind's flags, args parsed.
func parsed(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	f := pflag.NewFlagSet("lab", pflag.ContinueOnError)
	DeclareFlags(f)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestKindFlags: the kinds' flags set the settings of the scenario's own
// tests, on a copy: the preset keeps its settings; a scenario none of
// whose kinds takes a flag refuses it.
func TestKindFlags(t *testing.T) {
	f := parsed(t, "--streams", "2,3", "--udp-rate", "5G")
	sc := Scenarios["inline"]
	if err := sc.SetFlags(f); err != nil {
		t.Fatal(err)
	}
	tk, _ := TestOf[tcp.Kind](sc)
	uk, _ := TestOf[udp.Kind](sc)
	if !slices.Equal(tk.Streams, []int{2, 3}) || uk.Rate != "5G" {
		t.Errorf("inline with flags: %+v %+v", tk, uk)
	}
	if _, ok := TestOf[restart.Kind](sc); ok {
		t.Errorf("inline has a restart test now: %v", sc.TestNames())
	}
	tk, _ = TestOf[tcp.Kind](Scenarios["inline"])
	if uk, _ := TestOf[udp.Kind](Scenarios["inline"]); !slices.Equal(tk.Streams, []int{1}) || uk.Rate != "1G" {
		t.Errorf("the preset changed: %+v %+v", tk, uk)
	}
	if in := Scenarios["inline"]; in.SetFlags(parsed(t, "--events", "sigkill=2")) == nil {
		t.Error("inline took --events: it has no restart test")
	}
	rs := Scenarios["restart"]
	if err := rs.SetFlags(parsed(t, "--event-lead", "2s", "--events", "sigkill=2", "--load", "0.25")); err != nil {
		t.Fatal(err)
	}
	if r, _ := TestOf[restart.Kind](rs); r.Lead != 2*time.Second || r.Tail != time.Second || len(r.Events) != 1 || r.Events[0] != (EventCount{EventSIGKILL, 2}) || rs.Load != 0.25 {
		t.Errorf("restart with flags: %+v", r)
	}
	q := Scenarios["quick"]
	if err := q.SetFlags(parsed(t, "--cpus", "2")); err == nil || !strings.Contains(err.Error(), "--cpus is for the cores scenario, not quick") {
		t.Errorf("quick --cpus 2: %v", err)
	}
	// --window gives way to a short --duration given alone (the soak's
	// rows set the duration first), and is refused above one given with it.
	for _, c := range []struct {
		args []string
		want time.Duration
		err  string
	}{
		{[]string{"--duration", "30s"}, 0, ""},
		{[]string{"--duration", "3m"}, time.Minute, ""},
		{[]string{"--duration", "3m", "--window", "30s"}, 30 * time.Second, ""},
		{[]string{"--duration", "1m", "--window", "2m"}, 0, "--window 2m0s: above 0, at most the duration (1m0s)"},
	} {
		sk := Scenarios["soak"]
		err := sk.SetFlags(parsed(t, c.args...))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("soak %v: %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if k, _ := TestOf[soak.Kind](sk); err != nil || k.Window != c.want {
			t.Errorf("soak %v: window %v, %v; want %v", c.args, k.Window, err, c.want)
		}
	}
	if k, _ := TestOf[soak.Kind](Scenarios["soak"]); k.Window != time.Minute {
		t.Errorf("the soak preset's window is now %v", k.Window)
	}
}
