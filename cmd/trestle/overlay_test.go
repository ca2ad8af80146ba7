package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
)

// TestOverlayPrinting: show says what an overlay port is (and how many of
// its entries are stale while FRR restarts), fdb show marks a remote entry
// with its VTEP (and stale, or sticky: a static one), and the other lines
// are as they were.
func TestOverlayPrinting(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "t.sock")
	srv, err := ctl.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// fdb show is a stream of chunks in the table's order; the CLI
	// gathers and sorts them.
	srv.HandleStream(ctl.CmdFDBShow, func(_ context.Context, _ ctl.Request, s *ctl.Stream) error {
		if err := s.Header(ctl.FDBHeader{Chunk: 2}); err != nil {
			return err
		}
		_ = s.FDBChunk([]ctl.FDBEntry{
			{Bridge: "br0", MAC: "02:00:00:00:00:03", Port: "veth-a", Static: true},
			{Bridge: "br0", MAC: "02:00:00:00:00:01", Port: "veth-a", AgeSeconds: 1.5},
		})
		_ = s.FDBChunk([]ctl.FDBEntry{
			{Bridge: "br0", MAC: "02:00:00:00:00:02", Port: "tvx1000", AgeSeconds: 2, VTEP: "10.255.0.2"},
			{Bridge: "br0", MAC: "02:00:00:00:00:04", Port: "tvx1000", AgeSeconds: 3, VTEP: "10.255.0.2", Stale: true},
			{Bridge: "br0", MAC: "02:00:00:00:00:05", Port: "tvx1000", Static: true, VTEP: "10.255.0.2"},
		})
		return s.EndFDB(ctl.FDBEnd{Entries: 5})
	})
	go srv.Serve(ctx, func(_ context.Context, req ctl.Request) (any, error) {
		switch req.Cmd {
		case ctl.CmdShow:
			return ctl.Status{Bridges: []ctl.BridgeStatus{{Name: "br0", ID: 1, Ports: []ctl.PortStatus{
				{Name: "veth-a", State: "up", Mode: "tc", Learning: true, Flood: true, McastFlood: true, BcastFlood: true},
				{Name: "tvx1000", State: "up", Mode: "tc", Flood: true, McastFlood: true, BcastFlood: true,
					Overlay: &ctl.Overlay{VNI: 1000, VTEP: "10.255.0.1", MTU: 1450, DstPort: 4789, RemoteVTEPs: 2, FloodList: []string{"10.255.0.2", "10.255.0.3"}, RemoteMACs: 3, LocalMACs: 1, Stale: 2, FRRRestarting: true}},
			}}}}, nil
		}
		return nil, fmt.Errorf("unexpected %s", req.Cmd)
	})
	defer srv.Close()
	env := map[string]string{"TRESTLE_SOCKET": sock}

	out, code := runCLI(t, env, "show")
	if code != 0 || !strings.Contains(out, "overlay: VNI 1000, VTEP 10.255.0.1, dstport 4789, mtu 1450; remote VTEPs 2 (flood list 10.255.0.2, 10.255.0.3); MACs remote 3, advertised 1; stale 2 (FRR restarting)\n") {
		t.Errorf("show: %d\n%s", code, out)
	}
	if strings.Count(out, "overlay:") != 1 {
		t.Errorf("show gives an overlay line to a port that is none:\n%s", out)
	}
	out, code = runCLI(t, env, "fdb", "show")
	want := []string{
		"br0     02:00:00:00:00:01  0     veth-a   learned                  1.5s",
		"br0     02:00:00:00:00:02  0     tvx1000  remote 10.255.0.2        2.0s",
		"br0     02:00:00:00:00:03  0     veth-a   static                   -",
		"br0     02:00:00:00:00:04  0     tvx1000  remote 10.255.0.2 stale  3.0s",
		"br0     02:00:00:00:00:05  0     tvx1000  sticky 10.255.0.2        -",
	}
	for _, w := range want {
		if code != 0 || !strings.Contains(out, w+"\n") {
			t.Errorf("fdb show lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(out, strings.Join(want, "\n")) {
		t.Errorf("fdb show does not list the entries sorted by MAC:\n%s", out)
	}

	// --json: the keys docs/overlay.md names, on the remote entries only
	// (stale on the stale one only).
	out, code = runCLI(t, env, "fdb", "show", "--json")
	if code != 0 || strings.Count(out, `"vtep": "10.255.0.2"`) != 3 || strings.Count(out, `"vtep"`) != 3 || strings.Count(out, `"stale": true`) != 1 || strings.Count(out, `"stale"`) != 1 {
		t.Errorf("fdb show --json: want \"vtep\": \"10.255.0.2\" three times, \"stale\": true once: %d\n%s", code, out)
	}
	var es []map[string]any
	if err := json.Unmarshal([]byte(out), &es); err != nil || len(es) != 5 {
		t.Fatalf("fdb show --json: %v, %d entries\n%s", err, len(es), out)
	}
	for _, e := range es {
		if v, ok := e["vtep"]; ok != (e["port"] == "tvx1000") || (ok && v != "10.255.0.2") {
			t.Errorf("fdb show --json: entry %v: want a vtep on the remote entry only", e)
		}
	}
}
