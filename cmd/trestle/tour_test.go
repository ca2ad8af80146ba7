package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
)

// tableHead is a line of capitals only: the head of a table the CLI
// prints ("  PORT  STATE  MODE ...", "BRIDGE  MAC  VLAN ...").
var tableHead = regexp.MustCompile(`^\s*[A-Z]+(?:\s+[A-Z]+){2,}\s*$`)

// heads are the table heads of out, each as its words.
func heads(out string) []string {
	var hs []string
	for _, l := range strings.Split(out, "\n") {
		if tableHead.MatchString(l) {
			hs = append(hs, strings.Join(strings.Fields(l), " "))
		}
	}
	return hs
}

// TestREADMETour: the tables of README.md's tour (the output of `make
// demo`) have the heads that `trestle show`, `trestle fdb show` and
// `trestle stats` print today: each command is run against a daemon's
// socket that knows one bridge with one port of every counter, and every
// head in the tour that begins as one of theirs must be theirs, word for
// word, and each of theirs must be in the tour. A change to a command's
// columns fails here until the tour is run again and pasted.
func TestREADMETour(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "t.sock")
	srv, err := ctl.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	names := tbpf.CounterNames()
	counts := make(ctl.Counts, len(names))
	for i, n := range names {
		counts[i] = ctl.Count{Name: n, Value: 1}
	}
	srv.HandleStream(ctl.CmdFDBShow, func(_ context.Context, _ ctl.Request, s *ctl.Stream) error {
		if err := s.Header(ctl.FDBHeader{Chunk: 1}); err != nil {
			return err
		}
		if err := s.FDBChunk([]ctl.FDBEntry{{Bridge: "br0", MAC: "02:00:00:00:00:01", Port: "port-h1", AgeSeconds: 1}}); err != nil {
			return err
		}
		return s.EndFDB(ctl.FDBEnd{Entries: 1})
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, func(_ context.Context, req ctl.Request) (any, error) {
		switch req.Cmd {
		case ctl.CmdShow:
			return ctl.Status{Persist: true, PinDir: "/sys/fs/bpf/trestle/x", Bridges: []ctl.BridgeStatus{{
				Name: "br0", ID: 1, MaxEntries: 65536, AgingSeconds: 300, Entries: 1,
				Ports: []ctl.PortStatus{{Name: "port-h1", Interface: "port-h1", State: "up", Mode: "tc", Reason: "auto: a veth", Learning: true}},
			}}}, nil
		case ctl.CmdStats:
			return []ctl.PortStats{{Bridge: "br0", Port: "port-h1", Mode: "tc", Counters: counts, Drops: map[string]uint64{}}}, nil
		}
		return nil, nil
	})

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tour := string(readme)
	i := strings.Index(tour, "## A five-minute tour")
	if i < 0 {
		t.Fatal("README.md has no section \"A five-minute tour\"")
	}
	tour = tour[i+1:]
	if j := strings.Index(tour, "\n## "); j >= 0 {
		tour = tour[:j]
	}
	inTour := heads(tour)

	env := map[string]string{"TRESTLE_SOCKET": sock}
	now := map[string]string{} // head: the command that prints it
	firsts := map[string]bool{}
	for _, args := range [][]string{{"show"}, {"fdb", "show"}, {"stats"}} {
		cmd := "trestle " + strings.Join(args, " ")
		out, code := runCLI(t, env, args...)
		hs := heads(out)
		if code != 0 || len(hs) != 1 {
			t.Fatalf("%s: exit %d, table heads %q in %q", cmd, code, hs, out)
		}
		now[hs[0]] = cmd
		firsts[strings.Fields(hs[0])[0]] = true
		if !slices.Contains(inTour, hs[0]) {
			t.Errorf("README.md's tour has no table of %s: it prints %q today; run make demo and paste its output", cmd, hs[0])
		}
	}
	// A head in the tour that begins as one of theirs but is none of
	// theirs is an older command's output.
	for _, h := range inTour {
		if _, ok := now[h]; !ok && firsts[strings.Fields(h)[0]] {
			t.Errorf("README.md's tour shows the table head %q, which no command prints today (they print %q)", h, slices.Sorted(maps.Keys(now)))
		}
	}
}
