// Package throughput is the lab's the throughput kind: RFC 2544 26.1.
package throughput

import (
	"context"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, "") }

// Kind is RFC 2544's throughput (26.1): the search for the NDR
// and the PDR at each frame size in turn, with the profile and the span
// host's share where asked, on the straight path too (the baseline of its
// ratios). methods.go has its trials.
type Kind struct{}

func (Kind) Name() string { return lab.TestThroughput }

func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.PerSize, Direct: true} }

func (Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	tm := s.Timing
	per := 3*lab.TrialTime(tm) + tm.Search.Confirm
	if tm.Search.HasPDR() {
		per += tm.Search.Confirm // the PDR's confirmation, above the NDR's
	}
	return time.Duration(len(s.Sizes)) * per
}

func (Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	rig, tm, z := u.Rig, u.S.Timing, u.Size
	size := z.Size
	n := 0
	sr, trials, err := rig.Throughput(ctx, size, tm, u.Flows, func(st lab.SearchTrial) {
		n++
		u.Status(fmt.Sprintf("throughput %s, trial %d: %s offered, loss %.3f%%", size.Label(), n, lab.PPSText(st.Offered), 100*st.Loss))
	})
	if err != nil {
		return err
	}
	r := lab.ResultOfSearch(u.Base, lab.TestThroughput, string(size), sr, trials)
	if len(trials) > 0 {
		r.CPU = trials[len(trials)-1].CPU
		z.Unpaced = trials[0].Offered
	}
	if u.Profile {
		u.Status(fmt.Sprintf("profile %s: a trial without and one with BPF run-time statistics", size.Label()))
		p, err := rig.Profile(ctx, size, tm.Search.Confirm, tm)
		if err != nil {
			return err
		}
		r.Profile = &p
	}
	u.Add(r)
	z.Search, z.Throughput = &sr, sr.Throughput
	u.Throughputs[size] = sr.Throughput
	if rig.T.Mirror != nil && sr.Throughput > 0 {
		// The passing confirmation is the last trial: the rate found.
		u.Add(lab.SpanResult(u.Base, size, trials[len(trials)-1]))
	}
	return nil
}
