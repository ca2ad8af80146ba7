package datapath

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/mode"
)

// TestBuildInstructions loads every build of the entry points (the matrix
// of bpf/lib/stages.h: VLAN, filter, capture) as the daemon loads it,
// through the datapath's stage switches, in both modes, and reports each
// program's instructions, translated and verified, which a change to bpf/
// puts in its commit (architecture.md, "The build matrix"), and the stack
// of its deepest chain of calls. It fails when a build does not load (the
// tc build with the VLAN stage once came within 3% of the verifier's limit:
// a stage that pushes a build over fails here, not in a daemon that turns
// the stage on), and when one verifies within 10% of the verifier's limit
// of a million instructions: one more stage on that path would not load. With TRESTLE_BPF_OBJ set to another build's object
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
	dp.progLog = ebpf.LogLevelStats
	const limit = 1_000_000
	for _, s := range []stage{{}, {capture: true}, {filter: true}, {filter: true, capture: true},
		{vlan: true}, {vlan: true, capture: true}, {vlan: true, filter: true}, {vlan: true, filter: true, capture: true}} {
		progs, err := buildInstructions(dp, spec, s)
		if err != nil {
			t.Errorf("%s: %v", buildName(s), err)
			continue
		}
		for _, p := range progs {
			t.Logf("%s %-20s %6d translated %9d verified %4d stack (%s)", buildName(s), p.name, p.xlated, p.verified, p.stack, p.chain)
			if p.verified > limit*90/100 {
				t.Errorf("%s %s: %d instructions verified, within 10%% of the verifier's limit", buildName(s), p.name, p.verified)
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
	stack            int    // bytes of the deepest chain of calls, as the verifier sums them
	chain            string // its frames: function:bytes, outermost first
}

// buildInstructions switches dp to build s (a capture, if s has it, on
// an interface of no consequence), loads both its entry points (plus, in
// the plain build, the devmap programs) and reads back what the kernel
// says of each (dp loads with the verifier's stats log, whose stack depths
// spec's calls chain).
func buildInstructions(dp *Datapath, spec *ebpf.CollectionSpec, s stage) ([]progInsns, error) {
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
		funcs, err := info.FuncInfos()
		if err != nil {
			return nil, err
		}
		var loaded []string
		for _, f := range funcs {
			loaded = append(loaded, f.Func.Name)
		}
		depth, chain, err := deepestStack(spec.Programs[name].Instructions, loaded, progs[name].VerifierLog)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, progInsns{name: name, xlated: len(ins), verified: int(v), stack: depth, chain: chain})
	}
	return out, nil
}

// deepestStack is the stack of a program's deepest chain of calls as the
// verifier sums it against its 512 bytes (check_max_stack_depth): each
// function's frame, from the "stack depth" line of its log at
// LogLevelStats (one figure a function, in the order of loaded: the
// functions the kernel kept, those only dead code called removed), rounded
// up to 16 bytes, along the calls of insns (a bpf_loop callback's frame
// counts as a call's). Returns the sum and the chain.
func deepestStack(insns asm.Instructions, loaded []string, log string) (int, string, error) {
	var depths []int
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(line, "stack depth "); ok {
			for _, f := range strings.Split(rest, "+") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return 0, "", fmt.Errorf("verifier log: %q", line)
				}
				depths = append(depths, n)
			}
		}
	}
	calls := map[string][]string{}
	var in string
	for _, ins := range insns {
		if sym := ins.Symbol(); sym != "" {
			in = sym
		}
		if ins.IsFunctionCall() || ins.IsLoadOfFunctionPointer() {
			calls[in] = append(calls[in], ins.Reference())
		}
	}
	names := loaded
	if len(depths) != len(names) {
		return 0, "", fmt.Errorf("%d functions, %d stack depths in the verifier's log", len(names), len(depths))
	}
	frame := map[string]int{}
	for i, n := range names {
		frame[n] = (depths[i] + 15) &^ 15
	}
	type best struct {
		sum   int
		chain []string
	}
	memo := map[string]best{}
	var deepest func(f string) best
	deepest = func(f string) best {
		if b, ok := memo[f]; ok {
			return b
		}
		var under best
		for _, g := range calls[f] {
			if b := deepest(g); b.sum > under.sum {
				under = b
			}
		}
		b := best{frame[f] + under.sum, append([]string{fmt.Sprintf("%s:%d", f, frame[f])}, under.chain...)}
		memo[f] = b
		return b
	}
	b := deepest(names[0])
	return b.sum, strings.Join(b.chain, " "), nil
}
