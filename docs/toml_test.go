package docs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/config"
)

// A TOML block of the documents is a fenced block whose info string starts
// with toml. It is a whole file, checked as `trestle check` checks one
// (config.Parse), unless its info string marks it a fragment of a table:
//
//	```toml fragment=bridge
//
// says the block is the inside of one [[bridge]]: its keys and its
// [[bridge.port]], [[bridge.rule]] ... tables. Its first line is a comment
// that tells the reader so ("# inside a [[bridge]]"), since the marker
// does not show. The test checks it inside
// the table it names, opened with the keys the table requires that the
// block does not set (an example value of each, from the key table), and
// every table above it, opened the same way. GitHub takes the info
// string's first word for the language and shows no more of it.
type tomlBlock struct {
	file     string
	line     int    // of the block's first line of TOML
	fragment string // the table path, or "" for a whole file
	text     string
}

var (
	fence = regexp.MustCompile("^ {0,3}(```+)\\s*(.*?)\\s*$")
	// A line that opens a table of trestle's file: a block holding one
	// is TOML, whatever its info string says.
	tomlHeader = regexp.MustCompile(`(?m)^\s*\[\[?(daemon|bridge)[\].]`)
	topKey     = regexp.MustCompile(`^\s*([A-Za-z0-9_-]+)\s*=`)
)

// tomlBlocks returns the TOML blocks of a Markdown file, and a problem for
// each block without an info string that holds TOML, or a fragment
// marker that names no table.
func tomlBlocks(file, text string) (blocks []tomlBlock, problems []string) {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		ticks, info, start := m[1], m[2], i+1
		for i++; i < len(lines); i++ {
			if c := fence.FindStringSubmatch(lines[i]); c != nil && len(c[1]) >= len(ticks) && c[2] == "" {
				break
			}
		}
		body := strings.Join(lines[start:min(i, len(lines))], "\n") + "\n"
		words := strings.Fields(info)
		if len(words) == 0 || words[0] != "toml" {
			if len(words) == 0 && tomlHeader.MatchString(body) {
				problems = append(problems, fmt.Sprintf("%s:%d: a block of TOML without an info string: mark it toml", file, start))
			}
			continue
		}
		b := tomlBlock{file: file, line: start + 1, text: body}
		for _, w := range words[1:] {
			path, ok := strings.CutPrefix(w, "fragment=")
			if !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: info string %q: %q is not fragment=TABLE", file, start, info, w))
				continue
			}
			if t := config.TableOf(path); t == nil || t.Inline {
				problems = append(problems, fmt.Sprintf("%s:%d: fragment=%s: no such table of the file", file, start, path))
				continue
			}
			b.fragment = path
		}
		if b.fragment != "" && !strings.Contains(strings.SplitN(body, "\n", 2)[0], config.TableOf(b.fragment).Header()) {
			problems = append(problems, fmt.Sprintf("%s:%d: a fragment of %s whose first line, a comment, does not tell the reader so", file, start+1, config.TableOf(b.fragment).Header()))
		}
		blocks = append(blocks, b)
	}
	return blocks, problems
}

// wrap returns the block as a file, and how many lines come before the
// block's own.
func (b tomlBlock) wrap() (string, int) {
	if b.fragment == "" {
		return b.text, 0
	}
	set := map[string]bool{} // the keys the block sets before its first table
	for _, l := range strings.Split(b.text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "[") {
			break
		}
		if m := topKey.FindStringSubmatch(l); m != nil {
			set[m[1]] = true
		}
	}
	var w strings.Builder
	parts := strings.Split(b.fragment, ".")
	for i := range parts {
		t := config.TableOf(strings.Join(parts[:i+1], "."))
		w.WriteString(t.Header() + "\n")
		for _, k := range t.Keys {
			if k.Required && (i < len(parts)-1 || !set[k.Name]) {
				fmt.Fprintf(&w, "%s = %s\n", k.Name, k.Example)
			}
		}
	}
	return w.String() + b.text, strings.Count(w.String(), "\n")
}

// isRecord: a report `trestle lab` wrote (docs/lab/SCENARIO/report.md) is
// the record of a run, with the config its build ran; a later build may
// refuse it, and the record stays as it was.
func isRecord(f string) bool {
	return filepath.Base(f) == "report.md" && strings.HasPrefix(filepath.ToSlash(f), "lab/")
}

// TestTOMLBlocks: every TOML block of README.md and docs/ passes `trestle
// check` as written, or, marked a fragment of a table, inside that table.
// A problem is reported at its line in the document.
func TestTOMLBlocks(t *testing.T) {
	n := 0
	for _, f := range markdownFiles(t) {
		if isRecord(f) {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, problems := tomlBlocks(f, string(data))
		for _, p := range problems {
			t.Error(p)
		}
		for _, b := range blocks {
			n++
			text, before := b.wrap()
			_, err := config.Parse(b.file, []byte(text))
			var errs config.Errors
			if err == nil {
				continue
			}
			if !errors.As(err, &errs) {
				t.Errorf("%s:%d: %v", b.file, b.line, err)
				continue
			}
			what := "the block"
			if b.fragment != "" {
				what = "the block, in a " + config.TableOf(b.fragment).Header() + ","
			}
			for _, e := range errs {
				line := b.line
				if e.Line > before {
					line += e.Line - before - 1
				}
				t.Errorf("%s:%d: %s fails trestle check: %s: %s", b.file, line, what, e.Field, e.Msg)
			}
		}
	}
	if n == 0 {
		t.Fatal("no TOML block found: the test reads nothing")
	}
}

// TestTOMLFragment: a fragment is checked inside its table, with the keys
// the table requires filled in where the block leaves them out, and a
// problem is reported at the document's line.
func TestTOMLFragment(t *testing.T) {
	doc := "text\n```toml fragment=bridge\n# in [[bridge]]\n[[bridge.port]]\ninterface = \"p1\"\nmode = \"fast\"\n```\n" +
		"```toml fragment=bridge.port\n# [[bridge.port]]\ninterface = \"p2\"\n```\n" +
		"```toml fragment=bridge\n# [[bridge]]\nname = \"br1\"\n```\n" +
		"```toml fragment=bridge.nothing\n```\n" +
		"```toml fragment=bridge\nname = \"br2\"\n```\n" +
		"```\n[[bridge]]\n```\n"
	blocks, problems := tomlBlocks("x.md", doc)
	if len(blocks) != 5 || len(problems) != 3 {
		t.Fatalf("blocks %d, problems %q; want 5 blocks and 3 problems", len(blocks), problems)
	}
	text, before := blocks[0].wrap()
	var errs config.Errors
	if _, err := config.Parse("x.md", []byte(text)); !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("fragment with a bad mode: %v, want one error", err)
	}
	if got := blocks[0].line + errs[0].Line - before - 1; got != 6 {
		t.Errorf("bad mode reported at line %d of the document, want 6", got)
	}
	for _, b := range blocks[1:3] {
		if text, _ := b.wrap(); !strings.Contains(text, "\n") {
			t.Errorf("wrap %q: %q", b.text, text)
		} else if _, err := config.Parse("x.md", []byte(text)); err != nil {
			t.Errorf("fragment %q, wrapped as %q: %v", b.text, text, err)
		}
	}
	if text, _ := blocks[2].wrap(); strings.Count(text, "name =") != 1 {
		t.Errorf("a fragment that names its bridge got a second name: %q", text)
	}
}
