package lab

// The restart test: RFC 6201's reset characterisation, applied to a
// software switch's daemon. A stream from h1 to h2 runs through the DUT
// while its daemon is killed, stopped, or replaced by another build, and
// started again; each event has a stream of its own, so that its figures
// are exact and its own: every frame carries a sequence number, the
// generator counts what it sent and the sinks what arrived, h2's frames
// lost and h3's frames flooded (the stream is to h2's learned address: a
// forgotten table floods it to every port).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/sink"
)

// RestartEvent is one event and its stream.
type RestartEvent struct {
	Kind  string `json:"kind"`
	Index int    `json:"index"` // 1-based, within its kind
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	// Sent is every frame of the stream, all due at h2; DevDropped those
	// of them h1's own device dropped (the DUT's ingress queue was full).
	Sent       uint64 `json:"sent"`
	DevDropped uint64 `json:"dev_dropped"`
	Received   uint64 `json:"received"` // stream frames h2's sink counted
	// Lost is Sent less the distinct frames h2 received; Gaps is the
	// sink's own count of sequence numbers it never saw (the two agree
	// unless frames were lost at the very end of the stream).
	Lost       int64  `json:"lost"`
	Gaps       int64  `json:"sequence_gaps"`
	Reordered  uint64 `json:"reordered"`
	Duplicated uint64 `json:"duplicated"`
	// Flooded is the stream frames h3's sink counted: sent to h2's
	// learned address, they reach h3 only if the DUT flooded them.
	Flooded uint64  `json:"flooded"`
	Offered float64 `json:"offered_pps"`
	Seconds float64 `json:"seconds"` // the stream's length
	ExitMs  float64 `json:"exit_ms,omitempty"`
	BackMs  float64 `json:"back_ms,omitempty"`
	Note    string  `json:"note,omitempty"`
	Log     string  `json:"log,omitempty"`
}

// account fills an event's figures from the generator's run and the
// sinks' counts after it. Every frame sent is due at h2 exactly once, so
// what h2's sink did not count (duplicates aside) was lost, wherever: the
// generator's own device drops are in Sent, and so counted lost too.
// watch is h3's sink (nil without a third host).
func (ev *RestartEvent) account(g gen.Stats, to sink.Snapshot, watch *sink.Snapshot) {
	ev.Sent, ev.DevDropped, ev.Offered, ev.Seconds = g.Sent, g.DevDropped, g.PPS(), g.Elapsed.Seconds()
	ev.Received, ev.Gaps, ev.Reordered, ev.Duplicated = to.Received, to.Lost, to.Reordered, to.Duplicates
	ev.Lost = int64(g.Sent) - int64(to.Received-min(to.Duplicates, to.Received))
	if watch != nil {
		ev.Flooded = watch.Received
	}
}

// RestartRecord is every event of one kind through one DUT.
type RestartRecord struct {
	Kind       string    `json:"kind"`
	What       string    `json:"what"` // what an event does to the DUT
	FrameSize  FrameSize `json:"frame_size"`
	RatePPS    float64   `json:"rate_pps"`
	Throughput float64   `json:"throughput_pps,omitempty"` // measured; the rate is Load of it
	Load       float64   `json:"load,omitempty"`
	// Watched: a third host's sink counted the frames flooded to it.
	Watched bool           `json:"flooding_watched"`
	Events  []RestartEvent `json:"events"`
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
func Summarize(evs []RestartEvent) EventSummary {
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
	s.LostMedian, s.FloodedMedian, s.SentMedian = Median(lost), Median(flooded), Median(sent)
	s.BackMedian = time.Duration(Median(back) * float64(time.Millisecond))
	return s
}

// flowWatch follows a stream at its sink after an event: it has recovered
// once, for tail, every poll found more frames and no new gap.
type flowWatch struct {
	tail     time.Duration
	received uint64
	gaps     int64
	since    time.Time // the start of the clean run so far
}

func newFlowWatch(tail time.Duration, from time.Time, received uint64, gaps int64) *flowWatch {
	return &flowWatch{tail: tail, received: received, gaps: gaps, since: from}
}

// observe takes one poll of the sink and says whether the stream has
// recovered.
func (w *flowWatch) observe(now time.Time, received uint64, gaps int64) bool {
	if received <= w.received || gaps > w.gaps {
		w.since = now
	}
	w.received, w.gaps = received, gaps
	return now.Sub(w.since) >= w.tail
}

const (
	// watchEvery is how often a stream's sink is read while the test
	// waits for it to recover (a read is about a thousand map lookups).
	watchEvery = 100 * time.Millisecond
	// recoverLimit is how long after the daemon is back the stream may
	// take to recover before the event's stream ends anyway.
	recoverLimit = 30 * time.Second
)

// restartWindow runs one event's stream: learning frames from every host
// (the table the DUT holds is refreshed, or re-taught after an earlier
// event emptied it, so that each event's floods are its own), then the
// stream from host 0 to host 1 at rate; event (nil: none) runs lead into
// it; the stream goes on until it has recovered for tail after the DUT is
// back; then it stops, and after a drain the sinks' counts are the event's.
func (r *Rig) restartWindow(ctx context.Context, mix frame.Mix, rate float64, flows int, lead, tail time.Duration, tm Timing, event func(context.Context) (Restarted, error)) (RestartEvent, error) {
	var ev RestartEvent
	to := r.sinks[1]
	if to == nil {
		return ev, errors.New("restart: no sink on h2")
	}
	watch := r.sinks[2] // nil with two hosts
	for _, h := range r.T.Hosts {
		if err := learnFrame(h); err != nil {
			return ev, err
		}
	}
	SleepCtx(ctx, tm.Settle)
	for _, s := range []*sink.Sink{to, watch} {
		if s == nil {
			continue
		}
		if err := s.Reset(); err != nil {
			return ev, err
		}
	}
	from := r.T.Hosts[0]
	o := gen.Options{Dev: from.If, NetNS: from.NS.Path, DstMAC: r.T.Hosts[1].MAC, Mix: mix, Rate: rate, Flows: flows,
		CPUs: []int{r.Place.GenCPU}, Batch: 64}
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	type genDone struct {
		s   gen.Stats
		err error
	}
	done := make(chan genDone, 1)
	go func() {
		s, err := gen.Run(gctx, o, 0, nil)
		done <- genDone{s, err}
	}()
	var g genDone
	ended := false
	wait := func(d time.Duration) {
		if ended {
			return
		}
		select {
		case g = <-done:
			ended = true
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	wait(lead)
	// The stream must be reaching h2 before the event, or the event's
	// figures would say nothing.
	for deadline := time.Now().Add(5 * time.Second); !ended && ctx.Err() == nil; wait(watchEvery) {
		snap, err := to.Snapshot()
		if err != nil {
			return ev, err
		}
		if snap.Received > 0 {
			break
		}
		if time.Now().After(deadline) {
			return ev, fmt.Errorf("restart: the stream from %s did not reach %s in %v, before any event", from.NS.Name, r.T.Hosts[1].NS.Name, lead+5*time.Second)
		}
	}
	backAt := time.Now()
	var eventErr error
	if event != nil && !ended && ctx.Err() == nil {
		t0 := time.Now()
		res, err := event(ctx)
		ev.From, ev.To, ev.Log = res.From, res.To, res.Log
		ev.ExitMs, ev.BackMs = Millis(res.Exited), Millis(res.Back)
		backAt = t0.Add(res.Back)
		eventErr = err
	}
	if eventErr == nil {
		snap, err := to.Snapshot()
		if err != nil {
			return ev, err
		}
		w := newFlowWatch(tail, backAt, snap.Received, snap.Lost)
		for limit := backAt.Add(recoverLimit); !ended && ctx.Err() == nil; {
			wait(watchEvery)
			snap, err := to.Snapshot()
			if err != nil {
				return ev, err
			}
			if w.observe(time.Now(), snap.Received, snap.Lost) {
				break
			}
			if time.Now().After(limit) {
				ev.Note = fmt.Sprintf("the stream had not reached h2 for %v without a gap %v after the daemon was back; it was stopped there", tail, recoverLimit)
				break
			}
		}
	}
	stop()
	if !ended {
		g = <-done
	}
	if g.err != nil && ctx.Err() == nil {
		return ev, fmt.Errorf("generator on %s: %w", from.NS.Name, g.err)
	}
	SleepCtx(ctx, tm.Drain)
	snapTo, err := to.Snapshot()
	if err != nil {
		return ev, err
	}
	var snapWatch *sink.Snapshot
	if watch != nil {
		s, err := watch.Snapshot()
		if err != nil {
			return ev, err
		}
		snapWatch = &s
	}
	ev.account(g.s, snapTo, snapWatch)
	if ev.Lost <= 0 && ev.Flooded == 0 {
		ev.Log = "" // kept only to explain what went wrong
	}
	if eventErr != nil {
		return ev, eventErr
	}
	return ev, ctx.Err()
}

// restartPlan is the events a DUT goes through: the scenario's, or, for a
// DUT without a daemon, streams with no event, as many as the most of any
// kind; with a note for what it cannot do.
func restartPlan(ctx context.Context, d DUT, events []EventCount) ([]EventCount, map[string]string, []string) {
	what := map[string]string{}
	r, ok := d.(Restarter)
	if !ok {
		n := 0
		for _, e := range events {
			n = max(n, e.Count)
		}
		what[EventNone] = "no daemon to restart: the same stream with no event, the reference (the forwarding is the kernel's own; 0 lost and 0 flooded by construction, if the path loses nothing at this rate)"
		return []EventCount{{EventNone, n}}, what, nil
	}
	var plan []EventCount
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
func restartTest(ctx context.Context, s Scenario, k RestartTest, rig *Rig, size FrameSize, rate, tput float64, base Result, add func(Result), notef func(string), status func(string)) error {
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
		rec := &RestartRecord{Kind: e.Kind, What: what[e.Kind], FrameSize: size, RatePPS: rate, Watched: len(rig.T.Hosts) > 2}
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
			status(fmt.Sprintf("restart: %s %d/%d under %s of %s%s", e.Kind, i, e.Count, PPSText(rate), size.Label(), last))
			var event func(context.Context) (Restarted, error)
			if e.Kind != EventNone {
				kind := e.Kind
				event = func(ctx context.Context) (Restarted, error) { return rig.DUT.(Restarter).Restart(ctx, kind) }
			}
			ev, err := rig.restartWindow(ctx, mix, rate, max(s.Flows, 1), lead, tail, s.Timing, event)
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
			addRestartResults(base, rec, runErr, add)
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
func addRestartResults(base Result, rec *RestartRecord, err error, add func(Result)) {
	sum := Summarize(rec.Events)
	one := func(test string, most float64, events int, of func(RestartEvent) float64, what string) Result {
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
	lost := one(TestRestart, float64(sum.LostMax), sum.LostEvents, func(e RestartEvent) float64 { return float64(e.Lost) }, "frames lost")
	lost.Restart = rec
	add(lost)
	if rec.Watched {
		add(one(TestRestartFlooded, float64(sum.FloodedMax), sum.FloodedEvents, func(e RestartEvent) float64 { return float64(e.Flooded) }, "frames flooded to h3"))
	}
}

// restartNote says how the restart test measures, for the run's notes.
func restartNote(s Scenario, k RestartTest) string {
	rate := fmt.Sprintf("at %.0f%% of the DUT's zero-loss throughput, measured first", 100*s.Load)
	if s.StreamRate > 0 {
		rate = "at " + PPSText(s.StreamRate)
	}
	size := FrameSize("64")
	if len(s.Sizes) > 0 {
		size = s.Sizes[0]
	}
	lead, tail := k.Lead, k.Tail
	return fmt.Sprintf("restart: events %s, each with a stream of its own from h1 to h2 (%s frames %s): learning frames from every host, "+
		"the stream, the event %v into it, and the stream on until, the daemon back, it has reached h2 for %v without a gap (at most %v); "+
		"lost = frames sent less the distinct frames h2's sink counted; flooded = stream frames h3's sink counted (they were for h2's learned address; "+
		"a DUT that forgot its table floods them until h2 speaks again, which it does not while it only receives: that figure runs to the stream's end). "+
		"Back after: from the signal to the new daemon answering with every port up (trestle: its control socket; Open vSwitch: ovs-vsctl returning once "+
		"ovs-vswitchd has applied its configuration)", FormatEvents(k.Events), size.Label(), rate, lead, tail, recoverLimit)
}

// TestRestart: a stream from h1 to h2 while the DUT's daemon is restarted
// (RFC 6201's reset characterisation): frames lost per event; its
// results' twin TestRestartFlooded is the frames h3 got.
const (
	TestRestart        = "restart"
	TestRestartFlooded = "restart-flooded"
)

// RestartTest is the restart test: a stream from h1 to h2 while the DUT's
// daemon is restarted, on the straight path too (the reference), with a
// daemon that pins its datapath. Events run in this order, each kind
// Count times; each event has a stream of its own, which runs Lead before
// it and, once the daemon is back, on until it has reached h2 for Tail
// without a gap (0: 1 s each). UpgradeTo is the build the upgrade events
// go to and back from ("": see Env.OtherBuild).
type RestartTest struct {
	Events     []EventCount
	Lead, Tail time.Duration
	UpgradeTo  string
}

func (RestartTest) Name() string { return TestRestart }

func (k RestartTest) Needs(Scenario) Needs {
	return Needs{Direct: true, AllHosts: true, Persist: true, UpgradeTo: k.UpgradeTo, OneWay: true}
}

// Estimate: one stream per event (settle, lead, the event, the tail,
// drain); a search first if the scenario has none.
func (k RestartTest) Estimate(s Scenario, dut Spec) time.Duration {
	tm := s.Timing
	trial := tm.Search.Trial + tm.Settle + tm.Drain
	d, _ := dut.newDUT()
	per := tm.Settle + k.Lead + k.Tail + tm.Drain + time.Second
	n := 0
	for _, e := range k.Events {
		if _, ok := d.(Restarter); ok {
			n += e.Count
		} else {
			n = max(n, e.Count)
		}
	}
	t := time.Duration(n) * per
	if s.StreamRate == 0 && !s.has(TestThroughput) {
		t += 3*trial + tm.Search.Confirm
	}
	return t
}

// Prepare refuses a restart test it cannot run, mounts the BPF filesystem
// that trestle's daemons pin their datapaths to, and says how it measures.
func (k RestartTest) Prepare(s Scenario) ([]string, error) {
	if len(k.Events) == 0 {
		return nil, errors.New("restart: no events to run")
	}
	if s.StreamRate <= 0 && (s.Load <= 0 || s.Load > 1) {
		return nil, fmt.Errorf("restart: the stream's load %v: a fraction of the throughput above 0, up to 1", s.Load)
	}
	mounted, err := EnsureBPFFS()
	if err != nil {
		return nil, err
	}
	var notes []string
	if mounted {
		notes = append(notes, "mounted the BPF filesystem at /sys/fs/bpf (it was not): trestle with persist pins its datapath there")
	}
	return append(notes, restartNote(s, k)), nil
}

func (k RestartTest) Run(ctx context.Context, u *UnitRun) error {
	size, rate, tput, err := u.loadRate(ctx, "restart")
	if err != nil {
		return err
	}
	return restartTest(ctx, u.S, k, u.Rig, size, rate, tput, u.Base, u.Add, u.Notef, u.Status)
}

// Flags: the events, their stream's lead and tail, and the build upgrades
// go to (of a scenario with a restart test; in another they are ignored).
func (RestartTest) Flags() []Flag {
	positive := func(name string, set func(*RestartTest, time.Duration)) func(*Scenario, any) error {
		return Sets(func(r RestartTest, v time.Duration) (RestartTest, error) {
			if v <= 0 {
				return r, fmt.Errorf("--%s %v: must be above 0", name, v)
			}
			set(&r, v)
			return r, nil
		})
	}
	return []Flag{
		{Name: "events", Type: FlagString, Usage: "restart: events in order with their counts (default sigkill=10,sigterm=10,upgrade=5)",
			Set: Sets(func(r RestartTest, v string) (RestartTest, error) {
				evs, err := ParseEvents(v)
				if err != nil {
					return r, fmt.Errorf("--events: %w", err)
				}
				r.Events = evs
				return r, nil
			})},
		{Name: "event-lead", Type: FlagDuration, Usage: "restart: the stream before each event (default 1s)",
			Set: positive("event-lead", func(r *RestartTest, v time.Duration) { r.Lead = v })},
		{Name: "event-tail", Type: FlagDuration, Usage: "restart: how long the stream must reach h2 without a gap after the\ndaemon is back (default 1s)",
			Set: positive("event-tail", func(r *RestartTest, v time.Duration) { r.Tail = v })},
		{Name: "upgrade-to", Type: FlagString, Usage: "restart: the trestle build the upgrade events go to and back from",
			Set: Sets(func(r RestartTest, v string) (RestartTest, error) {
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
