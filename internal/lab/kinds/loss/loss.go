// Package loss is the lab's the frame loss kind: RFC 2544 26.3.
package loss

import (
	"context"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestLatency) }

// Kind is RFC 2544's frame loss curve (26.3), at each frame size in
// turn, on the straight path too.
type Kind struct{}

func (Kind) Name() string { return lab.TestLoss }

func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.PerSize, Direct: true} }

func (Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	return time.Duration(len(s.Sizes)) * 5 * lab.TrialTime(s.Timing)
}

func (Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	z := u.Size
	size := z.Size
	maxRate := z.Unpaced
	if maxRate == 0 {
		maxRate = z.Throughput * 1.5
	}
	u.Status(fmt.Sprintf("loss curve %s from %s", size.Label(), lab.PPSText(maxRate)))
	trials, err := u.Rig.LossCurve(ctx, size, maxRate, u.S.Timing.Search.Trial, u.S.Timing)
	if err != nil {
		return err
	}
	for _, tr := range trials {
		r := u.Base
		r.Test, r.Param, r.Value, r.Unit = lab.TestLoss, fmt.Sprintf("%s@%.0f%%", size, 100*tr.Requested/maxRate), 100*tr.LossRatio, "% lost"
		r.Trials, r.CPU = []lab.TrialResult{tr}, tr.CPU
		u.Add(r)
	}
	return nil
}
