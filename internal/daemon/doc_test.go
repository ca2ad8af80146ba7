package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocNamesEveryFile keeps the package's map true: every file of the
// package (tests aside) is named in doc.go's Files, and every file named
// there exists, so that a file added, split or renamed says where it goes.
func TestDocNamesEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "doc.go" {
			continue
		}
		have[f] = true
		if !strings.Contains(text, " "+f) && !strings.Contains(text, "("+f) {
			t.Errorf("doc.go does not name %s: say in its Files what the file holds", f)
		}
	}
	for _, w := range strings.Fields(text) {
		w = strings.Trim(w, "(),.;:")
		if strings.HasSuffix(w, ".go") && !strings.Contains(w, "/") && !have[w] && w != "doc.go" {
			t.Errorf("doc.go names %s, which is no file of the package", w)
		}
	}
}
