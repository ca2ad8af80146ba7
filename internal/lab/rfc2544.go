package lab

import (
	"context"
	"fmt"
	"time"
)

// The RFC 2544 kinds' names, their results' Test.
const (
	TestThroughput = "throughput"   // RFC 2544 26.1, from h1 to h2
	TestLatency    = "latency"      // RFC 2544 26.2, at fractions of the throughput
	TestLoss       = "loss"         // RFC 2544 26.3, the frame loss curve
	TestB2B        = "back-to-back" // RFC 2544 26.4
)

// The RFC 2544 kinds, at each frame size in turn: throughput (26.1, the
// search for the NDR and the PDR, with the profile and the span host's
// share where asked), latency (26.2, at fractions of the throughput), the
// frame loss curve (26.3) and back-to-back bursts (26.4), each on the
// straight path too (the baseline of their ratios). methods.go has their
// trials.
type (
	ThroughputTest struct{}
	// LatencyTest: at each of Fractions of the throughput.
	LatencyTest struct{ Fractions []float64 }
	LossTest    struct{}
	B2BTest     struct{}
)

func (ThroughputTest) Name() string { return TestThroughput }
func (LatencyTest) Name() string    { return TestLatency }
func (LossTest) Name() string       { return TestLoss }
func (B2BTest) Name() string        { return TestB2B }

func (ThroughputTest) Needs(Scenario) Needs { return Needs{Phase: PerSize, Direct: true} }
func (LatencyTest) Needs(Scenario) Needs    { return Needs{Phase: PerSize, Direct: true} }
func (LossTest) Needs(Scenario) Needs       { return Needs{Phase: PerSize, Direct: true} }
func (B2BTest) Needs(Scenario) Needs        { return Needs{Phase: PerSize, Direct: true} }

// trialTime is a search trial with its settling and draining.
func trialTime(tm Timing) time.Duration { return tm.Search.Trial + tm.Settle + tm.Drain }

func (ThroughputTest) Estimate(s Scenario, _ Spec) time.Duration {
	tm := s.Timing
	per := 3*trialTime(tm) + tm.Search.Confirm
	if tm.Search.HasPDR() {
		per += tm.Search.Confirm // the PDR's confirmation, above the NDR's
	}
	return time.Duration(len(s.Sizes)) * per
}

func (k LatencyTest) Estimate(s Scenario, _ Spec) time.Duration {
	return time.Duration(len(s.Sizes)*len(k.Fractions)) * trialTime(s.Timing)
}

func (LossTest) Estimate(s Scenario, _ Spec) time.Duration {
	return time.Duration(len(s.Sizes)) * 5 * trialTime(s.Timing)
}

func (B2BTest) Estimate(s Scenario, _ Spec) time.Duration {
	tm := s.Timing
	return time.Duration(len(s.Sizes)) * 10 * (tm.Settle + tm.Drain + 500*time.Millisecond)
}

func (ThroughputTest) Run(ctx context.Context, u *UnitRun) error {
	rig, tm, z := u.Rig, u.S.Timing, u.Size
	size := z.Size
	n := 0
	sr, trials, err := rig.Throughput(ctx, size, tm, u.Flows, func(st SearchTrial) {
		n++
		u.Status(fmt.Sprintf("throughput %s, trial %d: %s offered, loss %.3f%%", size.Label(), n, pps(st.Offered), 100*st.Loss))
	})
	if err != nil {
		return err
	}
	r := searchResult(u.Base, TestThroughput, string(size), sr, trials)
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
		u.Add(spanResult(u.Base, size, trials[len(trials)-1]))
	}
	return nil
}

func (k LatencyTest) Run(ctx context.Context, u *UnitRun) error {
	s, z := u.S, u.Size
	size, tput := z.Size, z.Throughput
	if tput <= 0 {
		return nil
	}
	u.Status(fmt.Sprintf("latency %s at %v of %s", size.Label(), k.Fractions, pps(tput)))
	trials, err := u.Rig.StreamsAt(ctx, size, u.Flows, tput, k.Fractions, s.Timing.Search.Trial, s.Timing)
	if err != nil {
		return err
	}
	for i, tr := range trials {
		r := u.Base
		r.Test, r.Param, r.Unit = TestLatency, fmt.Sprintf("%s@%.0f%%", size, 100*k.Fractions[i]), "ns"
		r.Trials, r.CPU = []TrialResult{tr}, tr.CPU
		if tr.Latency != nil {
			r.Value, r.Latency = float64(tr.Latency.P50), tr.Latency
		}
		r.Note = joinNotes(lostNote(tr), shortNote(tr, s.Timing.Search))
		u.Add(r)
	}
	return nil
}

func (LossTest) Run(ctx context.Context, u *UnitRun) error {
	z := u.Size
	size := z.Size
	maxRate := z.Unpaced
	if maxRate == 0 {
		maxRate = z.Throughput * 1.5
	}
	u.Status(fmt.Sprintf("loss curve %s from %s", size.Label(), pps(maxRate)))
	trials, err := u.Rig.LossCurve(ctx, size, maxRate, u.S.Timing.Search.Trial, u.S.Timing)
	if err != nil {
		return err
	}
	for _, tr := range trials {
		r := u.Base
		r.Test, r.Param, r.Value, r.Unit = TestLoss, fmt.Sprintf("%s@%.0f%%", size, 100*tr.Requested/maxRate), 100*tr.LossRatio, "% lost"
		r.Trials, r.CPU = []TrialResult{tr}, tr.CPU
		u.Add(r)
	}
	return nil
}

func (B2BTest) Run(ctx context.Context, u *UnitRun) error {
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
	r.Test, r.Param, r.Value, r.Unit, r.Trials = TestB2B, string(size), float64(n), "frames", trials
	if n == maxBurst {
		r.Note = "no loss at the longest burst tried"
	}
	u.Add(r)
	return nil
}
