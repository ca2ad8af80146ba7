package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPluginImportsNoConfig holds the CNI plugin to its seams
// (docs/architecture.md, "The tree"): it speaks to the daemon through the
// control socket's wire package and takes the switch's limits from the
// generated constants, so it carries none of the configuration's checker,
// nor the daemon, the datapath or the lab. A port key it writes is checked
// by the daemon, with the file's messages.
func TestPluginImportsNoConfig(t *testing.T) {
	const module = "github.com/trestle/trestle/"
	allowed := map[string]bool{
		"cmd/trestle-cni":    true,
		"internal/ctl":       true, // the control socket's wire format
		"internal/problem":   true, // a configuration's problems, as the wire carries them
		"internal/vlanset":   true, // a VLAN list's text, as the wire writes it
		"internal/linklocal": true, // the EUI-64 link-local address ipguard binds
		"internal/bpf":       true, // the datapath's limits, generated from bpf/types.h
	}
	out, err := exec.Command("go", "list", "-deps", module+"cmd/trestle-cni").CombinedOutput()
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
		if rel == "internal/config" || strings.HasPrefix(rel, "internal/config/") {
			t.Errorf("the CNI plugin imports %s: take limits from internal/bpf's generated constants, and leave port keys to the daemon's check", rel)
		} else if !allowed[rel] {
			t.Errorf("the CNI plugin imports %s, which is not one of its seams (the wire package, the leaves it shares, the generated constants)", rel)
		}
	}
	if seen == 0 {
		t.Fatalf("go list -deps listed no package of the module:\n%s", out)
	}
}
