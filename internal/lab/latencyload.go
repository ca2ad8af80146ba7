package lab

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// TestLoadLatency: after the throughput search, a stream at each of
// Shares of the PDR (CSIT's latency under load: 10, 50, 90%), 1 frame in
// 64 timed; p50, p90, p99, p99.9 and max.
const TestLoadLatency = "latency-load"

// LoadLatencyTest is CSIT's latency under load: after the throughput
// search at each frame size, a stream at each of Shares of the PDR
// (loadLatency). It runs where the throughput test ran.
type LoadLatencyTest struct {
	Shares []float64 // of the PDR
}

func (LoadLatencyTest) Name() string         { return TestLoadLatency }
func (LoadLatencyTest) Needs(Scenario) Needs { return Needs{Phase: PerSize} }

func (k LoadLatencyTest) Estimate(s Scenario, _ Spec) time.Duration {
	tm := s.Timing
	return time.Duration(len(s.Sizes)*len(k.Shares)) * (tm.Search.Confirm + tm.Settle + tm.Drain)
}

func (k LoadLatencyTest) Prepare(s Scenario) ([]string, error) {
	return []string{loadLatencyNote(s, k.Shares)}, nil
}

func (k LoadLatencyTest) Run(ctx context.Context, u *UnitRun) error {
	if u.Size.Search == nil {
		return nil // no throughput search at this size
	}
	return loadLatency(ctx, u.S, k.Shares, u.Rig, u.Size.Size, *u.Size.Search, u.Base, u.Add, u.Status)
}

// loadLatency is CSIT's latency under load: after the throughput search
// at size, a stream of the search's frames at each of shares of the
// PDR (of the NDR if the search looked for no PDR), for a confirmation's
// length, 1 frame in 64 timed by the sink (StreamsAt). Each stream is a
// Result whose Value is the p50 and whose Latency has the rest.
func loadLatency(ctx context.Context, s Scenario, shares []float64, rig *Rig, size FrameSize, sr SearchResult, base Result, add func(Result), status func(string)) error {
	ref, what := sr.PDR, "PDR"
	if !sr.Config.HasPDR() {
		ref, what = sr.Throughput, "NDR"
	}
	var trials []TrialResult
	if ref > 0 {
		status(fmt.Sprintf("latency under load %s at %s of the %s, %s", size.Label(), sharesText(shares), what, PPSText(ref)))
		var err error
		if trials, err = rig.StreamsAt(ctx, size, max(s.Flows, 1), ref, shares, s.Timing.Search.Confirm, s.Timing); err != nil {
			return err
		}
	}
	for i, share := range shares {
		r := base
		r.Test, r.Param, r.Unit = TestLoadLatency, fmt.Sprintf("%s@%.0f%%", size, 100*share), "ns"
		r.Note = fmt.Sprintf("%.0f%% of the %s, %s", 100*share, what, PPSText(ref))
		if i >= len(trials) {
			r.Error = fmt.Sprintf("no %s at %s to take %.0f%% of", what, size.Label(), 100*share)
			add(r)
			continue
		}
		tr := trials[i]
		r.Trials, r.CPU = []TrialResult{tr}, tr.CPU
		if tr.Latency != nil {
			r.Value, r.Latency = float64(tr.Latency.P50), tr.Latency
		} else {
			r.Error = "the sink timed no frame"
		}
		r.Note = JoinNotes(r.Note, LostNote(tr), ShortNote(tr, s.Timing.Search))
		add(r)
	}
	return nil
}

// sharesText is "10, 50 and 90%".
func sharesText(shares []float64) string {
	var parts []string
	for _, f := range shares {
		parts = append(parts, fmt.Sprintf("%.0f", 100*f))
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1] + "%"
	}
	return strings.Join(parts, "") + "%"
}

// loadLatencyNote says how the latency-load test measures, for the run's notes.
func loadLatencyNote(s Scenario, shares []float64) string {
	return fmt.Sprintf("latency under load (CSIT): after each throughput search, a stream of the search's own frames for %v (a confirmation's length) at %s of the PDR just found "+
		"(of the NDR when no PDR was looked for); the sink times 1 frame in 64 of each flow, as in every search trial and the soak, against the generator's clock reading stamped in it "+
		"(one-way; the sink's histogram has buckets 6.25%% wide, a percentile is its bucket's midpoint, the max its top bucket's upper end); "+
		"p50, p90, p99, p99.9 and max of each stream, and how many frames were timed", s.Timing.Search.Confirm, sharesText(shares))
}
