package datapath

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/mode"
)

// TestBuildInstructions loads every build of the entry points (the matrix
// of bpf/lib/stages.h: VLAN, filter, capture) as the daemon loads it,
// through the datapath's stage switches, in both modes, and reports each
// program's instructions, translated and verified, which a change to bpf/
// puts in its commit (architecture.md, "The build matrix"). It fails when a
// build does not load (the tc build with the VLAN stage once came within
// 3% of the verifier's limit: a stage that pushes a build over fails here,
// not in a daemon that turns the stage on), and when one verifies within 5%
// of the verifier's limit of a million instructions: one more stage on that
// path would not load. With TRESTLE_BPF_OBJ set to another build's object
// (a previous internal/bpf/trestle_bpfel.o), it reports that build's
// instead, for the before and after of a change: go test
// ./internal/datapath -run TestBuildInstructions -v.
func TestBuildInstructions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading programs needs root")
	}
	spec, err := tbpf.LoadTrestle()
	if path := os.Getenv("TRESTLE_BPF_OBJ"); path != "" {
		spec, err = ebpf.LoadCollectionSpec(path)
	}
	if err != nil {
		t.Fatal(err)
	}
	dp, err := Load(Options{FDBCapacity: 1024, Refresh: time.Hour, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	const limit = 1_000_000
	for _, s := range []stage{{}, {capture: true}, {filter: true}, {filter: true, capture: true},
		{vlan: true}, {vlan: true, capture: true}, {vlan: true, filter: true}, {vlan: true, filter: true, capture: true}} {
		progs, err := buildInstructions(dp, s)
		if err != nil {
			t.Errorf("%s: %v", buildName(s), err)
			continue
		}
		for _, p := range progs {
			t.Logf("%s %-20s %6d translated %9d verified", buildName(s), p.name, p.xlated, p.verified)
			if p.verified > limit*95/100 {
				t.Errorf("%s %s: %d instructions verified, within 5%% of the verifier's limit", buildName(s), p.name, p.verified)
			}
		}
	}
}

func buildName(s stage) string {
	b := func(on bool) int {
		if on {
			return 1
		}
		return 0
	}
	return fmt.Sprintf("vlan %d filter %d capture %d", b(s.vlan), b(s.filter), b(s.capture))
}

type progInsns struct {
	name             string
	xlated, verified int
}

// buildInstructions switches dp to build s (a capture, if s has it, on
// an interface of no consequence), loads both its entry points (plus, in
// the plain build, the devmap programs) and reads back what the kernel
// says of each.
func buildInstructions(dp *Datapath, s stage) ([]progInsns, error) {
	if err := dp.SetVLANStage(s.vlan); err != nil {
		return nil, err
	}
	if err := dp.SetFilterStage(s.filter); err != nil {
		return nil, err
	}
	if s.capture {
		c, err := dp.StartCapture(CaptureSpec{Ifindex: 1, Bridge: 1, In: true, Out: true})
		if err != nil {
			return nil, err
		}
		defer c.Close()
	}
	progs := map[string]*ebpf.Program{}
	var names []string
	for _, m := range []mode.Mode{mode.XDP, mode.TC} {
		p, err := dp.Program(m)
		if err != nil {
			return nil, err
		}
		names = append(names, entryName(s, m))
		progs[entryName(s, m)] = p
	}
	if s == (stage{}) {
		for _, name := range []string{tbpf.TrestleProgTrestlePatchEgress, tbpf.TrestleProgTrestleVlanEgress} {
			p, err := dp.auxProgram(name)
			if err != nil {
				return nil, err
			}
			names = append(names, name)
			progs[name] = p
		}
	}
	var out []progInsns
	for _, name := range names {
		info, err := progs[name].Info()
		if err != nil {
			return nil, err
		}
		ins, err := info.Instructions()
		if err != nil {
			return nil, err
		}
		v, _ := info.VerifiedInstructions()
		out = append(out, progInsns{name: name, xlated: len(ins), verified: int(v)})
	}
	return out, nil
}
