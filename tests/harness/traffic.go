package harness

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab/sink"
	"github.com/trestle/trestle/internal/testutil"
)

// StartSinkOn runs `trestle sink --json` on host i's eth0 and waits until
// its program is attached.
func (l *Lab) StartSinkOn(i int) *testutil.Proc {
	l.T.Helper()
	p := l.Host(i).Start(l.T, Bin, "sink", "--dev", "eth0", "--json")
	deadline := time.Now().Add(10 * time.Second)
	for !XDPAttached(l.T, l.Host(i), "eth0") || !strings.Contains(p.Out.String(), "") {
		if time.Now().After(deadline) {
			l.T.Fatalf("sink on h%d did not attach\n%s", i, p.Out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

func StopSink(t *testing.T, p *testutil.Proc) sink.Summary {
	t.Helper()
	_ = p.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("sink did not stop\n%s", p.Out.String())
	}
	var s sink.Summary
	if err := json.Unmarshal([]byte(p.Out.String()), &s); err != nil {
		t.Fatalf("sink --json: %v\n%s", err, p.Out.String())
	}
	return s
}

// StreamLossless waits for the generator of a stream h1 -> h2 and says
// whether sink2 (on h2) got every frame and sink3 (on h3) none: a table
// forgotten on the way would have flooded them to h3.
func StreamLossless(t *testing.T, gen, sink2, sink3 *testutil.Proc) GenSummary {
	t.Helper()
	select {
	case <-gen.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("generator did not finish")
	}
	var g GenSummary
	if err := json.Unmarshal([]byte(gen.Out.String()), &g); err != nil || g.Sent == 0 {
		t.Fatalf("gen: %v\n%s", err, gen.Out.String())
	}
	time.Sleep(300 * time.Millisecond)
	s2, s3 := StopSink(t, sink2), StopSink(t, sink3)
	if s2.Received != g.Sent || s2.Lost != 0 {
		t.Errorf("h2 received %d of %d frames (lost %d) across the restarts, want every one", s2.Received, g.Sent, s2.Lost)
	}
	if s3.Received != 0 {
		t.Errorf("h3 got %d of the stream's frames: a table was forgotten and they flooded", s3.Received)
	}
	t.Logf("%d frames sent, %d received by h2, %d flooded to h3", g.Sent, s2.Received, s3.Received)
	return g
}

func XDPAttached(t *testing.T, ns *testutil.NS, ifname string) bool {
	t.Helper()
	l, err := ns.Link(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
}

type GenSummary struct {
	Sent          uint64  `json:"sent"`
	Bytes         uint64  `json:"bytes"`
	PPS           float64 `json:"sent_per_second"`
	DevDropped    uint64  `json:"dev_dropped"`
	Sizes         string  `json:"sizes"`
	RateRequested float64 `json:"requested_per_second"`
	FellBehind    bool    `json:"fell_behind"`
	BehindBy      float64 `json:"behind_by"`
}

// Stream is a stream of test frames from h1 to h2's learned address at
// 20,000 frames a second, with sinks on h2 and h3, through which a test
// takes the daemon through events (Step) and then checks that no frame
// was lost or flooded (Lossless).
type Stream struct {
	l                 *Lab
	gen, sink2, sink3 *testutil.Proc
	gap               time.Duration
}

// StartStream starts the sinks, then the generator for dur; each Step
// waits gap first, so that frames flow between events.
func (l *Lab) StartStream(dur, gap time.Duration) *Stream {
	l.T.Helper()
	s := &Stream{l: l, gap: gap}
	s.sink2, s.sink3 = l.StartSinkOn(2), l.StartSinkOn(3)
	s.gen = l.Host(1).Start(l.T, Bin, "gen", "--dev", "eth0", "--mode", "packet", "--dst-mac", HostMAC(2).String(),
		"--rate", "20000", "--duration", dur.String(), "--json")
	return s
}

// Step waits the stream's gap, logs what comes, and does it.
func (s *Stream) Step(what string, f func()) {
	s.l.T.Helper()
	time.Sleep(s.gap)
	s.l.T.Logf("%s", what)
	f()
}

// Lossless waits for the generator and checks the sinks (StreamLossless).
func (s *Stream) Lossless() GenSummary {
	s.l.T.Helper()
	return StreamLossless(s.l.T, s.gen, s.sink2, s.sink3)
}
