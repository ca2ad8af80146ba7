package lab_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
)

func TestMirrorScenario(t *testing.T) {
	s := checkVariantScenario(t, "mirror", "mirror", []string{"trestle:xdp", "trestle", "linux-bridge", "ovs"}, 30*time.Minute,
		"span port", "tc mirred", "Mirror row", "trestle capture", "trestle:xdp@mirror at least 0.9x floor@mirror", "trestle@mirror at least 0.6x trestle:", "span 64B: trestle:xdp@mirror at least 100% of h2's", "span: the span host's frames")
	for _, d := range []string{"trestle:xdp@capture", "trestle@capture"} {
		if !slices.Contains(SpecTexts(s.DUTs), d) {
			t.Errorf("%s not in %v", d, s.DUTs)
		}
	}
	if sh := s.Shape(MustSpec("trestle@mirror"), 1); sh.Hosts != 3 || sh.Chain != 1 {
		t.Errorf("shape %+v, want 3 hosts on one bridge", sh)
	}
}

// mirrorScenario is the mirror scenario at a tiny scale: 64-byte
// throughput on a 3-port bridge, one repetition, at tinyTiming.
func mirrorScenario(duts []string) Scenario {
	return Scenario{Name: "test", DUTs: MustSpecs(duts...), Hosts: 3, Chain: []int{1}, Sizes: []FrameSize{"64"},
		Tests: TestsOf(TestThroughput), Reps: 1, Timing: TinyTiming()}
}

// runMirror runs duts through mirrorScenario and checks every unit as
// runUnits does, and with a mirror, that its mirror check passed and the
// span host received copies at the throughput rate; with a capture, that
// the capture ran and left the ports' programs as it found them.
func runMirror(t *testing.T, bin string, duts []string, allowed map[string]string) map[string]UnitRecord {
	t.Helper()
	return runUnits(t, bin, mirrorScenario(duts), allowed, func(d string, u UnitRecord, f map[string]float64) {
		v, _ := ParseSpec(d)
		if _, ok := f[TestSpan]; ok != v.Mirror {
			t.Errorf("%s: a span figure %v, a mirror %v", d, ok, v.Mirror)
		}
		if v.Mirror {
			if !strings.HasPrefix(u.Settings["mirror check"], "passed") || !strings.Contains(u.Settings["variant: mirror"], "p1 mirrored (direction both") {
				t.Errorf("%s: mirror %q, check %q", d, u.Settings["variant: mirror"], u.Settings["mirror check"])
			}
			// The search allows tinyTiming's loss: the span host must
			// have most of h2's frames, not all.
			if f[TestSpan] < 50 {
				t.Errorf("%s: the span host received %.3f%% of h2's frames at the throughput rate", d, f[TestSpan])
			}
		}
		if v.Capture && !strings.Contains(u.Settings["capture programs"], "no program change left behind") {
			t.Errorf("%s: capture programs %q", d, u.Settings["capture programs"])
		}
	})
}

// TestExecuteMirror runs the Linux bridge with and without its tc mirror
// for a very short trial each.
func TestExecuteMirror(t *testing.T) {
	RequireRoot(t)
	runMirror(t, "", []string{"linux-bridge", "linux-bridge@mirror"}, nil)
}

// TestExecuteMirrorOVS is TestExecuteMirror for Open vSwitch's mirror, in
// make test's timed phase (TEST_TIMED, as TestExecuteOVS).
func TestExecuteMirrorOVS(t *testing.T) {
	RequireRoot(t)
	if err := OVSAvailable(); err != nil {
		t.Skip(err)
	}
	runMirror(t, "", []string{"ovs@mirror"}, nil)
}

// TestExecuteMirrorTrestle is TestExecuteMirror for trestle in both modes,
// and trestle capturing. A build that takes no mirrors, or has no capture
// command, must say so as the DUT being unavailable.
func TestExecuteMirrorTrestle(t *testing.T) {
	RequireRoot(t)
	bin := TrestleBinary(t)
	allowed := map[string]string{}
	if !TrestleTakesMirrors(t, bin) {
		allowed["trestle:xdp@mirror"], allowed["trestle@mirror"] = "takes no mirrors", "takes no mirrors"
	}
	if out, err := exec.Command(bin, "capture", "--help").CombinedOutput(); err != nil {
		t.Logf("this trestle has no capture command: %v: %s", err, strings.TrimSpace(string(out)))
		allowed["trestle:xdp@capture"] = "has no capture command"
	}
	runMirror(t, bin, []string{"trestle:xdp@mirror", "trestle@mirror", "trestle:xdp@capture"}, allowed)
}

// TestExecuteCaptureStandIn runs trestle:xdp@capture with a build whose
// capture command is a stand-in that runs until SIGINT and then reports:
// the lab starts it in the DUT namespace, measures while it runs, stops it
// by its PID and records what it said, whether or not the real command
// has landed.
func TestExecuteCaptureStandIn(t *testing.T) {
	RequireRoot(t)
	bin := TrestleBinary(t)
	standIn := filepath.Join(t.TempDir(), "trestle-capture-stand-in")
	script := `#!/bin/sh
if [ "$1" = capture ]; then
	[ "$2" = --help ] && { echo "stand-in capture"; exit 0; }
	echo "stand-in capturing: $*"
	trap 'echo "stand-in capture: 0 frames, stopped by SIGINT"; exit 0' INT
	while :; do sleep 0.05; done
fi
exec ` + bin + ` "$@"
`
	if err := os.WriteFile(standIn, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dut := "trestle:xdp@capture,bin=" + standIn
	u := runMirror(t, bin, []string{dut}, nil)[dut]
	if !strings.HasPrefix(u.Settings["capture"], "trestle capture br1 p1 -w /dev/null --socket ") {
		t.Errorf("capture %q", u.Settings["capture"])
	}
	if r := u.Settings["capture report"]; !strings.Contains(r, "stand-in capturing: capture br1 p1") || !strings.Contains(r, "stopped by SIGINT") {
		t.Errorf("capture report %q", r)
	}
}
