// Package restart is the lab's restart kind: RFC 6201's reset characterisation, applied to a
// software switch's daemon. A stream from h1 to h2 runs through the DUT
// while its daemon is killed, stopped, or replaced by another build, and
// started again; each event has a stream of its own, so that its figures
// are exact and its own: every frame carries a sequence number, the
// generator counts what it sent and the sinks what arrived, h2's frames
// lost and h3's frames flooded (the stream is to h2's learned address: a
// forgotten table floods it to every port).
package restart

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestTable) }

// Record is every event of one kind through one DUT: the record of a
// restart result (Result.Record).
type Record struct {
	Kind       string        `json:"kind"`
	What       string        `json:"what"` // what an event does to the DUT
	FrameSize  lab.FrameSize `json:"frame_size"`
	RatePPS    float64       `json:"rate_pps"`
	Throughput float64       `json:"throughput_pps,omitempty"` // measured; the rate is Load of it
	Load       float64       `json:"load,omitempty"`
	// Watched: a third host's sink counted the frames flooded to it.
	Watched bool               `json:"flooding_watched"`
	Events  []lab.RestartEvent `json:"events"`
}

// EventSummary is a kind's events summed up.
type EventSummary struct {
	Events                    int
	LostMax, LostTotal        int64
	LostMedian                float64
	FloodedMax, FloodedTotal  uint64
	FloodedMedian             float64
	BackMedian                time.Duration // 0: no daemon
	SentMedian                float64
	LostEvents, FloodedEvents int // events that lost frames, that flooded some
}

// Summarize sums up events.
func Summarize(evs []lab.RestartEvent) EventSummary {
	s := EventSummary{Events: len(evs)}
	var lost, flooded, back, sent []float64
	for _, e := range evs {
		lost = append(lost, float64(e.Lost))
		flooded = append(flooded, float64(e.Flooded))
		sent = append(sent, float64(e.Sent))
		s.LostTotal += e.Lost
		s.FloodedTotal += e.Flooded
		s.LostMax = max(s.LostMax, e.Lost)
		s.FloodedMax = max(s.FloodedMax, e.Flooded)
		if e.Lost > 0 {
			s.LostEvents++
		}
		if e.Flooded > 0 {
			s.FloodedEvents++
		}
		if e.BackMs > 0 {
			back = append(back, e.BackMs)
		}
	}
	s.LostMedian, s.FloodedMedian, s.SentMedian = lab.Median(lost), lab.Median(flooded), lab.Median(sent)
	s.BackMedian = time.Duration(lab.Median(back) * float64(time.Millisecond))
	return s
}

// restartPlan is the events a DUT goes through: the scenario's, or, for a
// DUT without a daemon, streams with no event, as many as the most of any
// kind; with a note for what it cannot do.
func restartPlan(ctx context.Context, d lab.DUT, events []lab.EventCount) ([]lab.EventCount, map[string]string, []string) {
	what := map[string]string{}
	r, ok := d.(lab.Restarter)
	if !ok {
		n := 0
		for _, e := range events {
			n = max(n, e.Count)
		}
		what[lab.EventNone] = "no daemon to restart: the same stream with no event, the reference (the forwarding is the kernel's own; 0 lost and 0 flooded by construction, if the path loses nothing at this rate)"
		return []lab.EventCount{{Kind: lab.EventNone, Count: n}}, what, nil
	}
	var plan []lab.EventCount
	var notes []string
	for _, e := range events {
		w, err := r.RestartPlan(ctx, e.Kind)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: no %s events: %v", d.Name(), e.Kind, err))
			continue
		}
		what[e.Kind] = w
		plan = append(plan, e)
	}
	return plan, what, notes
}

// restartTest runs the restart test on a rig: for each event kind, one
// stream per event, at rate (frames a second of size), and a lost and a
// flooded result for the kind.
func restartTest(ctx context.Context, s lab.Scenario, k Kind, rig *lab.Rig, size lab.FrameSize, rate, tput float64, base lab.Result, add func(lab.Result), notef func(string), status func(string)) error {
	mix, err := size.Mix()
	if err != nil {
		return err
	}
	status("restart: planning the events")
	plan, what, notes := restartPlan(ctx, rig.DUT, k.Events)
	for _, n := range notes {
		notef(n)
	}
	lead, tail := k.Lead, k.Tail
	if lead <= 0 {
		lead = time.Second
	}
	if tail <= 0 {
		tail = time.Second
	}
	for _, e := range plan {
		rec := &Record{Kind: e.Kind, What: what[e.Kind], FrameSize: size, RatePPS: rate, Watched: len(rig.T.Hosts) > 2}
		if tput > 0 {
			rec.Throughput, rec.Load = tput, rate/tput
		}
		var runErr error
		for i := 1; i <= e.Count && runErr == nil; i++ {
			last := ""
			if n := len(rec.Events); n > 0 {
				p := rec.Events[n-1]
				last = fmt.Sprintf("; last: lost %d, flooded %d", p.Lost, p.Flooded)
				if p.BackMs > 0 {
					last += fmt.Sprintf(", back after %v", time.Duration(p.BackMs*float64(time.Millisecond)).Round(time.Millisecond))
				}
			}
			status(fmt.Sprintf("restart: %s %d/%d under %s of %s%s", e.Kind, i, e.Count, lab.PPSText(rate), size.Label(), last))
			var event func(context.Context) (lab.Restarted, error)
			if e.Kind != lab.EventNone {
				kind := e.Kind
				event = func(ctx context.Context) (lab.Restarted, error) { return rig.DUT.(lab.Restarter).Restart(ctx, kind) }
			}
			ev, err := rig.RestartWindow(ctx, mix, rate, max(s.Flows, 1), lead, tail, s.Timing, event)
			ev.Kind, ev.Index = e.Kind, i
			if err != nil {
				runErr = fmt.Errorf("restart: %s event %d of %d: %w", e.Kind, i, e.Count, err)
				if ctx.Err() != nil {
					break // cancelled: the half-measured event is no figure
				}
				ev.Note = strings.TrimPrefix(ev.Note+"; "+err.Error(), "; ")
			}
			rec.Events = append(rec.Events, ev)
		}
		if len(rec.Events) > 0 {
			if err := addRestartResults(base, rec, runErr, add); err != nil {
				return err
			}
		}
		if runErr != nil {
			return runErr
		}
	}
	return nil
}

// addRestartResults adds a kind's two results: frames lost per event and
// frames flooded per event, each the most in one event (the goal is none
// in every event: the most says whether it was met), with every event's
// figure in PerEvent and the events themselves with the lost one.
func addRestartResults(base lab.Result, rec *Record, err error, add func(lab.Result)) error {
	sum := Summarize(rec.Events)
	one := func(test string, most float64, events int, of func(lab.RestartEvent) float64, what string) lab.Result {
		r := base
		r.Test, r.Param, r.Unit = test, rec.Kind, "frames"
		r.Value = most
		for _, e := range rec.Events {
			r.PerEvent = append(r.PerEvent, of(e))
		}
		if events > 0 {
			r.Note = fmt.Sprintf("%s in %d of %d events", what, events, sum.Events)
		}
		if err != nil {
			r.Error = err.Error()
		}
		return r
	}
	lost := one(lab.TestRestart, float64(sum.LostMax), sum.LostEvents, func(e lab.RestartEvent) float64 { return float64(e.Lost) }, "frames lost")
	if err := lost.SetRecord(rec); err != nil {
		return err
	}
	add(lost)
	if rec.Watched {
		add(one(TestRestartFlooded, float64(sum.FloodedMax), sum.FloodedEvents, func(e lab.RestartEvent) float64 { return float64(e.Flooded) }, "frames flooded to h3"))
	}
	return nil
}

// restartNote says how the restart test measures, for the run's notes.
func restartNote(s lab.Scenario, k Kind) string {
	rate := fmt.Sprintf("at %.0f%% of the DUT's zero-loss throughput, measured first", 100*s.Load)
	if s.StreamRate > 0 {
		rate = "at " + lab.PPSText(s.StreamRate)
	}
	size := lab.FrameSize("64")
	if len(s.Sizes) > 0 {
		size = s.Sizes[0]
	}
	lead, tail := k.Lead, k.Tail
	return fmt.Sprintf("restart: events %s, each with a stream of its own from h1 to h2 (%s frames %s): learning frames from every host, "+
		"the stream, the event %v into it, and the stream on until, the daemon back, it has reached h2 for %v without a gap (at most %v); "+
		"lost = frames sent less the distinct frames h2's sink counted; flooded = stream frames h3's sink counted (they were for h2's learned address; "+
		"a DUT that forgot its table floods them until h2 speaks again, which it does not while it only receives: that figure runs to the stream's end). "+
		"Back after: from the signal to the new daemon answering with every port up (trestle: its control socket; Open vSwitch: ovs-vsctl returning once "+
		"ovs-vswitchd has applied its configuration)", lab.FormatEvents(k.Events), size.Label(), rate, lead, tail, lab.RecoverLimit)
}

// TestRestartFlooded is the twin of a restart result (lab.lab.TestRestart,
// the frames lost per event): the frames h3 got.
const TestRestartFlooded = "restart-flooded"

// Kind is the restart test: a stream from h1 to h2 while the DUT's
// daemon is restarted, on the straight path too (the reference), with a
// daemon that pins its datapath. Events run in this order, each kind
// Count times; each event has a stream of its own, which runs Lead before
// it and, once the daemon is back, on until it has reached h2 for Tail
// without a gap (0: 1 s each). UpgradeTo is the build the upgrade events
// go to and back from ("": see Env.OtherBuild).
type Kind struct {
	Events     []lab.EventCount
	Lead, Tail time.Duration
	UpgradeTo  string
}

func (Kind) Name() string { return lab.TestRestart }

func (k Kind) Needs(lab.Scenario) lab.Needs {
	return lab.Needs{Direct: true, AllHosts: true, Persist: true, UpgradeTo: k.UpgradeTo, OneWay: true}
}

// Estimate: one stream per event (settle, lead, the event, the tail,
// drain); a search first if the scenario has none.
func (k Kind) Estimate(s lab.Scenario, dut lab.Spec) time.Duration {
	tm := s.Timing
	trial := tm.Search.Trial + tm.Settle + tm.Drain
	d, _ := dut.NewDUT()
	per := tm.Settle + k.Lead + k.Tail + tm.Drain + time.Second
	n := 0
	for _, e := range k.Events {
		if _, ok := d.(lab.Restarter); ok {
			n += e.Count
		} else {
			n = max(n, e.Count)
		}
	}
	t := time.Duration(n) * per
	if s.StreamRate == 0 && !s.Has(lab.TestThroughput) {
		t += 3*trial + tm.Search.Confirm
	}
	return t
}

// Prepare refuses a restart test it cannot run, mounts the BPF filesystem
// that trestle's daemons pin their datapaths to, and says how it measures.
func (k Kind) Prepare(s lab.Scenario) ([]string, error) {
	if len(k.Events) == 0 {
		return nil, errors.New("restart: no events to run")
	}
	if s.StreamRate <= 0 && (s.Load <= 0 || s.Load > 1) {
		return nil, fmt.Errorf("restart: the stream's load %v: a fraction of the throughput above 0, up to 1", s.Load)
	}
	mounted, err := lab.EnsureBPFFS()
	if err != nil {
		return nil, err
	}
	var notes []string
	if mounted {
		notes = append(notes, "mounted the BPF filesystem at /sys/fs/bpf (it was not): trestle with persist pins its datapath there")
	}
	return append(notes, restartNote(s, k)), nil
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	size, rate, tput, err := u.LoadRate(ctx, "restart")
	if err != nil {
		return err
	}
	return restartTest(ctx, u.S, k, u.Rig, size, rate, tput, u.Base, u.Add, u.Notef, u.Status)
}

// Flags: the stream's rate (--load or --rate), the events, their stream's
// lead and tail, and the build upgrades go to; a scenario without a
// restart test refuses them.
func (Kind) Flags() []lab.Flag {
	positive := func(name string, set func(*Kind, time.Duration)) func(*lab.Scenario, any) error {
		return lab.Sets(func(r Kind, v time.Duration) (Kind, error) {
			if v <= 0 {
				return r, fmt.Errorf("--%s %v: must be above 0", name, v)
			}
			set(&r, v)
			return r, nil
		})
	}
	const restartOnly = "the restart scenario"
	return []lab.Flag{
		lab.LoadFlag(), lab.RateFlag(),
		{Name: "events", Type: lab.FlagString, For: restartOnly, Usage: "restart: events in order with their counts (default sigkill=10,sigterm=10,upgrade=5)",
			Set: lab.Sets(func(r Kind, v string) (Kind, error) {
				evs, err := lab.ParseEvents(v)
				if err != nil {
					return r, fmt.Errorf("--events: %w", err)
				}
				r.Events = evs
				return r, nil
			})},
		{Name: "event-lead", Type: lab.FlagDuration, For: restartOnly, Usage: "restart: the stream before each event (default 1s)",
			Set: positive("event-lead", func(r *Kind, v time.Duration) { r.Lead = v })},
		{Name: "event-tail", Type: lab.FlagDuration, For: restartOnly, Usage: "restart: how long the stream must reach h2 without a gap after the\ndaemon is back (default 1s)",
			Set: positive("event-tail", func(r *Kind, v time.Duration) { r.Tail = v })},
		{Name: "upgrade-to", Type: lab.FlagString, For: restartOnly, Usage: "restart: the trestle build the upgrade events go to and back from",
			Set: lab.Sets(func(r Kind, v string) (Kind, error) {
				st, err := os.Stat(v)
				if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
					return r, fmt.Errorf("--upgrade-to %s: not an executable file (%v)", v, err)
				}
				if r.UpgradeTo, err = filepath.Abs(v); err != nil {
					return r, err
				}
				return r, nil
			})},
	}
}
