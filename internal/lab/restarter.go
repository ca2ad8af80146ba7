package lab

// A DUT's power to restart its daemon (Restarter), the events it goes
// through and what a restart took, and an event's stream (RestartWindow):
// what the restart kind drives, the overlay kind uses for FRR and the
// mac-flood and soak kinds account their streams with, and what DUTs
// implement.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/sink"
)

// Event kinds of the restart test.
const (
	EventSIGKILL = "sigkill" // the daemon killed with SIGKILL, then the same build started again
	EventSIGTERM = "sigterm" // stopped with SIGTERM, then started again
	EventUpgrade = "upgrade" // stopped with SIGTERM, then another build started in its place
	EventNone    = "none"    // no event: the stream alone, for a DUT without a daemon
)

// EventKinds are the kinds --events takes, in the order of the defaults.
var EventKinds = []string{EventSIGKILL, EventSIGTERM, EventUpgrade}

// EventCount is one kind of event and how many of it to run.
type EventCount struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// ParseEvents reads "sigkill=10,sigterm=10,upgrade=5": kinds in the order
// they are to run, each with its count.
func ParseEvents(s string) ([]EventCount, error) {
	var out []EventCount
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(v)
		switch {
		case !ok || err != nil || n < 1 || n > 1000:
			return nil, fmt.Errorf("events %q: %q is not KIND=COUNT with a count of 1 to 1000", s, part)
		case !slices.Contains(EventKinds, k):
			return nil, fmt.Errorf("events %q: %q is not one of %s", s, k, strings.Join(EventKinds, ", "))
		}
		for _, e := range out {
			if e.Kind == k {
				return nil, fmt.Errorf("events %q: %s given twice", s, k)
			}
		}
		out = append(out, EventCount{k, n})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("events %q: no event", s)
	}
	return out, nil
}

// FormatEvents is the inverse of ParseEvents.
func FormatEvents(evs []EventCount) string {
	var parts []string
	for _, e := range evs {
		parts = append(parts, fmt.Sprintf("%s=%d", e.Kind, e.Count))
	}
	return strings.Join(parts, ",")
}

// Restarter is a DUT with a daemon that the restart test restarts under
// traffic.
type Restarter interface {
	// RestartPlan says whether the DUT can go through events of kind, and
	// what such an event does to it, for the record. It may prepare what
	// they need (the other build of an upgrade).
	RestartPlan(ctx context.Context, kind string) (string, error)
	// Restart ends the daemon the way kind says and starts it again (or
	// its other build), and returns once the new one is back.
	Restart(ctx context.Context, kind string) (Restarted, error)
}

// Restarted is what one restart of a DUT's daemon took.
type Restarted struct {
	Exited   time.Duration // from the signal to the old daemon's exit
	Back     time.Duration // from the signal to the new daemon answering, every port set up
	From, To string        // the builds before and after
	// Log is the old daemon's last lines and the new one's first, kept
	// with the event when it lost or flooded frames.
	Log string
}

// TrestleBuild is a trestle binary the restart test's upgrade events can run.
type TrestleBuild struct {
	Path  string `json:"path"`
	Label string `json:"label"` // what it is, for people
}

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

// Account fills an event's figures from the generator's run and the
// sinks' counts after it. Every frame sent is due at h2 exactly once, so
// what h2's sink did not count (duplicates aside) was lost, wherever: the
// generator's own device drops are in Sent, and so counted lost too.
// watch is h3's sink (nil without a third host).
func (ev *RestartEvent) Account(g gen.Stats, to sink.Snapshot, watch *sink.Snapshot) {
	ev.Sent, ev.DevDropped, ev.Offered, ev.Seconds = g.Sent, g.DevDropped, g.PPS(), g.Elapsed.Seconds()
	ev.Received, ev.Gaps, ev.Reordered, ev.Duplicated = to.Received, to.Lost, to.Reordered, to.Duplicates
	ev.Lost = int64(g.Sent) - int64(to.Received-min(to.Duplicates, to.Received))
	if watch != nil {
		ev.Flooded = watch.Received
	}
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
	// RecoverLimit is how long after the daemon is back the stream may
	// take to recover before the event's stream ends anyway.
	RecoverLimit = 30 * time.Second
)

// RestartWindow runs one event's stream: learning frames from every host
// (the table the DUT holds is refreshed, or re-taught after an earlier
// event emptied it, so that each event's floods are its own), then the
// stream from host 0 to host 1 at rate; event (nil: none) runs lead into
// it; the stream goes on until it has recovered for tail after the DUT is
// back; then it stops, and after a drain the sinks' counts are the event's.
func (r *Rig) RestartWindow(ctx context.Context, mix frame.Mix, rate float64, flows int, lead, tail time.Duration, tm Timing, event func(context.Context) (Restarted, error)) (RestartEvent, error) {
	var ev RestartEvent
	to := r.sinks[1]
	if to == nil {
		return ev, errors.New("restart: no sink on h2")
	}
	watch := r.sinks[2] // nil with two hosts
	for _, h := range r.T.Hosts {
		if err := LearnFrame(h); err != nil {
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
		for limit := backAt.Add(RecoverLimit); !ended && ctx.Err() == nil; {
			wait(watchEvery)
			snap, err := to.Snapshot()
			if err != nil {
				return ev, err
			}
			if w.observe(time.Now(), snap.Received, snap.Lost) {
				break
			}
			if time.Now().After(limit) {
				ev.Note = fmt.Sprintf("the stream had not reached h2 for %v without a gap %v after the daemon was back; it was stopped there", tail, RecoverLimit)
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
	ev.Account(g.s, snapTo, snapWatch)
	if ev.Lost <= 0 && ev.Flooded == 0 {
		ev.Log = "" // kept only to explain what went wrong
	}
	if eventErr != nil {
		return ev, eventErr
	}
	return ev, ctx.Err()
}

// restartWindow is RestartWindow, under the name the overlay kind, still
// the core's, calls it by.
func (r *Rig) restartWindow(ctx context.Context, mix frame.Mix, rate float64, flows int, lead, tail time.Duration, tm Timing, event func(context.Context) (Restarted, error)) (RestartEvent, error) {
	return r.RestartWindow(ctx, mix, rate, flows, lead, tail, tm, event)
}
