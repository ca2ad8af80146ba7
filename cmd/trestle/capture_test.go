package main

import (
	"testing"

	"github.com/trestle/trestle/internal/ctl"
)

// What `trestle capture` prints of a dropped frame: its reason, said
// beyond a patch port where a bridge there dropped it; a reason past the
// names (a daemon of an earlier release, which sent none for such drops)
// says only where.
func TestVerdictOfDrops(t *testing.T) {
	h := ctl.CaptureHeader{Reasons: []string{"runt", "hairpin"}}
	for _, c := range []struct {
		r    ctl.CaptureRecord
		want string
	}{
		{ctl.CaptureRecord{Verdict: ctl.VerdictDropped, Reason: 1}, "dropped (hairpin)"},
		{ctl.CaptureRecord{Verdict: ctl.VerdictDropped, Reason: 1, Beyond: true}, "dropped (hairpin, in a bridge beyond a patch port)"},
		{ctl.CaptureRecord{Verdict: ctl.VerdictDropped, Reason: 2}, "dropped (in a bridge beyond a patch port)"},
	} {
		if got := verdictOf(&c.r, h); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}
