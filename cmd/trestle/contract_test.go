package main

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
)

// The grammar's contract (errors.go, docs/operations.md): exit statuses,
// the JSON form of a failure, configuration errors one a line with
// FILE:LINE:, check's three ways to name its file, a bridge as the first
// argument.

const goodConfig = "[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"veth-a\"\n"

// badConfig has three problems, on lines 3, 6 and 7.
const badConfig = "[[bridge]]\nname = \"br0\"\naging = \"1ms\"\n[[bridge.port]]\ninterface = \"veth-a\"\nmode = \"fast\"\nmax_macs = -1\n"

func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// refusing is a daemon that refuses every reload with problems of file,
// and fails every other request with a daemon's error.
func refusing(t *testing.T, file string) *fakeCtl {
	return startFake(t, func(req ctl.Request) (any, error) {
		if req.Cmd == ctl.CmdReload {
			return nil, config.Errors{
				{File: file, Line: 3, Field: "bridge[0].aging", Msg: "1ms is out of range 1s..24h"},
				{File: file, Line: 6, Field: "bridge[0].port[0].mode", Msg: `"fast" is not one of auto, xdp, tc`},
			}
		}
		return nil, errors.New(`no bridge "br9"`)
	})
}

// TestExitStatus: each class of failure exits with its status, whatever
// the command.
func TestExitStatus(t *testing.T) {
	good := writeConfig(t, "good.toml", goodConfig)
	bad := writeConfig(t, "bad.toml", badConfig)
	none := map[string]string{"TRESTLE_SOCKET": filepath.Join(t.TempDir(), "none.sock")}
	// A socket file no one listens on: a daemon that stopped left it.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	staleEnv := map[string]string{"TRESTLE_SOCKET": stale}
	ok := startFake(t, func(req ctl.Request) (any, error) {
		switch req.Cmd {
		case ctl.CmdShow:
			return ctl.Status{Bridges: ctl.List[ctl.BridgeStatus]{{Name: "br0"}}}, nil
		case ctl.CmdStats, ctl.CmdRuleShow, ctl.CmdPortList:
			return []any{}, nil
		}
		return nil, nil
	})
	failing := refusing(t, "/etc/trestle/trestle.toml")

	for _, c := range []struct {
		env  map[string]string
		args []string
		want int
	}{
		{nil, []string{"check", good}, exitOK},
		{nil, []string{"--version"}, exitOK},
		{ok.env(), []string{"show", "br0"}, exitOK},
		{ok.env(), []string{"stats", "--json"}, exitOK},
		{ok.env(), []string{"reload"}, exitOK},
		{ok.env(), []string{"fdb", "flush", "br0", "--port", "p1", "--vlan", "0"}, exitOK},

		{failing.env(), []string{"show"}, exitFailed},
		{failing.env(), []string{"fdb", "add", "br9", "02:00:00:00:00:01", "p1"}, exitFailed},
		{failing.env(), []string{"port", "add", "br9", "tap0"}, exitFailed},
		{failing.env(), []string{"fdb", "show"}, exitFailed},
		{ok.env(), []string{"show", "br7"}, exitFailed},
		{nil, []string{"lab", "report", filepath.Join(t.TempDir(), "none.json")}, exitFailed},

		{nil, []string{"bogus"}, exitUsage},
		{nil, []string{"fdb", "bogus"}, exitUsage},
		{nil, []string{"show", "--bogus"}, exitUsage},
		{nil, []string{"events", "-x"}, exitUsage},
		{nil, []string{"capture", "br0"}, exitUsage},
		{nil, []string{"fdb", "add", "br0", "02:00:00:00:00:01"}, exitUsage},
		{nil, []string{"fdb", "flush"}, exitUsage},
		{nil, []string{"rule", "del", "br0", "first"}, exitUsage},
		{nil, []string{"show", "br0", "br1"}, exitUsage},
		{nil, []string{"stats", "--vlan", "70000"}, exitUsage},
		{nil, []string{"fdb", "show", "--vlan", "ten"}, exitUsage},
		{nil, []string{"top", "--interval", "5"}, exitUsage},
		{nil, []string{"top", "--sort", "speed"}, exitUsage},
		{nil, []string{"capture", "br0", "p1", "--direction", "sideways"}, exitUsage},
		{nil, []string{"events", "-n", "-1"}, exitUsage},
		{nil, []string{"stat", "--width", "1"}, exitUsage},
		{nil, []string{"gen"}, exitUsage},
		{nil, []string{"lab", "quick", "--reps", "0"}, exitUsage},
		{nil, []string{"run"}, exitUsage},
		{nil, []string{"check"}, exitUsage},
		{nil, []string{"port", "add", "br0", "tap0", "vlan"}, exitUsage},

		{none, []string{"show"}, exitNoDaemon},
		{none, []string{"stats", "br0"}, exitNoDaemon},
		{none, []string{"fdb", "show", "br0", "--port", "p1"}, exitNoDaemon},
		{none, []string{"capture", "br0", "p1"}, exitNoDaemon},
		{none, []string{"events", "--follow"}, exitNoDaemon},
		{none, []string{"reload"}, exitNoDaemon},
		{staleEnv, []string{"rule", "show"}, exitNoDaemon},
		{staleEnv, []string{"port", "list", "--json"}, exitNoDaemon},

		{nil, []string{"check", bad}, exitRefused},
		{nil, []string{"check", "--json", filepath.Join(t.TempDir(), "none.toml")}, exitRefused},
		{nil, []string{"run", "--config", bad}, exitRefused},
		{nil, []string{"down", "--config", bad}, exitRefused},
		{nil, []string{"reload", "--config", bad}, exitRefused},
		{failing.env(), []string{"reload"}, exitRefused},
	} {
		out, code := runCLI(t, c.env, c.args...)
		if code != c.want {
			t.Errorf("trestle %s: exit %d, want %d\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
	}
}

// failureJSON reads what a failing command printed on stdout with --json:
// exactly one object.
type failureJSON struct {
	OK     *bool          `json:"ok"`
	Error  string         `json:"error"`
	Errors []config.Error `json:"errors"`
}

func decodeFailure(t *testing.T, what, stdout string) failureJSON {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var f failureJSON
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: stdout is not a JSON object: %v\n%s", what, err, stdout)
	}
	if dec.More() {
		t.Errorf("%s: more than one object on stdout:\n%s", what, stdout)
	}
	if f.OK == nil || *f.OK || f.Error == "" || f.Errors == nil {
		t.Errorf("%s: want ok false, an error and a list of errors: %s", what, stdout)
	}
	if !strings.Contains(stdout, `"errors":[`) {
		t.Errorf("%s: errors is not a list: %s", what, stdout)
	}
	return f
}

// TestJSONFailure: with --json, a failure prints one object on stdout,
// whatever failed, and stderr keeps the text.
func TestJSONFailure(t *testing.T) {
	bad := writeConfig(t, "bad.toml", badConfig)
	none := map[string]string{"TRESTLE_SOCKET": filepath.Join(t.TempDir(), "none.sock")}
	failing := refusing(t, "/etc/trestle/trestle.toml")
	for _, c := range []struct {
		env        map[string]string
		args       []string
		problems   int    // configuration problems listed in errors
		wantStderr string // in the text on stderr
	}{
		{nil, []string{"check", "--json", bad}, 3, bad + ":6: bridge[0].port[0].mode"},
		{nil, []string{"check", bad, "--json"}, 3, bad + ":3: bridge[0].aging"},
		{failing.env(), []string{"reload", "--json"}, 2, "/etc/trestle/trestle.toml:6: bridge[0].port[0].mode"},
		{failing.env(), []string{"fdb", "add", "br9", "02:00:00:00:00:01", "p1", "--json"}, 0, `trestle: no bridge "br9"`},
		{none, []string{"show", "--json"}, 0, "trestle: no trestle daemon answers at"},
		{none, []string{"events", "--follow", "--json"}, 0, "no socket there"},
		{nil, []string{"fdb", "show", "--vlan", "4095", "--json"}, 0, "trestle: --vlan \"4095\": not a VLAN: 0 (untagged) to 4094"},
		{nil, []string{"show", "--json", "--bogus"}, 0, "trestle: unknown flag --bogus"},
		{nil, []string{"capture", "br0", "--json"}, 0, "usage: trestle capture BRIDGE PORT"},
		{nil, []string{"top", "--json"}, 0, "--json needs --once"},
		{nil, []string{"lab", "nosuch", "--json"}, 0, `scenario "nosuch"`},
	} {
		what := "trestle " + strings.Join(c.args, " ")
		stdout, stderr, code := runSplit(t, c.env, "", c.args...)
		if code == exitOK {
			t.Errorf("%s: exit 0", what)
			continue
		}
		f := decodeFailure(t, what, stdout)
		if len(f.Errors) != c.problems {
			t.Errorf("%s: %d problems in errors, want %d: %s", what, len(f.Errors), c.problems, stdout)
		}
		for _, e := range f.Errors {
			if e.File == "" || e.Line == 0 || e.Field == "" || e.Msg == "" {
				t.Errorf("%s: an entry of errors without file, line, field or message: %+v", what, e)
			}
		}
		if !strings.Contains(stderr, c.wantStderr) {
			t.Errorf("%s: stderr %q, want %q in it", what, stderr, c.wantStderr)
		}
	}
	// Success objects keep their "ok": true.
	good := writeConfig(t, "good.toml", goodConfig)
	stdout, _, code := runSplit(t, nil, "", "check", "--json", good)
	if code != exitOK || !strings.Contains(stdout, `"ok": true`) {
		t.Errorf("check --json of a good file: %d %s", code, stdout)
	}
}

// fileLine is how every line of a refused configuration starts.
var fileLine = regexp.MustCompile(`^[^:\s]+:[0-9]+: `)

// TestConfigErrorLines: every line of a refusal starts FILE:LINE:, from
// check, run and reload alike; a file that cannot be read says FILE:.
func TestConfigErrorLines(t *testing.T) {
	bad := writeConfig(t, "bad.toml", badConfig)
	failing := refusing(t, "/etc/trestle/trestle.toml")
	for _, c := range []struct {
		env     map[string]string
		args    []string
		lines   int
		summary string // the line that follows them, if any
	}{
		{nil, []string{"check", bad}, 3, ""},
		{nil, []string{"run", "--config", bad}, 3, "trestle: run: the configuration is refused, nothing was started"},
		{failing.env(), []string{"reload"}, 2, "trestle: reload refused, the running state is kept"},
	} {
		what := "trestle " + strings.Join(c.args, " ")
		_, stderr, code := runSplit(t, c.env, "", c.args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != exitRefused || len(lines) < c.lines {
			t.Fatalf("%s: exit %d, stderr %q", what, code, stderr)
		}
		for _, l := range lines[:c.lines] {
			if !fileLine.MatchString(l) {
				t.Errorf("%s: %q does not start FILE:LINE:", what, l)
			}
		}
		if rest := strings.Join(lines[c.lines:], "\n"); rest != c.summary {
			t.Errorf("%s: after the problems %q, want %q", what, rest, c.summary)
		}
	}
	missing := filepath.Join(t.TempDir(), "none.toml")
	_, stderr, code := runSplit(t, nil, "", "check", missing)
	if code != exitRefused || stderr != missing+": cannot read it: no such file or directory\n" {
		t.Errorf("check of a missing file: %d %q", code, stderr)
	}
}

// TestCheckForms: check FILE, check --config FILE and check - (or
// --config -, standard input, named <stdin>) check the same file.
func TestCheckForms(t *testing.T) {
	good := writeConfig(t, "good.toml", goodConfig)
	for _, c := range []struct {
		args  []string
		stdin string
		want  string
		code  int
	}{
		{[]string{"check", good}, "", good + ": ok (1 bridges, 1 ports)\n", exitOK},
		{[]string{"check", "--config", good}, "", good + ": ok (1 bridges, 1 ports)\n", exitOK},
		{[]string{"check", "--config", good, good}, "", good + ": ok (1 bridges, 1 ports)\n", exitOK},
		{[]string{"check", "-"}, goodConfig, "<stdin>: ok (1 bridges, 1 ports)\n", exitOK},
		{[]string{"check", "--config", "-"}, goodConfig, "<stdin>: ok (1 bridges, 1 ports)\n", exitOK},
		{[]string{"check", "-"}, badConfig, "", exitRefused},
		{[]string{"check", "--config", good, "other.toml"}, "", "", exitUsage},
	} {
		what := "trestle " + strings.Join(c.args, " ")
		stdout, stderr, code := runSplit(t, nil, c.stdin, c.args...)
		if code != c.code || stdout != c.want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q", what, code, stdout, stderr, c.code, c.want)
		}
		if c.code == exitRefused && !strings.HasPrefix(stderr, "<stdin>:3: bridge[0].aging: ") {
			t.Errorf("%s: stderr %q, want the problems of <stdin>", what, stderr)
		}
	}
	stdout, _, _ := runSplit(t, nil, "", "check", "--json", "--config", good)
	if !strings.Contains(stdout, `"file": "`+good+`"`) {
		t.Errorf("check --json --config: %s", stdout)
	}
}

// TestShowBridge: show BRIDGE asks for that bridge, and shows it alone
// even from a daemon that answers with every bridge; a bridge that is
// not there is an error.
func TestShowBridge(t *testing.T) {
	f := startFake(t, func(req ctl.Request) (any, error) {
		return ctl.Status{Bridges: ctl.List[ctl.BridgeStatus]{{Name: "br0", ID: 1}, {Name: "br1", ID: 2}}}, nil
	})
	out, code := runCLI(t, f.env(), "show", "br1")
	if code != exitOK || f.last().Bridge != "br1" || !strings.Contains(out, "bridge br1 (id 2)") || strings.Contains(out, "br0") {
		t.Errorf("show br1: %d, sent %+v\n%s", code, f.last(), out)
	}
	stdout, _, code := runSplit(t, f.env(), "", "show", "br0", "--json")
	var st ctl.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || code != exitOK || len(st.Bridges) != 1 || st.Bridges[0].Name != "br0" {
		t.Errorf("show br0 --json: %d %v\n%s", code, err, stdout)
	}
	if out, code := runCLI(t, f.env(), "show", "br9"); code != exitFailed || !strings.Contains(out, `no bridge "br9"`) {
		t.Errorf("show br9: %d %q", code, out)
	}
}

// TestFDBFilters: fdb show's and flush's --port and --vlan reach the
// daemon, and fdb show filters what an older daemon sends whole.
func TestFDBFilters(t *testing.T) {
	f := startFake(t, func(req ctl.Request) (any, error) {
		if req.Cmd == ctl.CmdFDBFlush {
			return map[string]int{"removed": 2}, nil
		}
		return nil, nil
	})
	f.fdb = []ctl.FDBEntry{
		{Bridge: "br0", MAC: "02:00:00:00:00:01", VLAN: 10, Port: "p1"},
		{Bridge: "br0", MAC: "02:00:00:00:00:02", VLAN: 20, Port: "p1"},
		{Bridge: "br0", MAC: "02:00:00:00:00:03", VLAN: 10, Port: "p2"},
		{Bridge: "br0", MAC: "02:00:00:00:00:04", VLAN: 0, Port: "p2"},
	}
	for _, c := range []struct {
		args []string
		port string
		vlan *uint16
		macs []string
	}{
		{[]string{"fdb", "show", "br0"}, "", nil, []string{"04", "01", "03", "02"}}, // by VLAN, then MAC
		{[]string{"fdb", "show", "br0", "--port", "p1"}, "p1", nil, []string{"01", "02"}},
		{[]string{"fdb", "show", "br0", "--vlan", "10"}, "", u16(10), []string{"01", "03"}},
		{[]string{"fdb", "show", "--port", "p2", "--vlan", "0"}, "p2", u16(0), []string{"04"}},
		{[]string{"fdb", "show", "br0", "--port", "p1", "--vlan", "10"}, "p1", u16(10), []string{"01"}},
	} {
		what := "trestle " + strings.Join(c.args, " ")
		stdout, stderr, code := runSplit(t, f.env(), "", append(c.args, "--json")...)
		var es []ctl.FDBEntry
		if err := json.Unmarshal([]byte(stdout), &es); err != nil || code != exitOK {
			t.Errorf("%s: %d %v %s", what, code, err, stderr)
			continue
		}
		var macs []string
		for _, e := range es {
			macs = append(macs, e.MAC[len(e.MAC)-2:])
		}
		req := f.last()
		if strings.Join(macs, " ") != strings.Join(c.macs, " ") || req.Port != c.port || !sameVLAN(req.OnlyVLAN, c.vlan) {
			t.Errorf("%s: entries %v, want %v; sent port %q vlan %v", what, macs, c.macs, req.Port, req.OnlyVLAN)
		}
	}
	out, code := runCLI(t, f.env(), "fdb", "flush", "br0", "--port", "p1", "--vlan", "20")
	if req := f.last(); code != exitOK || req.Cmd != ctl.CmdFDBFlush || req.Bridge != "br0" || req.Port != "p1" || !sameVLAN(req.OnlyVLAN, u16(20)) || out != "removed 2 learned entries\n" {
		t.Errorf("fdb flush br0 --port p1 --vlan 20: %d %q, sent %+v", code, out, req)
	}
	if _, code := runCLI(t, f.env(), "fdb", "flush", "br0"); code != exitOK || f.last().OnlyVLAN != nil || f.last().Port != "" {
		t.Errorf("fdb flush br0: %d, sent %+v", code, f.last())
	}
}

func u16(v uint16) *uint16 { return &v }

func sameVLAN(a, b *uint16) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// TestUsageLine: a wrong number of arguments says so and prints the
// command's usage line; values are refused by flag name and range, never
// with a parser's text.
func TestUsageLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"fdb", "add", "br0"}, []string{"trestle: trestle fdb add takes 3 arguments, 1 given\n", "usage: trestle fdb add BRIDGE MAC PORT [--vlan VLAN] [flags]\n"}},
		{[]string{"show", "a", "b"}, []string{"takes at most 1 argument, 2 given", "usage: trestle show [BRIDGE] [flags]"}},
		{[]string{"events", "now"}, []string{"trestle events takes no arguments (given: now)", "usage: trestle events"}},
		{[]string{"fdb", "add", "br0", "m", "p", "--vlan", "70000"}, []string{`--vlan "70000": not a VLAN: 0 (untagged) to 4094`}},
		{[]string{"capture", "br0", "p1", "-c", "ten"}, []string{`--count "ten": not a whole number`}},
		{[]string{"top", "--interval", "fast"}, []string{`--interval "fast": not a duration such as 500ms, 10s or 2m`}},
		{[]string{"lab", "quick", "--load", "x"}, []string{`--load "x": not a number`}},
		{[]string{"stats", "--per-vlan=maybe"}, []string{`--per-vlan "maybe": not true or false`}},
		{[]string{"fdb", "show", "--vlan"}, []string{"--vlan needs a value"}},
		{[]string{"lab", "quick", "--json", "run.json"}, []string{"--json prints the record on stdout and takes no file: --output run.json writes it there"}},
	} {
		what := "trestle " + strings.Join(c.args, " ")
		_, stderr, code := runSplit(t, nil, "", c.args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d", what, code, exitUsage)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q, want %q in it", what, stderr, w)
			}
		}
		for _, lib := range []string{"strconv", "invalid argument", "parsing", "flag needs"} {
			if strings.Contains(stderr, lib) {
				t.Errorf("%s: a library's words in %q", what, stderr)
			}
		}
	}
}
