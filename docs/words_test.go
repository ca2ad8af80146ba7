package docs

import (
	"os"
	"strings"
	"testing"
)

// TestWords: README.md and docs/ speak of features and releases, never of
// the tracker's numbers or the seed files, and hold no machine's paths
// (Unfit). The reports `trestle lab` wrote into docs/lab/ are records of
// past runs (isRecord), which keep their provenance.
func TestWords(t *testing.T) {
	for _, f := range markdownFiles(t) {
		if isRecord(f) {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := Unfit.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: %s", f, i+1, strings.TrimSpace(m), strings.TrimSpace(line))
			}
		}
	}
}

// TestUnfit: what Unfit finds, and what it lets be.
func TestUnfit(t *testing.T) {
	for _, s := range []string{"(issue 14)", "issues 5 and 10", "Issue #29's checks", "seed 003", "(seed 000)", "Seed 001's formula",
		"003_3e6f4237fce17ad8.txt", "see #12", "flock /work/bench.lock", "bin=/root/trestle", "`/home/me/x`"} {
		if !Unfit.MatchString(s) {
			t.Errorf("Unfit lets %q be", s)
		}
	}
	for _, s := range []string{"the fuzz targets' seeds", "a random seed", "docs/lab.md#3-the-search", "/usr/share/doc/trestle", "RFC 2544", "/run/trestle/trestle.sock", "tissue 5"} {
		if Unfit.MatchString(s) {
			t.Errorf("Unfit finds %q in %q", Unfit.FindString(s), s)
		}
	}
}
