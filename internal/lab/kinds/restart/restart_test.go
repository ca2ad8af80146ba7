package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestEventSummary: a kind's events summed up, and its two results.
func TestEventSummary(t *testing.T) {
	evs := []lab.RestartEvent{
		{Index: 1, Sent: 100, Lost: 0, Flooded: 0, BackMs: 200},
		{Index: 2, Sent: 100, Lost: 5, Flooded: 40, BackMs: 300},
		{Index: 3, Sent: 100, Lost: 0, Flooded: 0, BackMs: 100},
		{Index: 4, Sent: 100, Lost: 2, Flooded: 0, BackMs: 400},
	}
	s := Summarize(evs)
	want := EventSummary{Events: 4, LostMax: 5, LostTotal: 7, LostMedian: 1, FloodedMax: 40, FloodedTotal: 40, FloodedMedian: 0,
		BackMedian: 250 * time.Millisecond, SentMedian: 100, LostEvents: 2, FloodedEvents: 1}
	if s != want {
		t.Errorf("Summarize:\n got %+v\nwant %+v", s, want)
	}
	if s := Summarize([]lab.RestartEvent{{Sent: 9}}); s.BackMedian != 0 || s.LostMax != 0 {
		t.Errorf("Summarize of an event with no daemon: %+v", s)
	}

	var got []lab.Result
	rec := &Record{Kind: lab.EventSIGKILL, Watched: true, Events: evs}
	if err := addRestartResults(lab.Result{DUT: "d", Rep: 1}, rec, nil, func(r lab.Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Test != lab.TestRestart || got[1].Test != TestRestartFlooded {
		t.Fatalf("results: %+v", got)
	}
	if got[0].Value != 5 || !slices.Equal(got[0].PerEvent, []float64{0, 5, 0, 2}) || !recordIs(got[0], rec) || got[0].Param != lab.EventSIGKILL {
		t.Errorf("lost result: %+v", got[0])
	}
	if got[1].Value != 40 || !slices.Equal(got[1].PerEvent, []float64{0, 40, 0, 0}) || len(got[1].Record) != 0 {
		t.Errorf("flooded result: %+v", got[1])
	}
	if !strings.Contains(got[0].Note, "2 of 4 events") || !strings.Contains(got[1].Note, "1 of 4 events") {
		t.Errorf("notes %q, %q", got[0].Note, got[1].Note)
	}
	got = nil
	rec.Watched = false
	if err := addRestartResults(lab.Result{}, rec, errors.New("broke"), func(r lab.Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Error != "broke" {
		t.Errorf("results without a watching host, after an error: %+v", got)
	}
}

// recordIs says whether r's record is rec.
func recordIs(r lab.Result, rec *Record) bool {
	var got Record
	return r.RecordOf(&got) == nil && reflect.DeepEqual(&got, rec)
}

// pinnedBy lists the persisted datapaths and daemon state directories of
// the daemons whose control sockets are socks: instance.Name ends in a hash
// of the socket, and a test's sockets are in a directory of its own, so
// that another daemon on the machine (another test's, a user's) is never
// taken for one this test left.
func pinnedBy(t *testing.T, socks []string) []string {
	t.Helper()
	var out []string
	for _, root := range []string{instance.PinRoot, instance.StateRoot} {
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if ofSocket(e.Name(), socks) {
				out = append(out, filepath.Join(root, e.Name()))
			}
		}
	}
	return out
}

// ofSocket says whether instance name is that of a daemon of one of socks
// (in whatever namespace).
func ofSocket(name string, socks []string) bool {
	_, hash, ok := strings.Cut(name, "-")
	for _, s := range socks {
		_, h, _ := strings.Cut(instance.Name(0, s), "-")
		if ok && hash == h {
			return true
		}
	}
	return false
}

// labSockets are the control sockets of the trestle daemons a lab run in
// workDir started (dut.go: <WorkDir>/<DUT namespace>.sock, beside the
// config it wrote, <WorkDir>/<DUT namespace>.toml); read after the run.
func labSockets(t *testing.T, workDir string) []string {
	t.Helper()
	cfgs, err := filepath.Glob(filepath.Join(workDir, "*.toml"))
	if err != nil || len(cfgs) == 0 {
		t.Fatalf("no daemon's config in the run's directory %s (%v): which daemons were this test's is not known", workDir, err)
	}
	var out []string
	for _, c := range cfgs {
		out = append(out, strings.TrimSuffix(c, ".toml")+".sock")
	}
	return out
}

func requirePersist(t *testing.T) {
	t.Helper()
	labtest.RequireRoot(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter (util-linux)")
	}
	if _, err := lab.EnsureBPFFS(); err != nil {
		t.Skip(err)
	}
}

// TestRestartScenario runs the restart test for real, one event of each
// kind through trestle in xdp and in its default mode: no frame lost, none
// flooded, and nothing left pinned afterwards.
func TestRestartScenario(t *testing.T) {
	requirePersist(t)
	bin := labtest.TrestleBinary(t)
	// The upgrade goes to another file (the same build: a variant would
	// take a compiler and a minute).
	other := filepath.Join(t.TempDir(), "trestle-other")
	if out, err := exec.Command("cp", bin, other).CombinedOutput(); err != nil {
		t.Fatalf("copy the binary: %v %s", err, out)
	}
	duts := []string{"trestle:xdp", "trestle"}
	sc := lab.Scenario{Name: "test", DUTs: lab.MustSpecs(duts...), Hosts: 3, Chain: []int{1}, Sizes: []lab.FrameSize{"64"},
		Tests: []lab.Kind{Kind{Events: []lab.EventCount{{Kind: lab.EventSIGKILL, Count: 1}, {Kind: lab.EventSIGTERM, Count: 1}, {Kind: lab.EventUpgrade, Count: 1}},
			Lead: 300 * time.Millisecond, Tail: 300 * time.Millisecond, UpgradeTo: other}},
		StreamRate: 200e3, Reps: 1, Timing: lab.TinyTiming()}
	beforeNS, work := labtest.Ours(t), t.TempDir()
	run, err := lab.Execute(context.Background(), lab.Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	socks := labSockets(t, work)
	seen := map[string]int{}
	for _, r := range run.Results {
		if r.Error != "" {
			t.Errorf("%s %s %s: %s", r.DUT, r.Test, r.Param, r.Error)
			continue
		}
		seen[r.DUT+" "+r.Test+" "+r.Param]++
		if r.Value != 0 {
			t.Errorf("%s %s %s: %v frames in an event, want 0 (%v)", r.DUT, r.Test, r.Param, r.Value, r.PerEvent)
		}
		if r.Test != lab.TestRestart {
			continue
		}
		var rec Record
		if err := r.RecordOf(&rec); err != nil {
			t.Fatal(err)
		}
		for _, e := range rec.Events {
			if e.Sent == 0 || e.Received != e.Sent || e.BackMs <= 0 || e.ExitMs <= 0 {
				t.Errorf("%s %s #%d: %+v", r.DUT, r.Param, e.Index, e)
			}
			if e.Log != "" {
				t.Logf("%s %s #%d: daemon logs:\n%s", r.DUT, r.Param, e.Index, e.Log)
			}
			if e.Kind == lab.EventUpgrade && (!strings.HasPrefix(e.To, other) || !strings.HasPrefix(e.From, bin)) {
				t.Errorf("%s upgrade from %q to %q, want from %s to %s", r.DUT, e.From, e.To, bin, other)
			}
		}
		t.Logf("%s %s: %d frames, lost %v, flooded none, back after %.0fms", r.DUT, r.Param, rec.Events[0].Sent, r.PerEvent, rec.Events[0].BackMs)
	}
	for _, d := range duts {
		for _, k := range []string{lab.EventSIGKILL, lab.EventSIGTERM, lab.EventUpgrade} {
			for _, test := range []string{lab.TestRestart, TestRestartFlooded} {
				if seen[d+" "+test+" "+k] != 1 {
					t.Errorf("%s: %d %s results for %s, want 1", d, seen[d+" "+test+" "+k], test, k)
				}
			}
		}
	}
	for _, u := range run.Units {
		dir := u.Settings["pinned at"]
		if !strings.HasPrefix(dir, instance.PinRoot+"/") || !ofSocket(filepath.Base(dir), socks) {
			t.Errorf("%s: pinned at %q, not under %s as a daemon of one of %v", u.DUT, dir, instance.PinRoot, socks)
		} else if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: %s left after the run (%v)", u.DUT, dir, err)
		}
	}
	if left := pinnedBy(t, socks); len(left) != 0 {
		t.Errorf("left pinned or recorded after the run: %v", left)
	}
	if left := labtest.Ours(t); len(left) != len(beforeNS) {
		t.Errorf("namespaces left: %v (before: %v)", left, beforeNS)
	}
}

// TestRestartCancelled: Ctrl-C among the events leaves no namespace, no
// process and nothing pinned.
func TestRestartCancelled(t *testing.T) {
	requirePersist(t)
	bin := labtest.TrestleBinary(t)
	sc := lab.Scenario{Name: "test", DUTs: lab.MustSpecs("trestle:xdp"), Hosts: 3, Chain: []int{1}, Sizes: []lab.FrameSize{"64"},
		Tests:      []lab.Kind{Kind{Events: []lab.EventCount{{Kind: lab.EventSIGKILL, Count: 100}}, Lead: 200 * time.Millisecond, Tail: 200 * time.Millisecond}},
		StreamRate: 100e3, Reps: 1, Timing: lab.TinyTiming()}
	beforeNS, work := labtest.Ours(t), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := func(line string) {
		// Cancel in the middle of the third event's stream.
		if strings.Contains(line, "sigkill 3/100") {
			go func() { time.Sleep(300 * time.Millisecond); cancel() }()
		}
	}
	_, err := lab.Execute(ctx, lab.Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: work, Progress: progress})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want the context's", err)
	}
	if left := pinnedBy(t, labSockets(t, work)); len(left) != 0 {
		t.Errorf("left pinned or recorded after a cancelled run: %v", left)
	}
	if left := labtest.Ours(t); len(left) != len(beforeNS) {
		t.Errorf("namespaces left after a cancelled run: %v", left)
	}
}

// TestSweepPins: a lab run killed while its trestle daemon with persist ran
// left a namespace and a pinned datapath; Sweep removes both.
func TestSweepPins(t *testing.T) {
	requirePersist(t)
	bin := labtest.TrestleBinary(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	name := "tl" + strconv.Itoa(cmd.Process.Pid) + "-pins"
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{{"netns", "add", name}, {"-n", name, "link", "add", "sa", "type", "veth", "peer", "name", "sb"},
		{"-n", name, "link", "set", "sa", "up"}, {"-n", name, "link", "set", "sb", "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	dir := t.TempDir()
	sock, cfg := filepath.Join(dir, "s.sock"), filepath.Join(dir, "s.toml")
	conf := fmt.Sprintf("[daemon]\nsocket = %q\npersist = true\n\n[[bridge]]\nname = \"br0\"\n\n[[bridge.port]]\ninterface = \"sa\"\n\n[[bridge.port]]\ninterface = \"sb\"\n", sock)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	d := exec.Command("nsenter", "--net=/run/netns/"+name, "--", bin, "run", "--config", cfg)
	d.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	var st ctl.Status
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ctl.Call(sock, ctl.Request{Cmd: ctl.CmdShow}, &st) == nil && st.PinDir != "" {
			break
		}
	}
	_ = d.Process.Kill()
	_ = d.Wait()
	if st.PinDir == "" {
		t.Fatal("the daemon with persist did not come up")
	}
	if _, err := os.Stat(st.PinDir); err != nil {
		t.Fatalf("nothing pinned at %s: %v", st.PinDir, err)
	}
	gone, err := lab.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(gone, name) || !slices.Contains(gone, st.PinDir) {
		t.Errorf("Sweep removed %v; want %s and %s", gone, name, st.PinDir)
	}
	if _, err := os.Stat(st.PinDir); !os.IsNotExist(err) {
		t.Errorf("%s left after Sweep: %v", st.PinDir, err)
	}
}

// TestOldRecord: a restart result recorded before the registry (its
// events under "restart", as docs/lab/restart.json has them) loads, and
// its section reads its events.
func TestOldRecord(t *testing.T) {
	old := `{"scenario": "restart", "duts": ["linux-bridge"], "results": [{"dut": "linux-bridge", "rep": 1, "chain": 1, "test": "restart", "param": "none", "value": 0, "unit": "frames", "per_event": [0, 0],
	"restart": {"kind": "none", "what": "no daemon to restart", "frame_size": "64", "rate_pps": 480224.2658041311, "throughput_pps": 960448.5316082622, "load": 0.5, "flooding_watched": true, "events": [
	{"kind": "none", "index": 1, "sent": 963890, "dev_dropped": 0, "received": 963890, "lost": 0, "sequence_gaps": 0, "reordered": 0, "duplicated": 0, "flooded": 0, "offered_pps": 480307.38093762344, "seconds": 2.006819046},
	{"kind": "none", "index": 2, "sent": 970551, "dev_dropped": 0, "received": 970551, "lost": 0, "sequence_gaps": 0, "reordered": 0, "duplicated": 0, "flooded": 0, "offered_pps": 480307.0805996644, "seconds": 2.020688512}]}}]}`
	var run lab.Run
	if err := json.Unmarshal([]byte(old), &run); err != nil {
		t.Fatal(err)
	}
	rows := Restarts(&run)
	if len(rows) != 1 || rows[0].Kind != lab.EventNone || rows[0].Load != 0.5 || len(rows[0].Events) != 2 || rows[0].Sum.SentMedian != (963890+970551)/2.0 {
		t.Fatalf("rows of an old run: %+v", rows)
	}
	if term, _ := lab.Sections(&run); len(term) != 1 || !strings.Contains(term[0], "linux-bridge  none") {
		t.Errorf("section of an old run: %q", term)
	}
}
