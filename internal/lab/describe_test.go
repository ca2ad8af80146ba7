package lab_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all" // every kind, as `trestle lab` has them
)

var update = flag.Bool("update", false, "rewrite testdata/describe.golden")

// TestDescribeGolden: every scenario's description (`trestle lab NAME
// --help`) and the list of them (`trestle lab --help`) stay as they are,
// whatever moves behind them.
func TestDescribeGolden(t *testing.T) {
	var b strings.Builder
	b.WriteString(DescribeScenarios())
	for _, n := range ScenarioNames() {
		b.WriteString("\n" + Scenarios[n].Describe())
	}
	golden := filepath.Join("testdata", "describe.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (write it with -update)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the scenarios' descriptions differ from %s:\n%s", golden, got)
	}
}
