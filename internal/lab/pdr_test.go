package lab

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// curveDUT loses loss(rate, d) of what it is offered: a deterministic loss
// curve, which may depend on the trial's length and on the trial's number
// (noise that a search must survive). The generator offers what it is
// asked, genMax unpaced.
type curveDUT struct {
	genMax float64
	loss   func(rate float64, d time.Duration, n int) float64
	n      int
}

func (c *curveDUT) trial(_ context.Context, rate float64, d time.Duration) (Outcome, error) {
	c.n++
	offered := rate
	if rate == 0 {
		offered = c.genMax
	}
	return Outcome{Requested: rate, Offered: offered, Loss: c.loss(offered, d, c.n)}, nil
}

// leaky loses nothing up to 1 Mpps, 0.1% to 0.4% from there to 1.2 Mpps
// (a DUT that drops a little before it saturates), and the excess above:
// its NDR is 1 Mpps and its PDR (0.5%) about 1.2012 Mpps.
func leaky(r float64, _ time.Duration, _ int) float64 {
	switch {
	case r <= 1e6:
		return 0
	case r <= 1.2e6:
		return 0.001 + 0.003*(r-1e6)/0.2e6
	}
	return 0.004 + (r-1.2e6)/r
}

const leakyPDR = 1.2e6 / 0.999

// checkSearch checks what every search result must be: each rate is the
// offered rate of a full-length confirmation that passed its goal, and the
// PDR is at least the NDR.
func checkSearch(t *testing.T, cfg SearchConfig, res SearchResult) {
	t.Helper()
	found := map[string]bool{}
	for _, tr := range res.Trials {
		if tr.Pass != cfg.pass(tr.Outcome) || tr.PDRPass != (cfg.HasPDR() && cfg.passAt(tr.Outcome, cfg.PDRLoss)) {
			t.Errorf("trial %+v: pass flags do not match its loss", tr)
		}
		if tr.Confirm && tr.Seconds != cfg.Confirm.Seconds() || !tr.Confirm && tr.Seconds != cfg.Trial.Seconds() {
			t.Errorf("trial %+v: %v long", tr, tr.Seconds)
		}
		if tr.Confirm && tr.Pass && tr.Offered == res.Throughput {
			found["ndr"] = true
		}
		if tr.Confirm && tr.PDRPass && tr.Offered == res.PDR {
			found["pdr"] = true
		}
		if tr.Confirm && tr.Pass && tr.Offered > res.Throughput || tr.Confirm && tr.PDRPass && tr.Offered > res.PDR {
			t.Errorf("a confirmation passed at %.0f pps, above the result (NDR %.0f, PDR %.0f)", tr.Offered, res.Throughput, res.PDR)
		}
	}
	if res.Throughput > 0 && !found["ndr"] {
		t.Errorf("NDR %.0f is no passing confirmation's rate", res.Throughput)
	}
	if cfg.HasPDR() && res.PDR > 0 && !found["pdr"] {
		t.Errorf("PDR %.0f is no passing confirmation's rate", res.PDR)
	}
	if cfg.HasPDR() && res.PDR < res.Throughput {
		t.Errorf("PDR %.0f below the NDR %.0f", res.PDR, res.Throughput)
	}
	if !cfg.HasPDR() && (res.PDR != 0 || res.PDRNote != "") {
		t.Errorf("no PDR asked for, got %.0f (%q)", res.PDR, res.PDRNote)
	}
}

func within(got, want, res float64) bool {
	return got <= want*(1+1e-9) && got >= want*(1-2*res)
}

// TestSearchNDRAndPDR: one search finds both rates of a DUT that loses a
// little before it saturates, in fewer trials than two searches would.
func TestSearchNDRAndPDR(t *testing.T) {
	cfg := DefaultSearch
	d := curveDUT{genMax: 7e6, loss: leaky}
	res, err := Search(context.Background(), cfg, d.trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSearch(t, cfg, res)
	if !within(res.Throughput, 1e6, cfg.Resolution) {
		t.Errorf("NDR %.0f, want 1000000 within %.0f%%", res.Throughput, 200*cfg.Resolution)
	}
	if !within(res.PDR, leakyPDR, cfg.Resolution) {
		t.Errorf("PDR %.0f, want %.0f within %.0f%%", res.PDR, leakyPDR, 200*cfg.Resolution)
	}
	both := d.n

	// The same two rates searched apart.
	apart := 0
	for _, c := range []SearchConfig{{LossGoal: 0}, {LossGoal: cfg.PDRLoss}} {
		one := cfg
		one.LossGoal, one.PDRLoss = c.LossGoal, 0
		d := curveDUT{genMax: 7e6, loss: leaky}
		r, err := Search(context.Background(), one, d.trial, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkSearch(t, one, r)
		apart += d.n
	}
	if both >= apart {
		t.Errorf("one search for both took %d trials, two apart %d: the trials are not shared", both, apart)
	}
	t.Logf("NDR %.0f, PDR %.0f in %d trials (apart: %d); %q %q", res.Throughput, res.PDR, both, apart, res.Note, res.PDRNote)
}

// TestSearchPDRSharesConfirmation: a path that loses nothing even at the
// generator's full rate (the shared placement's backpressure) has one
// confirmation, for both rates, and says why.
func TestSearchPDRSharesConfirmation(t *testing.T) {
	cfg := DefaultSearch
	d := simDUT{thr: 2.2e6, genMax: 7e6, backpressure: true}
	res, err := Search(context.Background(), cfg, d.trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSearch(t, cfg, res)
	confirms := 0
	for _, tr := range res.Trials {
		if tr.Confirm {
			confirms++
		}
	}
	if confirms != 1 || res.PDR != res.Throughput || res.Throughput != 2.2e6 {
		t.Errorf("%d confirmations, NDR %.0f, PDR %.0f: want one, both 2200000", confirms, res.Throughput, res.PDR)
	}
	if res.Note == "" || res.PDRNote == "" {
		t.Errorf("notes %q %q: both should say the generator's full rate passed", res.Note, res.PDRNote)
	}
}

// TestSearchPDRWithoutNDR: a DUT that loses 0.1% at every rate has no NDR
// and a PDR: the generator's full rate.
func TestSearchPDRWithoutNDR(t *testing.T) {
	cfg := DefaultSearch
	d := curveDUT{genMax: 3e6, loss: func(float64, time.Duration, int) float64 { return 0.001 }}
	res, err := Search(context.Background(), cfg, d.trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSearch(t, cfg, res)
	if res.Throughput != 0 || res.Note == "" {
		t.Errorf("NDR %.0f (%q): want none, with a note", res.Throughput, res.Note)
	}
	if res.PDR != 3e6 {
		t.Errorf("PDR %.0f, want the generator's 3000000", res.PDR)
	}
}

// TestSearchPDRConfirmStepsDown: full-length trials lose more than short
// ones at the PDR's rate; the PDR steps down, the NDR is confirmed apart.
func TestSearchPDRConfirmStepsDown(t *testing.T) {
	cfg := DefaultSearch
	d := curveDUT{genMax: 7e6, loss: func(r float64, dur time.Duration, n int) float64 {
		l := leaky(r, dur, n)
		if dur > cfg.Trial && r > 1.1e6 {
			l += 0.002 // long trials at the top lose 0.2% more
		}
		return l
	}}
	res, err := Search(context.Background(), cfg, d.trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSearch(t, cfg, res)
	if res.PDR >= leakyPDR*0.995 || res.PDR < 1e6 {
		t.Errorf("PDR %.0f: want stepped down below %.0f", res.PDR, leakyPDR)
	}
	if !within(res.Throughput, 1e6, cfg.Resolution) {
		t.Errorf("NDR %.0f, want 1000000", res.Throughput)
	}
	t.Logf("NDR %.0f (%s), PDR %.0f (%s)", res.Throughput, res.Note, res.PDR, res.PDRNote)
}

// TestSearchNoisy: losses that come and go (a shared machine's), and a
// loss curve that is not monotonic: whatever the search finds holds the
// invariants, and with noise only in short trials, it still finds rates
// near the true ones.
func TestSearchNoisy(t *testing.T) {
	cfg := DefaultSearch
	for _, c := range []struct {
		name     string
		loss     func(float64, time.Duration, int) float64
		ndr, pdr float64 // 0: only the invariants
	}{
		{"every third short trial loses 0.2%", func(r float64, d time.Duration, n int) float64 {
			l := leaky(r, d, n)
			if d <= cfg.Trial && n%3 == 0 {
				l += 0.002
			}
			return l
		}, 0, 0},
		{"a dip at 400-500 kpps", func(r float64, d time.Duration, n int) float64 {
			if r >= 4e5 && r <= 5e5 {
				return 0.01
			}
			return leaky(r, d, n)
		}, 0, 0},
		{"every fifth trial of any length loses 1%", func(r float64, d time.Duration, n int) float64 {
			l := leaky(r, d, n)
			if n%5 == 0 {
				l += 0.01
			}
			return l
		}, 0, 0},
		{"a pseudo-random jitter of up to 0.05% above 900 kpps", func(r float64, d time.Duration, n int) float64 {
			l := leaky(r, d, n)
			if r > 9e5 {
				l += 0.0005 * math.Abs(math.Sin(float64(n)*12.9898))
			}
			return l
		}, 9e5, leakyPDR},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := curveDUT{genMax: 7e6, loss: c.loss}
			res, err := Search(context.Background(), cfg, d.trial, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkSearch(t, cfg, res)
			if d.n > cfg.MaxTrials+2*len(confirmSteps) {
				t.Errorf("%d trials", d.n)
			}
			if c.ndr > 0 && !within(res.Throughput, c.ndr, 0.05) {
				t.Errorf("NDR %.0f, want about %.0f", res.Throughput, c.ndr)
			}
			if c.pdr > 0 && !within(res.PDR, c.pdr, 0.05) {
				t.Errorf("PDR %.0f, want about %.0f", res.PDR, c.pdr)
			}
			t.Logf("NDR %.0f (%s), PDR %.0f (%s), %d trials", res.Throughput, res.Note, res.PDR, res.PDRNote, d.n)
		})
	}
}

// TestSearchPDROff: a PDR goal at or below the NDR's looks for no PDR.
func TestSearchPDROff(t *testing.T) {
	for _, pdr := range []float64{0, 0.01} {
		cfg := DefaultSearch
		cfg.LossGoal, cfg.PDRLoss = 0.01, pdr
		d := curveDUT{genMax: 7e6, loss: leaky}
		res, err := Search(context.Background(), cfg, d.trial, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkSearch(t, cfg, res)
		for _, tr := range res.Trials {
			if tr.PDRPass {
				t.Errorf("PDR goal %v: a trial passed a PDR not asked for", pdr)
			}
		}
	}
}

// TestSearchNDRFromPDRConfirmation: short trials that all lose (a DUT
// that drops its first frames), and a full-length confirmation of the PDR
// that loses nothing: that confirmation is the NDR too, and the note says
// how it was found.
func TestSearchNDRFromPDRConfirmation(t *testing.T) {
	cfg := DefaultSearch
	d := curveDUT{genMax: 2e6, loss: func(r float64, dur time.Duration, _ int) float64 {
		if dur <= cfg.Trial {
			return 0.001
		}
		return 0
	}}
	res, err := Search(context.Background(), cfg, d.trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSearch(t, cfg, res)
	if res.Throughput != 2e6 || res.PDR != 2e6 || !strings.Contains(res.Note, "confirmation of the PDR") {
		t.Errorf("NDR %.0f (%q), PDR %.0f: want both 2000000 from the PDR's confirmation", res.Throughput, res.Note, res.PDR)
	}
}

// TestSearchPDRFromNDRConfirmation: the PDR's own confirmations all fail
// (long trials at high rates lose a lot), one of the NDR's holds the PDR's
// goal: that is the PDR, and its note says so.
func TestSearchPDRFromNDRConfirmation(t *testing.T) {
	cfg := DefaultSearch
	d := curveDUT{genMax: 7e6, loss: func(r float64, dur time.Duration, n int) float64 {
		if dur > cfg.Trial && r > 5.5e5 {
			return 0.02
		}
		return leaky(r, dur, n)
	}}
	res, err := Search(context.Background(), cfg, d.trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSearch(t, cfg, res)
	if res.PDR <= 0 || res.PDR > 5.5e5 || !strings.Contains(res.PDRNote, "a confirmation of the other rate") {
		t.Errorf("PDR %.0f (%q): want the NDR's confirmation, under 550000, said so", res.PDR, res.PDRNote)
	}
	t.Logf("NDR %.0f (%s), PDR %.0f (%s)", res.Throughput, res.Note, res.PDR, res.PDRNote)
}
