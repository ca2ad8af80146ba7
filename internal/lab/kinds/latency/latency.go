// Package latency is the lab's the latency kind: RFC 2544 26.2.
package latency

import (
	"context"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestLoadLatency) }

// Kind is RFC 2544's latency (26.2): at each of Fractions of the
// throughput, at each frame size in turn, on the straight path too.
type Kind struct{ Fractions []float64 }

func (Kind) Name() string { return lab.TestLatency }

func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.PerSize, Direct: true} }

func (k Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	return time.Duration(len(s.Sizes)*len(k.Fractions)) * lab.TrialTime(s.Timing)
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	s, z := u.S, u.Size
	size, tput := z.Size, z.Throughput
	if tput <= 0 {
		return nil
	}
	u.Status(fmt.Sprintf("latency %s at %v of %s", size.Label(), k.Fractions, lab.PPSText(tput)))
	trials, err := u.Rig.StreamsAt(ctx, size, u.Flows, tput, k.Fractions, s.Timing.Search.Trial, s.Timing)
	if err != nil {
		return err
	}
	for i, tr := range trials {
		r := u.Base
		r.Test, r.Param, r.Unit = lab.TestLatency, fmt.Sprintf("%s@%.0f%%", size, 100*k.Fractions[i]), "ns"
		r.Trials, r.CPU = []lab.TrialResult{tr}, tr.CPU
		if tr.Latency != nil {
			r.Value, r.Latency = float64(tr.Latency.P50), tr.Latency
		}
		r.Note = lab.JoinNotes(lab.LostNote(tr), lab.ShortNote(tr, s.Timing.Search))
		u.Add(r)
	}
	return nil
}
