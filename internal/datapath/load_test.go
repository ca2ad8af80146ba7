package datapath

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/testutil"
)

// TestProgramsLoadWhenAsked: a Load has the verifier check no program; an
// entry point is loaded by the first use of its mode, once; a stage
// switched on loads the modes the build it leaves holds, and no other; a
// devmap program or the overlay's way in is loaded by its first use. An
// entry point the verifier refuses fails the call that asked for it, with
// the verifier's log, is not tried again, and holds back neither the other
// mode nor the switches.
func TestProgramsLoadWhenAsked(t *testing.T) {
	testutil.RequireRoot(t)
	spec, err := tbpf.LoadTrestle()
	if err != nil {
		t.Fatal(err)
	}
	// A tc entry point the verifier refuses: it never exits.
	tc := spec.Programs[tbpf.TrestleProgTrestleTc]
	tc.Instructions = asm.Instructions{asm.Mov.Imm(asm.R0, 0).WithSymbol(tc.Name)}
	dp, err := Load(Options{FDBCapacity: 1024, Refresh: time.Hour, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if len(dp.progs) != 0 || len(dp.aux) != 0 {
		t.Errorf("a Load loaded programs: builds %v, others %v", dp.progs, dp.aux)
	}
	xdp, err := dp.Program(mode.XDP)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := dp.Program(mode.XDP); again != xdp || err != nil {
		t.Errorf("the xdp entry point asked for again: %v (%v), want the one loaded", again, err)
	}
	_, refusal := dp.Program(mode.TC)
	var ve *ebpf.VerifierError
	if !errors.As(refusal, &ve) || !strings.Contains(refusal.Error(), "\n\tprocessed 0 insns") {
		t.Fatalf("a tc entry point the verifier refuses: %v, want its refusal with the log", refusal)
	}
	if _, err := dp.Program(mode.TC); err != refusal {
		t.Errorf("asked again: %v, want the first refusal, not another load", err)
	}
	if got := dp.progs[stage{}].modes(); !slices.Equal(got, []mode.Mode{mode.XDP}) {
		t.Errorf("the plain build holds %v, want xdp alone", got)
	}
	if err := dp.SetVLANStage(true); err != nil {
		t.Fatal(err)
	}
	if got := dp.progs[stage{vlan: true}].modes(); !slices.Equal(got, []mode.Mode{mode.XDP}) {
		t.Errorf("the switch to the VLAN stage loaded %v, want xdp, the mode the plain build held", got)
	}
	if len(dp.aux) != 0 {
		t.Errorf("devmap programs loaded before a flood set needed them: %v", dp.aux)
	}
	if _, err := dp.ViaProgram(); err != nil {
		t.Fatal(err)
	}
	if _, ok := dp.aux[tbpf.TrestleProgTrestleVia]; !ok || len(dp.aux) != 1 {
		t.Errorf("after ViaProgram: %v, want trestle_via alone", dp.aux)
	}
}
