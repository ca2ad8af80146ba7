package lab

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/trestle/trestle/"

// seams are the packages of the switch's side that the lab may import:
// the wire of the control socket and the leaves shared with the switch.
var seams = map[string]bool{
	"internal/ctl":       true, // the control socket's wire format
	"internal/instance":  true, // instance naming and cleanup
	"internal/netnsutil": true, // namespaces, links, addresses, processes
	"internal/progrun":   true, // the raw BPF_PROG_TEST_RUN call
	"internal/frrconf":   true, // FRR's configuration for the overlay's tests and lab, not the switch's
	"internal/problem":   true, // a configuration's problems, as the wire carries them
	"internal/vlanset":   true, // a VLAN list's text, as the wire writes it
	"internal/frame":     true, // the test frames, which the switch's tests build too
}

// imports is every package of the module, its tests' variants among them
// (go list -test: "P [P.test]"), with what it imports of the module,
// directly or not, all relative to the module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-test", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, modulePath+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	m := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		// A test variant is "P [P.test]": its name, then the bracket.
		name := f[0]
		deps := f[1:]
		if len(deps) > 0 && strings.HasPrefix(deps[0], "[") {
			name += " " + deps[0]
			deps = deps[1:]
		}
		rel, ok := strings.CutPrefix(name, modulePath)
		if !ok {
			continue
		}
		var own []string
		for _, d := range deps {
			if r, ok := strings.CutPrefix(d, modulePath); ok {
				own = append(own, r)
			}
		}
		m[rel] = own
	}
	if len(m) == 0 {
		t.Fatalf("go list listed no package of the module:\n%s", out)
	}
	return m
}

// under says whether pkg (a package, or a test variant "P [P.test]") is
// dir or a package below it.
func under(pkg, dir string) bool {
	pkg, _, _ = strings.Cut(pkg, " ")
	pkg = strings.TrimSuffix(pkg, ".test")
	pkg = strings.TrimSuffix(pkg, "_test")
	return pkg == dir || strings.HasPrefix(pkg, dir+"/")
}

// isTest says whether pkg is a test's variant or its test binary.
func isTest(pkg string) bool { return strings.Contains(pkg, " ") || strings.HasSuffix(pkg, ".test") }

// kindOf is the kind a package of internal/lab/kinds is of ("" for one
// outside, "all" for the list of them).
func kindOf(pkg string) string {
	pkg, _, _ = strings.Cut(pkg, " ")
	rest, ok := strings.CutPrefix(pkg, "internal/lab/kinds/")
	if !ok {
		return ""
	}
	k, _, _ := strings.Cut(rest, "/")
	return strings.TrimSuffix(strings.TrimSuffix(k, ".test"), "_test")
}

// TestImportRules holds the house's walls (docs/architecture.md, "The lab"),
// from what go list says each package imports:
//   - the switch (the datapath, the daemon, the CNI plugin) and its test kit
//     (internal/testutil), tests included, import nothing of the lab;
//   - the lab's packages reach the switch only through its seams: the
//     binary, the control socket's wire package and the leaves shared with
//     the switch, never the daemon, the datapath or the configuration;
//   - the lab's core (internal/lab and its packages outside kinds/) imports
//     no kind: a kind registers itself, and cmd/trestle and the tests
//     import internal/lab/kinds/all;
//   - a kind imports no other kind: what kinds share is the core's.
func TestImportRules(t *testing.T) {
	all := imports(t)
	pkgs := make([]string, 0, len(all))
	for p := range all {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	checked := map[string]int{}
	for _, p := range pkgs {
		for _, d := range all[p] {
			switch {
			case under(p, "internal/datapath") || under(p, "internal/daemon") || under(p, "cmd/trestle-cni") || under(p, "internal/testutil"):
				checked["switch"]++
				if under(d, "internal/lab") {
					t.Errorf("%s imports %s: the switch and its tests import nothing of the lab", p, d)
				}
			case under(p, "internal/lab") && !isTest(p):
				checked["lab"]++
				if !under(d, "internal/lab") && !seams[d] {
					t.Errorf("%s imports %s, the switch's own: the lab reaches it through the binary, internal/ctl or internal/instance", p, d)
				}
				if kindOf(p) == "" && kindOf(d) != "" {
					t.Errorf("%s imports %s: the lab's core imports no kind (a kind registers itself)", p, d)
				}
				if k := kindOf(p); k != "" && k != "all" && kindOf(d) != "" && kindOf(d) != k {
					t.Errorf("%s imports %s: a kind imports no other kind (what they share is the core's)", p, d)
				}
			}
		}
	}
	for _, rule := range []string{"switch", "lab"} {
		if checked[rule] == 0 {
			t.Errorf("no import checked for the %s's rule: the package names moved?", rule)
		}
	}
}
