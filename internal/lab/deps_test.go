package lab

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLabReachesSwitchOnlyThroughItsSeams holds the lab's wing to its
// seams (docs/architecture.md, "The lab"): the lab's packages reach the
// switch only through the binary, the control socket's wire package and
// the leaf packages shared with the switch, never through the daemon, the
// datapath or the configuration.
func TestLabReachesSwitchOnlyThroughItsSeams(t *testing.T) {
	const module = "github.com/trestle/trestle/"
	shared := map[string]bool{
		"internal/ctl":       true, // the control socket's wire format
		"internal/instance":  true, // instance naming and cleanup
		"internal/netnsutil": true, // namespaces, links, addresses
		"internal/progrun":   true, // the raw BPF_PROG_TEST_RUN call
		"internal/frrconf":   true, // FRR's configuration for the overlay's tests and lab, not the switch's
		"internal/problem":   true, // a configuration's problems, as the wire carries them
		"internal/vlanset":   true, // a VLAN list's text, as the wire writes it
	}
	out, err := exec.Command("go", "list", "-deps", module+"internal/lab/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v: %s", err, out)
	}
	seen := 0
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		seen++
		if rel == "internal/lab" || strings.HasPrefix(rel, "internal/lab/") || shared[rel] {
			continue
		}
		t.Errorf("the lab imports %s (the switch's own: reach it through the binary, internal/ctl or internal/instance)", rel)
	}
	if seen == 0 {
		t.Fatalf("go list -deps listed no package of the module:\n%s", out)
	}
}
