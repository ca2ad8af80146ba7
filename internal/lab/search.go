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
// rate at which the DUT loses no more than LossGoal of the frames offered
// (the NDR, non-drop rate); and, from the same trials, the highest at which
// it loses no more than PDRLoss (CSIT's PDR, partial drop rate).
type SearchConfig struct {
	LossGoal float64 // loss ratio a trial may have and pass for the NDR; RFC 2544: 0
	// PDRLoss is the loss ratio a trial may have and pass for the PDR
	// (CSIT: 0.005). At or below LossGoal (0 included): no PDR is looked for.
	PDRLoss    float64
	Resolution float64       // stop when the bounds are within this fraction of the upper one
	Trial      time.Duration // length of a search trial
	Confirm    time.Duration // length of the confirmation trial at the result
	MaxTrials  int           // search trials at most, for both rates (the confirmations not counted)
	// Shortfall is how far below the requested rate the generator may fall
	// and the trial still count as offered at that rate; further below,
	// the path could not take the load (with the generator and the DUT on
	// one core, that is how overload shows, instead of loss).
	Shortfall float64
}

// DefaultPDRLoss is CSIT's loss goal of the PDR: 0.5% of the frames.
const DefaultPDRLoss = 0.005

// DefaultSearch is what the lab uses unless told otherwise.
var DefaultSearch = SearchConfig{LossGoal: 0, PDRLoss: DefaultPDRLoss, Resolution: 0.01, Trial: 2 * time.Second, Confirm: 10 * time.Second, MaxTrials: 20, Shortfall: 0.02}

// HasPDR says whether the search looks for a PDR apart from the NDR.
func (c SearchConfig) HasPDR() bool { return c.PDRLoss > c.LossGoal }

// SearchResult is the found throughput and every trial on the way.
type SearchResult struct {
	Throughput float64       `json:"throughput_pps"` // the NDR: offered rate of the best passing confirmation; 0 if none passed
	Trials     []SearchTrial `json:"trials"`
	Note       string        `json:"note,omitempty"`
	Config     SearchConfig  `json:"config"`
	// PDR is the offered rate of the best confirmation that lost at most
	// Config.PDRLoss (0 if none did, or no PDR was looked for: see
	// Config.HasPDR); PDRNote says how it was found, as Note for the NDR.
	PDR     float64 `json:"pdr_pps,omitempty"`
	PDRNote string  `json:"pdr_note,omitempty"`
}

// SearchTrial is one trial of a search.
type SearchTrial struct {
	Outcome
	Seconds float64 `json:"seconds"`
	Pass    bool    `json:"pass"` // passed the NDR's goal
	PDRPass bool    `json:"pdr_pass,omitempty"`
	Confirm bool    `json:"confirm,omitempty"`
}

func (c SearchConfig) pass(o Outcome) bool { return c.passAt(o, c.LossGoal) }

func (c SearchConfig) passAt(o Outcome, goal float64) bool {
	return o.Loss <= goal && c.Held(o.Requested, o.Offered)
}

// Held says whether a generator asked for requested frames a second (0:
// as fast as it goes, always held) held the rate: offered at most
// Shortfall below it. The search's trials, the latency streams' notes and
// the report's "(of X asked)" all judge by it.
func (c SearchConfig) Held(requested, offered float64) bool {
	return requested <= 0 || offered >= requested*(1-c.Shortfall)
}

// searchGoal is one rate a search looks for, with its bracket: lo passed
// a search trial, hi failed one (unpaced: the generator's full rate passed).
type searchGoal struct {
	name    string // "NDR", "PDR"
	loss    float64
	lo, hi  float64
	unpaced bool
	result  float64
	note    string
	held    bool // one of its own confirmation steps passed
}

func (g *searchGoal) pass(st SearchTrial) bool {
	if g.name == "PDR" {
		return st.PDRPass
	}
	return st.Pass
}

// Search finds the NDR and, with cfg.PDRLoss above cfg.LossGoal, the PDR,
// the way CSIT's MLRsearch does: short trials bracket both rates, then
// trials of the full length confirm them. It first offers as much as the
// generator can send: a goal that trial passes has that as its result, to
// be confirmed. For the others it bisects between 0 and that rate (the
// first guess is the rate that got through), always the goal whose bracket
// is widest, to cfg.Resolution; every trial's loss narrows the bracket of
// each goal it falls in, so the two searches share their trials. Then it
// confirms the PDR (the higher rate) and the NDR, each with trials of
// cfg.Confirm, stepping down from its bracket's passing end when a
// confirmation fails (see confirmSteps). A confirmation counts for both
// goals: one that lost nothing at the PDR's rate is the NDR's too. Each
// result is the offered rate of the best confirmation that passed its
// goal, so the PDR is never below the NDR.
func Search(ctx context.Context, cfg SearchConfig, trial TrialFunc, progress func(SearchTrial)) (SearchResult, error) {
	res := SearchResult{Config: cfg}
	if cfg.Resolution <= 0 || cfg.Resolution >= 1 {
		return res, fmt.Errorf("search resolution %v: must be between 0 and 1", cfg.Resolution)
	}
	goals := []*searchGoal{{name: "NDR", loss: cfg.LossGoal}}
	if cfg.HasPDR() {
		goals = append(goals, &searchGoal{name: "PDR", loss: cfg.PDRLoss})
	}
	run := func(rate float64, d time.Duration, confirm bool) (SearchTrial, error) {
		o, err := trial(ctx, rate, d)
		if err != nil {
			return SearchTrial{}, err
		}
		st := SearchTrial{Outcome: o, Seconds: d.Seconds(), Pass: cfg.pass(o), PDRPass: cfg.HasPDR() && cfg.passAt(o, cfg.PDRLoss), Confirm: confirm}
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
	for _, g := range goals {
		if g.pass(first) {
			g.unpaced = true
		} else {
			g.hi = first.Offered
		}
	}
	open := func(g *searchGoal) bool { return !g.unpaced && g.hi-g.lo > cfg.Resolution*g.hi }
	guess := first.Offered * (1 - first.Loss)
	for n := 1; n < cfg.MaxTrials; n++ {
		// The widest bracket next; the PDR's on a tie (its trials are at
		// the higher rates, and a loss there bounds the NDR too).
		var next *searchGoal
		for _, g := range goals {
			if open(g) && (next == nil || (g.hi-g.lo)/g.hi >= (next.hi-next.lo)/next.hi) {
				next = g
			}
		}
		if next == nil {
			break
		}
		rate := (next.lo + next.hi) / 2
		if n == 1 && guess > next.lo && guess < next.hi {
			rate = guess
		}
		st, err := run(rate, cfg.Trial, false)
		if err != nil {
			return res, err
		}
		// A trial narrows every bracket it falls in. One outside a
		// bracket (a pass above a failure: a noisy DUT) leaves it.
		for _, g := range goals {
			if g.unpaced || rate <= g.lo || rate >= g.hi {
				continue
			}
			if g.pass(st) {
				g.lo = rate
			} else {
				g.hi = rate
			}
		}
	}

	// Confirm, the PDR first, stepping down when a full-length trial
	// loses what short ones did not (a DUT that drops a few frames now
	// and then). Every confirmation counts for both goals.
	var confirms []SearchTrial
	for i := len(goals) - 1; i >= 0; i-- {
		g := goals[i]
		if !g.unpaced && g.lo == 0 {
			g.note = fmt.Sprintf("no rate passed down to %.0f pps", g.hi)
			continue
		}
		var lastFail SearchTrial
		for k, f := range confirmSteps {
			rate := g.lo * f
			if g.unpaced {
				rate = first.Offered * f
				if k == 0 {
					rate = 0
				}
			}
			st, ok := reuse(confirms, rate, g.pass)
			if !ok {
				if st, err = run(rate, cfg.Confirm, true); err != nil {
					return res, err
				}
				confirms = append(confirms, st)
			}
			if g.pass(st) {
				g.held = true
				switch {
				case g.unpaced && k == 0 && g.name == "NDR":
					g.note = "no loss at the generator's full rate: the result is what the path took, not a loss limit"
				case g.unpaced && k == 0:
					g.note = fmt.Sprintf("at most %s lost at the generator's full rate: the result is what the path took, not a loss limit", lossText(g.loss))
				case k > 0:
					g.note = fmt.Sprintf("confirmed %.0f%% below the search's result: the full-length trials lost more", 100*(1-f))
				}
				break
			}
			lastFail = st
			if k == len(confirmSteps)-1 {
				why := "it still lost " + trialLossText(lastFail)
				if !cfg.Held(lastFail.Requested, lastFail.Offered) {
					// Not the path's loss: the generator fell short of
					// the rate asked (a loaded machine).
					why = fmt.Sprintf("the generator offered %.0f of the %.0f pps asked (lost %s)", lastFail.Offered, lastFail.Requested, trialLossText(lastFail))
				}
				g.note = fmt.Sprintf("no rate held for the %v confirmation: at %.0f pps asked, %.0f%% below the search's result, %s",
					cfg.Confirm, lastFail.Requested, 100*(1-f), why)
			}
		}
	}
	// Each result: the best confirmation that passed its goal (the
	// NDR's pass the PDR's goal too).
	for _, g := range goals {
		for _, st := range confirms {
			if g.pass(st) {
				g.result = max(g.result, st.Offered)
			}
		}
		switch {
		case g.result > 0 && !g.unpaced && g.lo == 0:
			g.note = "no search trial passed, but a full-length confirmation of the PDR did: its rate"
		case g.result > 0 && !g.held:
			g.note += fmt.Sprintf("; the best full-length trial within its goal was a confirmation of the other rate, at %.0f pps", g.result)
		}
	}
	res.Throughput, res.Note = goals[0].result, goals[0].note
	if len(goals) > 1 {
		res.PDR, res.PDRNote = goals[1].result, goals[1].note
		if res.PDR > 0 && res.PDRNote == "" && res.PDR == res.Throughput && !goals[1].unpaced {
			res.PDRNote = "the NDR's confirmation: no higher rate held the PDR's goal for the full length"
		}
	}
	return res, nil
}

// reuse is a confirmation already run that decides a step at rate (0:
// unpaced): the best one that passed at a rate asked at least as high, or
// else one at this very rate that failed. ok is false when none does and
// the step needs a trial of its own.
func reuse(confirms []SearchTrial, rate float64, pass func(SearchTrial) bool) (SearchTrial, bool) {
	higher := func(req float64) bool { return req == 0 || (rate != 0 && req >= rate) }
	var best SearchTrial
	found := false
	for _, st := range confirms {
		if pass(st) && higher(st.Requested) && (!found || st.Offered > best.Offered) {
			best, found = st, true
		}
	}
	if found {
		return best, true
	}
	for _, st := range confirms {
		if st.Requested == rate {
			return st, true
		}
	}
	return SearchTrial{}, false
}

// lossText is a loss ratio for people: "0", "0.5%".
func lossText(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%g%%", 100*v)
}

// trialLossText is a trial's loss as a share and, roughly, in frames:
// a few frames of millions is a share that a fixed number of decimals
// shows as none.
func trialLossText(st SearchTrial) string {
	return fmt.Sprintf("%s, about %.0f frames", lossText(st.Loss), st.Loss*st.Offered*st.Seconds)
}

// confirmSteps are the fractions of the search's result that confirmation
// tries in turn.
var confirmSteps = []float64{1, 0.99, 0.97, 0.93, 0.85, 0.7, 0.5}
