// Package loadlatency is the lab's latency under load kind (CSIT's): a stream at shares of the PDR after each throughput search.
package loadlatency

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestThroughput) }

// Kind is CSIT's latency under load: after the throughput
// search at each frame size, a stream at each of Shares of the PDR
// (loadLatency). It runs where the throughput test ran.
type Kind struct {
	Shares []float64 // of the PDR
}

func (Kind) Name() string                 { return lab.TestLoadLatency }
func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.PerSize} }

func (k Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	tm := s.Timing
	return time.Duration(len(s.Sizes)*len(k.Shares)) * (tm.Search.Confirm + tm.Settle + tm.Drain)
}

func (k Kind) Prepare(s lab.Scenario) ([]string, error) {
	return []string{loadLatencyNote(s, k.Shares)}, nil
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
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
func loadLatency(ctx context.Context, s lab.Scenario, shares []float64, rig *lab.Rig, size lab.FrameSize, sr lab.SearchResult, base lab.Result, add func(lab.Result), status func(string)) error {
	ref, what := sr.PDR, "PDR"
	if !sr.Config.HasPDR() {
		ref, what = sr.Throughput, "NDR"
	}
	var trials []lab.TrialResult
	if ref > 0 {
		status(fmt.Sprintf("latency under load %s at %s of the %s, %s", size.Label(), sharesText(shares), what, lab.PPSText(ref)))
		var err error
		if trials, err = rig.StreamsAt(ctx, size, max(s.Flows, 1), ref, shares, s.Timing.Search.Confirm, s.Timing); err != nil {
			return err
		}
	}
	for i, share := range shares {
		r := base
		r.Test, r.Param, r.Unit = lab.TestLoadLatency, fmt.Sprintf("%s@%.0f%%", size, 100*share), "ns"
		r.Note = fmt.Sprintf("%.0f%% of the %s, %s", 100*share, what, lab.PPSText(ref))
		if i >= len(trials) {
			r.Error = fmt.Sprintf("no %s at %s to take %.0f%% of", what, size.Label(), 100*share)
			add(r)
			continue
		}
		tr := trials[i]
		r.Trials, r.CPU = []lab.TrialResult{tr}, tr.CPU
		if tr.Latency != nil {
			r.Value, r.Latency = float64(tr.Latency.P50), tr.Latency
		} else {
			r.Error = "the sink timed no frame"
		}
		r.Note = lab.JoinNotes(r.Note, lab.LostNote(tr), lab.ShortNote(tr, s.Timing.Search))
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
func loadLatencyNote(s lab.Scenario, shares []float64) string {
	return fmt.Sprintf("latency under load (CSIT): after each throughput search, a stream of the search's own frames for %v (a confirmation's length) at %s of the PDR just found "+
		"(of the NDR when no PDR was looked for); the sink times 1 frame in 64 of each flow, as in every search trial and the soak, against the generator's clock reading stamped in it "+
		"(one-way; the sink's histogram has buckets 6.25%% wide, a percentile is its bucket's midpoint, the max its top bucket's upper end); "+
		"p50, p90, p99, p99.9 and max of each stream, and how many frames were timed", s.Timing.Search.Confirm, sharesText(shares))
}
