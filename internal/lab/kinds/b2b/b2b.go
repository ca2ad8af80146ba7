// Package b2b is the lab's the back-to-back kind: RFC 2544 26.4.
package b2b

import (
	"context"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestLoss) }

// Kind is RFC 2544's back-to-back bursts (26.4), at each frame size in
// turn, on the straight path too.
type Kind struct{}

func (Kind) Name() string { return lab.TestB2B }

func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.PerSize, Direct: true} }

func (Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	tm := s.Timing
	return time.Duration(len(s.Sizes)) * 10 * (tm.Settle + tm.Drain + 500*time.Millisecond)
}

func (Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	z := u.Size
	size := z.Size
	maxBurst := uint64(max(z.Unpaced, z.Throughput) * 2) // two seconds at full rate
	if maxBurst < 1000 {
		maxBurst = 1000
	}
	u.Status(fmt.Sprintf("back-to-back %s up to %d frames", size.Label(), maxBurst))
	n, trials, err := u.Rig.BackToBack(ctx, size, maxBurst, 3, u.S.Timing)
	if err != nil {
		return err
	}
	r := u.Base
	r.Test, r.Param, r.Value, r.Unit, r.Trials = lab.TestB2B, string(size), float64(n), "frames", trials
	if n == maxBurst {
		r.Note = "no loss at the longest burst tried"
	}
	u.Add(r)
	return nil
}
