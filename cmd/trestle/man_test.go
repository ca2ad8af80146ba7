package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/docs"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/lab"
)

// TestMain lets the test binary be trestle itself (TRESTLE_AS_MAIN=1), so
// that a shell's completion script can run it as a program.
func TestMain(m *testing.M) {
	if os.Getenv("TRESTLE_AS_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

func testRoot() *cobra.Command {
	e := &env{stdout: new(bytes.Buffer), stderr: new(bytes.Buffer), getenv: func(string) string { return "" }}
	return e.rootCmd()
}

// commands is every command of the tree a user can run, with its man page's
// name: trestle(8), trestle-fdb-show(8), ...
func commands(c *cobra.Command, into map[string]*cobra.Command) {
	if !c.IsAvailableCommand() && c.HasParent() {
		return
	}
	into[strings.ReplaceAll(c.CommandPath(), " ", "-")] = c
	for _, sub := range c.Commands() {
		commands(sub, into)
	}
}

// layoutWarning is what groff says of a line too long for the page
// (a long example); anything else it says is a fault of the page.
var layoutWarning = regexp.MustCompile(`warning .*(cannot adjust line|can't break line)`)

// TestManPages writes the man pages as `make build` does and renders each
// with man -l: every command of the tree has its page, every page renders
// with no complaint but a long line's, and trestle.toml(5) has every key of
// the config's key table under its table.
func TestManPages(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("no man (make test's deps install man-db)")
	}
	dir := t.TempDir()
	root := testRoot()
	n, err := writeManPages(root, dir, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), DocDir)
	if err != nil {
		t.Fatal(err)
	}
	cmds := map[string]*cobra.Command{}
	commands(root, cmds)
	for name := range cmds {
		if _, err := os.Stat(filepath.Join(dir, name+".8")); err != nil {
			t.Errorf("command %q has no man page: %v", strings.ReplaceAll(name, "-", " "), err)
		}
	}
	if n != len(cmds)+1 {
		t.Errorf("%d pages for %d commands and trestle.toml(5)", n, len(cmds))
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.[58]"))
	for _, p := range pages {
		cmd := exec.Command("man", "-l", p)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "LC_ALL=C.UTF-8")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Errorf("man -l %s: %v\n%s", filepath.Base(p), err, errb.String())
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
			if l != "" && !layoutWarning.MatchString(l) {
				t.Errorf("man -l %s: %s", filepath.Base(p), l)
			}
		}
		if !strings.Contains(out.String(), "NAME") || !strings.Contains(out.String(), "DESCRIPTION") {
			t.Errorf("man -l %s rendered no NAME and DESCRIPTION:\n%s", filepath.Base(p), out.String())
		}
	}

	// Each page's header names its command: TRESTLE\-FDB\-SHOW(8).
	for name := range cmds {
		page, err := os.ReadFile(filepath.Join(dir, name+".8"))
		if err != nil {
			continue
		}
		want := fmt.Sprintf(".TH \"%s\" \"8\"", strings.ToUpper(name))
		if !strings.Contains(string(page), want) {
			t.Errorf("%s.8's header is not %s: %q", name, want, strings.SplitN(string(page), "\n", 3)[:2])
		}
	}
	checkRootPage(t, dir, cmds)
	checkLabPage(t, dir)
	checkDocRefs(t, dir)

	toml, err := os.ReadFile(filepath.Join(dir, "trestle.toml.5"))
	if err != nil {
		t.Fatal(err)
	}
	// Each table's keys, in the section of that table.
	sections := strings.Split(string(toml), "\n.SS ")
	for _, tab := range config.Tables {
		var sec string
		for _, s := range sections[1:] {
			if strings.HasPrefix(s, roff(tab.Header())+"\n") {
				sec = s
			}
		}
		if sec == "" {
			t.Errorf("trestle.toml(5) has no section %s", tab.Header())
			continue
		}
		for _, k := range tab.Keys {
			if !strings.Contains(sec, "\n.B "+roff(k.Name)+"\n") {
				t.Errorf("trestle.toml(5): %s has no entry for key %s", tab.Header(), k.Name)
			}
		}
	}
}

// TestUserWords: the --help of every command and of every lab scenario, and
// every man page, speak of features and releases, never of the tracker's
// numbers or the seed files, and hold no machine's paths (docs.Unfit).
func TestUserWords(t *testing.T) {
	cmds := map[string]*cobra.Command{}
	commands(testRoot(), cmds)
	texts := map[string]string{}
	for name, c := range cmds {
		args := append(strings.Fields(c.CommandPath())[1:], "--help")
		out, code := runCLI(t, nil, args...)
		if code != 0 {
			t.Errorf("%s --help: exit %d", c.CommandPath(), code)
		}
		texts[name+" --help"] = out
	}
	for _, n := range lab.ScenarioNames() {
		out, _ := runCLI(t, nil, "lab", n, "--help")
		texts["trestle lab "+n+" --help"] = out
	}
	dir := t.TempDir()
	if _, err := writeManPages(testRoot(), dir, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), DocDir); err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.[58]"))
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// As the reader sees it: roff's hyphens are hyphens.
		texts[filepath.Base(p)] = strings.ReplaceAll(string(b), `\-`, "-")
	}
	for name, text := range texts {
		for i, line := range strings.Split(text, "\n") {
			if m := docs.Unfit.FindString(line); m != "" {
				t.Errorf("%s, line %d: %q: %s", name, i+1, strings.TrimSpace(m), strings.TrimSpace(line))
			}
		}
	}
}

// sections are a page's sections (.SH), each with its text, in order.
func sections(page string) (names []string, text map[string]string) {
	text = map[string]string{}
	parts := strings.Split("\n"+page, "\n.SH ")
	for _, p := range parts[1:] {
		name, body, _ := strings.Cut(p, "\n")
		name = strings.Trim(name, `"`)
		names = append(names, name)
		text[name] = body
	}
	return names, text
}

// checkRootPage: trestle(8) has a SYNOPSIS of every command, EXIT STATUS
// with each code of the CLI's contract, ENVIRONMENT with every variable the
// binary reads, FILES with the paths the daemon uses, and SEE ALSO
// trestle.toml(5) and every command's page, in man-pages(7)'s order.
func checkRootPage(t *testing.T, dir string, cmds map[string]*cobra.Command) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "trestle.8"))
	if err != nil {
		t.Fatal(err)
	}
	names, sec := sections(string(b))
	order := []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO"}
	at := 0
	for _, n := range names {
		if at < len(order) && n == order[at] {
			at++
		}
	}
	if at < len(order) {
		t.Errorf("trestle(8)'s sections are %q: want %q in that order", names, order)
	}
	for name, c := range cmds {
		if c.HasParent() && c.Runnable() && !strings.Contains(sec["SYNOPSIS"], ".B "+roff(strings.TrimSuffix(c.UseLine(), " [flags]"))+"\n") {
			t.Errorf("trestle(8)'s SYNOPSIS has no %s", name)
		}
		if name != "trestle" && !strings.Contains(sec["SEE ALSO"], `\fB`+roff(name)+`\fP(8)`) {
			t.Errorf("trestle(8)'s SEE ALSO has no %s(8)", name)
		}
	}
	if !strings.Contains(sec["SEE ALSO"], `\fBtrestle.toml\fP(5)`) {
		t.Errorf("trestle(8)'s SEE ALSO has no trestle.toml(5): %q", sec["SEE ALSO"])
	}
	for _, s := range exitStatuses {
		if !strings.Contains(sec["EXIT STATUS"], fmt.Sprintf(".B %d\n", s.Code)) {
			t.Errorf("trestle(8)'s EXIT STATUS has no code %d", s.Code)
		}
	}
	// Every variable the commands read through their getenv.
	e := &env{stdout: new(bytes.Buffer), stderr: new(bytes.Buffer)}
	read := map[string]bool{}
	e.getenv = func(k string) string { read[k] = true; return "" }
	e.statWidth()
	e.sock()
	for k := range read {
		if !strings.Contains(sec["ENVIRONMENT"], ".B "+k+"\n") {
			t.Errorf("trestle(8)'s ENVIRONMENT has no %s", k)
		}
	}
	for _, f := range []string{"/etc/trestle/trestle.toml", ctl.DefaultSocket, instance.StateRoot + "/", instance.PinRoot + "/", DocDir + "/"} {
		if !strings.Contains(sec["FILES"], ".I "+roff(f)+"\n") {
			t.Errorf("trestle(8)'s FILES has no %s", f)
		}
	}
}

// checkLabPage: trestle-lab(8) lists its scenarios in one section, a
// subsection each.
func checkLabPage(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "trestle-lab.8"))
	if err != nil {
		t.Fatal(err)
	}
	names, sec := sections(string(b))
	for _, n := range lab.ScenarioNames() {
		if slices.Contains(names, n) {
			t.Errorf("trestle-lab(8) makes scenario %s a section of its own", n)
		}
		if sc := "\n" + sec["SCENARIOS"]; !strings.Contains(sc, "\n.SS "+n+"\n") && !strings.Contains(sc, "\n.SS "+roff(n)+"\n") {
			t.Errorf("trestle-lab(8)'s SCENARIOS has no subsection %s", n)
		}
	}
}

// checkDocRefs: a document a page names is one the packages ship, where
// they ship it: no page points into the source tree.
func checkDocRefs(t *testing.T, dir string) {
	t.Helper()
	pages, _ := filepath.Glob(filepath.Join(dir, "*.[58]"))
	ref := regexp.MustCompile(`(\S*)/((?:[A-Za-z0-9_-]|\\-)+\.md)`)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			file := strings.ReplaceAll(m[2], `\-`, "-")
			if !strings.HasSuffix(m[1], DocDir) && m[1] != roff(DocDir) {
				t.Errorf("%s names %s/%s, not where the package puts it (%s)", filepath.Base(p), m[1], file, DocDir)
			}
			if _, err := os.Stat(filepath.Join("../../docs", file)); err != nil && file != "README.md" {
				t.Errorf("%s names %s, which docs/ has not: %v", filepath.Base(p), file, err)
			}
		}
		if strings.Contains(string(b), "docs/") && !strings.Contains(string(b), DocDir) {
			t.Errorf("%s points into the source tree (docs/)", filepath.Base(p))
		}
	}
}

// TestCompletionBash loads `trestle completion bash` into bash, as
// bash-completion would, and completes an empty word and a partial one:
// the commands come back.
func TestCompletionBash(t *testing.T) {
	if _, err := os.Stat("/usr/share/bash-completion/bash_completion"); err != nil {
		t.Skip("no bash-completion (make test's deps install it)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "trestle")); err != nil {
		t.Fatal(err)
	}
	// A daemon's control socket that knows one bridge with two ports.
	sock := filepath.Join(t.TempDir(), "t.sock")
	srv, err := ctl.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, func(_ context.Context, req ctl.Request) (any, error) {
		if req.Cmd != ctl.CmdShow {
			return nil, fmt.Errorf("unexpected %s", req.Cmd)
		}
		return ctl.Status{Bridges: []ctl.BridgeStatus{{Name: "br7", Ports: []ctl.PortStatus{{Name: "veth-a"}, {Name: "veth-b"}}}}}, nil
	})
	defer srv.Close()
	complete := func(line string) []string {
		t.Helper()
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		script := `source /usr/share/bash-completion/bash_completion || exit 1
source <(trestle completion bash) || exit 1
COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
__start_trestle trestle "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", append([]string{"-c", script, "bash", line}, words...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "TRESTLE_AS_MAIN=1", "TRESTLE_SOCKET="+sock)
		// stderr: bash's compopt says it runs outside a completion,
		// which it does here.
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash completion of %q: %v\n%s%s", line, err, out, errb.String())
		}
		var got []string
		for _, w := range strings.Fields(string(out)) {
			got = append(got, w)
		}
		return got
	}
	got := complete("trestle ")
	for _, want := range []string{"run", "show", "fdb", "stats", "reload", "lab", "capture"} {
		if !contains(got, want) {
			t.Errorf("completing 'trestle ' gave %q, no %q", got, want)
		}
	}
	if contains(got, "man") {
		t.Errorf("completing 'trestle ' offers the hidden man command: %q", got)
	}
	for line, want := range map[string]string{
		"trestle fdb s":                            "show",
		"trestle fdb show ":                        "br7",
		"trestle rule add b":                       "br7",
		"trestle capture b":                        "br7",
		"trestle capture br7 veth-":                "veth-a veth-b",
		"trestle fdb show br7 --port veth-b":       "veth-b",
		"trestle top --sort rx":                    "rx rx-bits",
		"trestle capture br7 veth-a --direction o": "out",
		"trestle port add br7 tap0 mode=":          "auto xdp tc", // bash breaks the word at =
		"trestle lab quick --dut direct,ov":        "direct,ovs direct,ovs:afxdp direct,ovs:system",
		"trestle lab qu":                           "quick",
	} {
		if got := strings.Join(complete(line), " "); got != want {
			t.Errorf("completing %q gave %q, want %q", line, got, want)
		}
	}
	if got := complete("trestle lab "); !contains(got, "report") || !contains(got, "vlan-overhead") {
		t.Errorf("completing 'trestle lab ' gave %q: no subcommand report or scenario vlan-overhead", got)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The lab's manual holds to its registry: trestle-lab(8) has a section for
// every scenario, and docs/lab.md names every scenario and every DUT, so a
// new one cannot ship undocumented.
func TestLabManual(t *testing.T) {
	page := labManual()
	for _, n := range lab.ScenarioNames() {
		if !strings.Contains(page, "\n### "+n+"\n") {
			t.Errorf("trestle-lab(8) has no section for scenario %s", n)
		}
		if !strings.Contains(labScenarioList(), "  "+n+" ") {
			t.Errorf("trestle lab --help does not list scenario %s", n)
		}
	}
	doc, err := os.ReadFile("../../docs/lab.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range lab.ScenarioNames() {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("docs/lab.md does not name scenario `%s`", n)
		}
	}
	for _, d := range lab.DUTNames {
		if !strings.Contains(string(doc), "`"+d+"`") && !strings.Contains(string(doc), "`:"+strings.SplitN(d, ":", 2)[len(strings.SplitN(d, ":", 2))-1]+"`") {
			t.Errorf("docs/lab.md does not name DUT `%s`", d)
		}
	}
}

// TestManDocDir: `trestle man --doc-dir` (make install's PREFIX) names the
// documents where they were put, in every page, and nowhere else.
func TestManDocDir(t *testing.T) {
	dir := t.TempDir()
	const docs = "/opt/trestle/share/doc/trestle"
	if _, err := writeManPages(testRoot(), dir, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), docs); err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.[58]"))
	named := 0
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		named += strings.Count(string(b), docs)
		if strings.Contains(string(b), DocDir) {
			t.Errorf("%s names %s, not %s", filepath.Base(p), DocDir, docs)
		}
	}
	if named == 0 {
		t.Errorf("no page names %s", docs)
	}
}
