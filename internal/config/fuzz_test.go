package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse feeds any bytes to the config parser as a file. What must hold
// for every input:
//
//   - no panic, and a config or errors, never both and never neither;
//
//   - the errors are an Errors of *Error, sorted by line, each naming the
//     file, with a message, and a field unless it is a TOML syntax error;
//
//   - each names a line of the file (1 up to its last line), but for the
//     one problem with the file as a whole, that it has no [[bridge]] at
//     all, which has no line to name and reads "FILE: bridge: ...";
//
//   - Parse is a function of its input: the same bytes, the same answer.
//
//     go test -run '^$' -fuzz '^FuzzParse$' ./internal/config
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/*.toml", "../../dist/*.toml"} {
		files, _ := filepath.Glob(p)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		"",
		"[[bridge]]\n",
		"[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"a\"\nvlan = 10\n[[bridge.port]]\ninterface = \"b\"\ntrunk = [10, \"20-29\"]\nnative = 10\n",
		"[[bridge]]\nname = \"b1\"\n[[bridge.port]]\npatch = \"b2\"\n[[bridge]]\nname = \"b2\"\n[[bridge.port]]\npatch = \"b1\"\n",
		"[[bridge]]\nname = \"br0\"\nfilter = true\ndefault = \"block\"\n[[bridge.port]]\ninterface = \"a\"\n[[bridge.rule]]\naction = \"pass\"\nproto = \"tcp\"\ndst_port = \"22\"\nkeep_state = true\n",
		"[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"a\"\n[[bridge.static]]\nmac = \"02:00:00:00:00:01\"\nport = \"a\"\n[[bridge.mirror]]\nname = \"m\"\nports = [\"a\"]\nto = \"b\"\n",
		"bridge = 1\n",
		"[daemon]\nsocket = \"rel\"\n",
		"a = [[1,2],[3]]\n[b]\nc.d = 1\n",
		"[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"a\"\nstorm = { broadcast = -1 }\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.toml", data)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("config %v and error %v: want exactly one", cfg != nil, err)
		}
		if err != nil {
			checkFuzzErrors(t, data, err)
		} else if len(cfg.Bridges) == 0 {
			t.Fatalf("a config without bridges was accepted")
		}
		cfg2, err2 := Parse("fuzz.toml", data)
		if fmt.Sprint(err) != fmt.Sprint(err2) || !reflect.DeepEqual(cfg, cfg2) {
			t.Fatalf("two parses of the same bytes differ:\n%v\n%v", err, err2)
		}
	})
}

// checkFuzzErrors checks what Parse said of a file it refused.
func checkFuzzErrors(t *testing.T, data []byte, err error) {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("error %T %q is not a non-empty Errors", err, err)
	}
	lines := bytes.Count(data, []byte("\n")) + 1
	for i, e := range es {
		if e == nil {
			t.Fatalf("error %d is nil", i)
		}
		if e.File != "fuzz.toml" || e.Msg == "" {
			t.Errorf("error %q: names file %q, message %q", e, e.File, e.Msg)
		}
		syntax := strings.HasPrefix(e.Msg, "invalid TOML")
		if e.Field == "" && !syntax {
			t.Errorf("error %q names no field", e)
		}
		switch {
		case e.Line == 0 && e.Field == "bridge" && strings.HasPrefix(e.Msg, "at least one [[bridge]]"):
			// The file as a whole: no bridge key anywhere to point at.
		case e.Line < 1 || e.Line > lines:
			t.Errorf("error %q names line %d; the file has lines 1..%d", e, e.Line, lines)
		}
		if i > 0 && es[i-1].Line > e.Line {
			t.Errorf("errors out of line order: %q before %q", es[i-1], e)
		}
		want := fmt.Sprintf("fuzz.toml:%d: ", e.Line)
		if e.Line == 0 {
			want = "fuzz.toml: "
		}
		if s := e.Error(); !strings.HasPrefix(s, want) {
			t.Errorf("error %q does not start %q", s, want)
		}
	}
}
