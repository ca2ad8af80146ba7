package lab

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// simDUT loses nothing up to its threshold and the excess above it, the
// way a DUT that forwards at most thr frames a second does; the generator
// offers what it is asked, up to genMax unpaced.
type simDUT struct {
	thr, genMax float64
	// backpressure: above thr the generator cannot offer more than thr
	// (one core shared), and nothing is lost.
	backpressure bool
	trials       int
	durations    []time.Duration
}

func (s *simDUT) trial(_ context.Context, rate float64, d time.Duration) (Outcome, error) {
	s.trials++
	s.durations = append(s.durations, d)
	offered := rate
	if rate == 0 {
		offered = s.genMax
	}
	if s.backpressure {
		return Outcome{Requested: rate, Offered: math.Min(offered, s.thr)}, nil
	}
	loss := 0.0
	if offered > s.thr {
		loss = (offered - s.thr) / offered
	}
	return Outcome{Requested: rate, Offered: offered, Loss: loss}, nil
}

func TestSearchFindsThreshold(t *testing.T) {
	cfg := DefaultSearch
	for _, c := range []struct {
		name string
		dut  simDUT
		want float64
	}{
		{"loss above 1.3 Mpps", simDUT{thr: 1.3e6, genMax: 7e6}, 1.3e6},
		{"loss above 3.7 Mpps", simDUT{thr: 3.7e6, genMax: 7e6}, 3.7e6},
		{"threshold near the top", simDUT{thr: 6.9e6, genMax: 7e6}, 6.9e6},
		{"slow DUT", simDUT{thr: 12e3, genMax: 7e6}, 12e3},
		{"the generator is the limit", simDUT{thr: 9e6, genMax: 7e6}, 7e6},
		{"backpressure, no loss", simDUT{thr: 2.2e6, genMax: 7e6, backpressure: true}, 2.2e6},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.dut
			res, err := Search(context.Background(), cfg, d.trial, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The result passed, so it is at most the threshold, and the
			// search stops within the resolution of it.
			if res.Throughput > c.want*(1+1e-9) || res.Throughput < c.want*(1-2*cfg.Resolution) {
				t.Errorf("throughput %.0f, want %.0f within %.0f%%", res.Throughput, c.want, 200*cfg.Resolution)
			}
			last := res.Trials[len(res.Trials)-1]
			if !last.Confirm || !last.Pass || d.durations[len(d.durations)-1] != cfg.Confirm {
				t.Errorf("last trial %+v is not a passing confirmation of %v", last, cfg.Confirm)
			}
			if d.trials > cfg.MaxTrials+4 {
				t.Errorf("%d trials", d.trials)
			}
			t.Logf("%.0f pps in %d trials (%s)", res.Throughput, d.trials, res.Note)
		})
	}
}

func TestSearchLossGoal(t *testing.T) {
	// With a goal of 1% loss, the DUT passes up to thr/0.99.
	cfg := DefaultSearch
	cfg.LossGoal = 0.01
	d := simDUT{thr: 1e6, genMax: 7e6}
	res, err := Search(context.Background(), cfg, d.trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := 1e6 / 0.99
	if res.Throughput > want*(1+1e-9) || res.Throughput < want*(1-2*cfg.Resolution) {
		t.Errorf("throughput %.0f, want about %.0f", res.Throughput, want)
	}
}

// A confirmation that fails steps down.
func TestSearchConfirmStepsDown(t *testing.T) {
	cfg := DefaultSearch
	d := simDUT{thr: 1e6, genMax: 7e6}
	// Long trials lose more: the DUT holds 1 Mpps for 2s, 0.985 Mpps for 10s.
	trial := func(ctx context.Context, rate float64, dur time.Duration) (Outcome, error) {
		if dur > cfg.Trial {
			d.thr = 0.985e6
		} else {
			d.thr = 1e6
		}
		return d.trial(ctx, rate, dur)
	}
	res, err := Search(context.Background(), cfg, trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Throughput > 0.985e6 || res.Throughput < 0.95e6 {
		t.Errorf("throughput %.0f, want just under 985000", res.Throughput)
	}
	confirms := 0
	for _, tr := range res.Trials {
		if tr.Confirm {
			confirms++
		}
	}
	if confirms < 2 {
		t.Errorf("%d confirmation trials, want a failed one and a passing one", confirms)
	}
}

func TestSearchNothingPasses(t *testing.T) {
	trial := func(_ context.Context, rate float64, _ time.Duration) (Outcome, error) {
		o := rate
		if rate == 0 {
			o = 1e6
		}
		return Outcome{Requested: rate, Offered: o, Loss: 0.5}, nil
	}
	res, err := Search(context.Background(), DefaultSearch, trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Throughput != 0 || res.Note == "" {
		t.Errorf("throughput %v note %q, want 0 and a note", res.Throughput, res.Note)
	}
}

// TestSearchTinyLossNamed: full-length trials that lose a few frames of
// millions are said to have lost them (a share and a count), not "0.0000%".
func TestSearchTinyLossNamed(t *testing.T) {
	cfg := DefaultSearch
	trial := func(_ context.Context, rate float64, dur time.Duration) (Outcome, error) {
		o := Outcome{Requested: rate, Offered: rate}
		if rate == 0 {
			o.Offered = 1e6
		}
		if dur > cfg.Trial {
			o.Loss = 3 / (o.Offered * dur.Seconds()) // 3 frames a confirmation
		}
		return o, nil
	}
	res, err := Search(context.Background(), cfg, trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Throughput != 0 || !strings.Contains(res.Note, "about 3 frames") || strings.Contains(res.Note, "0.0000%") {
		t.Errorf("throughput %v, note %q; want 0, and the loss said as about 3 frames", res.Throughput, res.Note)
	}
}

// TestSplitPlacement: split never puts a sink on the generator's CPU (its
// paced loop keeps that CPU busy and the sink's NAPI thread starves there).
func TestSplitPlacement(t *testing.T) {
	p, err := ChoosePlacement("split")
	if err != nil {
		t.Skipf("this process may use one CPU: %v", err)
	}
	if p.SinkCPU == p.GenCPU || p.DUTCPU == p.GenCPU {
		t.Errorf("split placement %+v shares the generator's CPU", p)
	}
	s, err := ChoosePlacement("shared")
	if err != nil {
		t.Fatal(err)
	}
	if s.SinkCPU != s.GenCPU {
		t.Errorf("shared placement %+v: the sink must be on the generator's CPU", s)
	}
}

func TestSNMPField(t *testing.T) {
	text := "Ip: Forwarding DefaultTTL\nIp: 2 64\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 10 0 7 12 7 0\nUdpLite: InDatagrams RcvbufErrors\nUdpLite: 0 3\n"
	if v, err := snmpField(text, "Udp", "RcvbufErrors"); err != nil || v != 7 {
		t.Errorf("Udp RcvbufErrors = %d, %v; want 7", v, err)
	}
	if v, err := snmpField(text, "UdpLite", "RcvbufErrors"); err != nil || v != 3 {
		t.Errorf("UdpLite RcvbufErrors = %d, %v; want 3", v, err)
	}
	if _, err := snmpField(text, "Tcp", "RetransSegs"); err == nil {
		t.Error("a missing counter gave no error")
	}
}
