package lab

import (
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/sink"
)

// TestEventAccounting: an event's figures from the generator's and the
// sinks' counts, the watch that decides when a stream has recovered, and
// the events' list as --events gives it.
func TestEventAccounting(t *testing.T) {
	var ev RestartEvent
	ev.Account(gen.Stats{Sent: 1000, DevDropped: 3, Elapsed: time.Second},
		sink.Snapshot{Received: 992, Lost: 10, Duplicates: 2}, &sink.Snapshot{Received: 7})
	// 992 counted, 2 of them copies: 990 distinct of 1000 sent.
	if ev.Lost != 10 || ev.Gaps != 10 || ev.Flooded != 7 || ev.Sent != 1000 || ev.DevDropped != 3 || ev.Offered != 1000 {
		t.Errorf("account: %+v", ev)
	}
	ev = RestartEvent{}
	ev.Account(gen.Stats{Sent: 500}, sink.Snapshot{Received: 500}, nil)
	if ev.Lost != 0 || ev.Flooded != 0 {
		t.Errorf("account without loss and without a watching host: %+v", ev)
	}

	// The stream has recovered once it has grown at every poll, with no
	// new gap, for the tail.
	t0 := time.Unix(1000, 0)
	w := newFlowWatch(300*time.Millisecond, t0, 100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		ms       int
		received uint64
		gaps     int64
		ok       bool
	}{
		{100, 200, 0, false},
		{200, 200, 0, false}, // nothing arrived: the clean run starts again
		{300, 300, 0, false},
		{400, 400, 3, false}, // a gap
		{500, 500, 3, false},
		{600, 600, 3, false},
		{700, 700, 3, true}, // 300ms clean since the gap at 400
	}
	for _, st := range steps {
		if ok := w.observe(at(st.ms), st.received, st.gaps); ok != st.ok {
			t.Errorf("at %dms (received %d, gaps %d): recovered %v, want %v", st.ms, st.received, st.gaps, ok, st.ok)
		}
	}

	evc, err := ParseEvents("sigkill=10, sigterm=10,upgrade=5")
	if err != nil || FormatEvents(evc) != "sigkill=10,sigterm=10,upgrade=5" {
		t.Errorf("ParseEvents: %v %v", evc, err)
	}
	for _, bad := range []string{"", "sigkill", "sigkill=0", "reboot=1", "sigkill=1,sigkill=2", "upgrade=x"} {
		if _, err := ParseEvents(bad); err == nil {
			t.Errorf("ParseEvents(%q) took it", bad)
		}
	}
	if root, err := sourceTree(); err != nil || !isSourceTree(root) {
		t.Errorf("the source tree from internal/lab: %q, %v", root, err)
	}
}
