package lab

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Outcome is what one trial of a search saw.
type Outcome struct {
	Requested float64 `json:"requested_pps"` // 0: as fast as the generator goes
	Offered   float64 `json:"offered_pps"`   // what the generator achieved
	Loss      float64 `json:"loss_ratio"`    // frames lost over frames offered
}

// TrialFunc runs one trial at rate (frames a second; 0: unpaced) for d.
type TrialFunc func(ctx context.Context, rate float64, d time.Duration) (Outcome, error)

// SearchConfig is RFC 2544's throughput search (section 26.1): the highest
// rate at which the DUT loses no more than LossGoal of the frames offered.
type SearchConfig struct {
	LossGoal   float64       // loss ratio a trial may have and pass; RFC 2544: 0
	Resolution float64       // stop when the bounds are within this fraction of the upper one
	Trial      time.Duration // length of a search trial
	Confirm    time.Duration // length of the confirmation trial at the result
	MaxTrials  int           // search trials at most (the confirmation not counted)
	// Shortfall is how far below the requested rate the generator may fall
	// and the trial still count as offered at that rate; further below,
	// the path could not take the load (with the generator and the DUT on
	// one core, that is how overload shows, instead of loss).
	Shortfall float64
}

// DefaultSearch is what the lab uses unless told otherwise.
var DefaultSearch = SearchConfig{LossGoal: 0, Resolution: 0.01, Trial: 2 * time.Second, Confirm: 10 * time.Second, MaxTrials: 20, Shortfall: 0.02}

// SearchResult is the found throughput and every trial on the way.
type SearchResult struct {
	Throughput float64       `json:"throughput_pps"` // offered rate of the passing confirmation; 0 if none passed
	Trials     []SearchTrial `json:"trials"`
	Note       string        `json:"note,omitempty"`
	Config     SearchConfig  `json:"config"`
}

// SearchTrial is one trial of a search.
type SearchTrial struct {
	Outcome
	Seconds float64 `json:"seconds"`
	Pass    bool    `json:"pass"`
	Confirm bool    `json:"confirm,omitempty"`
}

func (c SearchConfig) pass(o Outcome) bool {
	if o.Loss > c.LossGoal {
		return false
	}
	return o.Requested == 0 || o.Offered >= o.Requested*(1-c.Shortfall)
}

// Search finds the throughput. It first offers as much as the generator can
// send: if nothing is lost, that is the result, to be confirmed. Otherwise it
// bisects between 0 and that rate (the first guess is the rate that got
// through), to cfg.Resolution; then it confirms the highest passing rate
// with a trial of cfg.Confirm, stepping down by the resolution up to three
// times if the confirmation fails.
func Search(ctx context.Context, cfg SearchConfig, trial TrialFunc, progress func(SearchTrial)) (SearchResult, error) {
	res := SearchResult{Config: cfg}
	if cfg.Resolution <= 0 || cfg.Resolution >= 1 {
		return res, fmt.Errorf("search resolution %v: must be between 0 and 1", cfg.Resolution)
	}
	run := func(rate float64, d time.Duration, confirm bool) (SearchTrial, error) {
		o, err := trial(ctx, rate, d)
		if err != nil {
			return SearchTrial{}, err
		}
		st := SearchTrial{Outcome: o, Seconds: d.Seconds(), Pass: cfg.pass(o), Confirm: confirm}
		res.Trials = append(res.Trials, st)
		if progress != nil {
			progress(st)
		}
		return st, nil
	}

	first, err := run(0, cfg.Trial, false)
	if err != nil {
		return res, err
	}
	if first.Offered <= 0 {
		return res, errors.New("search: the generator sent nothing")
	}
	var best float64 // highest passing requested rate; 0: unpaced passed
	unpacedPassed := first.Pass
	if !unpacedPassed {
		lo, hi := 0.0, first.Offered
		guess := first.Offered * (1 - first.Loss)
		for n := 1; n < cfg.MaxTrials && hi-lo > cfg.Resolution*hi; n++ {
			rate := (lo + hi) / 2
			if n == 1 && guess > lo && guess < hi {
				rate = guess
			}
			st, err := run(rate, cfg.Trial, false)
			if err != nil {
				return res, err
			}
			if st.Pass {
				lo = rate
			} else {
				hi = rate
			}
		}
		if lo == 0 {
			res.Note = fmt.Sprintf("no rate passed down to %.0f pps", hi)
			return res, nil
		}
		best = lo
	}
	// Confirm, stepping down when a full-length trial loses what short ones
	// did not (a DUT that drops a few frames now and then).
	var lastFail SearchTrial
	for i, f := range confirmSteps {
		rate := best * f
		if unpacedPassed {
			rate = first.Offered * f
			if i == 0 {
				rate = 0
			}
		}
		st, err := run(rate, cfg.Confirm, true)
		if err != nil {
			return res, err
		}
		if st.Pass {
			res.Throughput = st.Offered
			switch {
			case unpacedPassed && i == 0:
				res.Note = "no loss at the generator's full rate: the result is what the path took, not a loss limit"
			case i > 0:
				res.Note = fmt.Sprintf("confirmed %.0f%% below the search's result: the full-length trials lost more", 100*(1-f))
			}
			return res, nil
		}
		lastFail = st
	}
	res.Note = fmt.Sprintf("no rate held for the %v confirmation: at %.0f pps, %.0f%% below the search's result, it still lost %.4f%%",
		cfg.Confirm, lastFail.Offered, 100*(1-confirmSteps[len(confirmSteps)-1]), 100*lastFail.Loss)
	return res, nil
}

// confirmSteps are the fractions of the search's result that confirmation
// tries in turn.
var confirmSteps = []float64{1, 0.99, 0.97, 0.93, 0.85, 0.7, 0.5}
