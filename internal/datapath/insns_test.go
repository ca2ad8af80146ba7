package datapath

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// TestBuildInstructions loads every build of the entry points (the matrix
// of bpf/lib/stages.h: VLAN, filter, capture) as the daemon loads it and
// reports each program's instructions, translated and verified, which a
// change to bpf/ puts in its commit (architecture.md, "The build matrix").
// It fails when a build verifies within 5% of the verifier's limit of a
// million instructions: one more stage on that path would not load. With
// TRESTLE_BPF_OBJ set to another build's object (a previous
// internal/bpf/trestle_bpfel.o), it reports that build's instead, for the
// before and after of a change: go test ./internal/datapath -run
// TestBuildInstructions -v.
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
	const limit = 1_000_000
	for _, s := range []stage{{}, {capture: true}, {filter: true}, {filter: true, capture: true},
		{vlan: true}, {vlan: true, capture: true}, {vlan: true, filter: true}, {vlan: true, filter: true, capture: true}} {
		progs, err := buildInstructions(spec, s)
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

// buildInstructions loads build s of spec's entry points on maps of their
// own (plus, in the plain build, the devmap programs) and reads back what
// the kernel says of each.
func buildInstructions(spec *ebpf.CollectionSpec, s stage) ([]progInsns, error) {
	spec = spec.Copy()
	for _, c := range stageConsts {
		v, ok := spec.Variables[c.name]
		if !ok {
			if c.on(s) {
				return nil, fmt.Errorf("this build has no %s", c.what)
			}
			continue
		}
		var b uint8
		if c.on(s) {
			b = 1
		}
		if err := v.Set(b); err != nil {
			return nil, err
		}
	}
	keep := []string{tbpf.TrestleProgTrestleXdp, tbpf.TrestleProgTrestleTc}
	if s.filter {
		keep = []string{tbpf.TrestleProgTrestleXdpFilter, tbpf.TrestleProgTrestleTcFilter}
	}
	if s == (stage{}) {
		keep = append(keep, tbpf.TrestleProgTrestlePatchEgress, tbpf.TrestleProgTrestleVlanEgress)
	}
	want := map[string]bool{}
	for _, n := range keep {
		want[n] = true
	}
	for name := range spec.Programs {
		if !want[name] {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%+v", ve)
		}
		return nil, err
	}
	defer coll.Close()
	var out []progInsns
	for _, name := range keep {
		p := coll.Programs[name]
		if p == nil {
			return nil, fmt.Errorf("no program %s", name)
		}
		info, err := p.Info()
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
