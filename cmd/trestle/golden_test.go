package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab/sink"
)

var update = flag.Bool("update", false, "rewrite testdata/json/*.json from what the commands print")

// goldenDaemon answers every request with a fixed state of two bridges:
// br0, VLAN-aware, with an access port, a locked trunk, a span port and a
// mirror; br1 plain, with an overlay port. Booleans false and lists empty
// are there on purpose: the contract has them in the output all the same.
func goldenDaemon(t *testing.T) *fakeCtl {
	at := time.Date(2026, 11, 24, 10, 0, 5, 120e6, time.UTC)
	icmp := uint8(8)
	status := ctl.Status{Config: "/etc/trestle/trestle.toml", Bridges: ctl.List[ctl.BridgeStatus]{
		{Name: "br0", ID: 1, VLANAware: true, AgingSeconds: 300, MaxEntries: 65536, Entries: 3, Filter: true, Rules: 1, DefaultAction: "block",
			Ports: ctl.List[ctl.PortStatus]{
				{Name: "veth-a", Interface: "veth-a", Ifindex: 7, State: "up", Mode: "xdp", Config: "auto", Reason: "native XDP", Learning: true,
					Flood: true, McastFlood: true, BcastFlood: true, MACs: 2, VLAN: 10, QinQ: true},
				{Name: "veth-b", Interface: "veth-b", Ifindex: 8, State: "up", Mode: "tc", Config: "tc", Reason: "configured", MaxMACs: 4, MACLimitAction: "drop",
					Protected: true, Locked: true, AllowedMACs: ctl.List[string]{"02:00:00:00:00:09"}, IPGuard: true, AllowedIPs: ctl.List[string]{"10.0.0.9"},
					Flood: true, McastFlood: true, BcastFlood: true, MACs: 1, Trunk: ctl.VLANList{10, 20, 21, 22}, Native: 10, NativeTagged: true,
					Storm: &ctl.Storm{Broadcast: 1000}, Mirror: "m1"},
				{Name: "veth-s", Interface: "veth-s", Ifindex: 9, State: "link-down", Mode: "xdp", Config: "auto", Reason: "interface down", Span: "m1", VLAN: 1},
			},
			Mirrors: ctl.List[ctl.Mirror]{{Name: "m1", Ports: ctl.List[string]{"veth-b"}, Direction: "both", To: "veth-s", VLANs: ctl.VLANList{10}}}},
		{Name: "br1", ID: 2, AgingSeconds: 60, MaxEntries: 1024, Entries: 1, DefaultAction: "pass", MulticastSnooping: true, MulticastQuerier: true,
			Queriers: ctl.List[ctl.Querier]{{VLAN: 0, Family: "igmp", Address: "0.0.0.0", Own: true, ExpiresSeconds: 251},
				{VLAN: 0, Family: "mld", Address: "fe80::1", Port: "tvx1000", ExpiresSeconds: 200}},
			Ports: ctl.List[ctl.PortStatus]{
				{Name: "tvx1000", Interface: "tvx1000", Ifindex: 11, State: "up", Mode: "xdp", Config: "auto", Reason: "native XDP", Learning: true,
					Flood: true, McastFlood: true, BcastFlood: true,
					Overlay: &ctl.Overlay{VNI: 1000, VTEP: "10.255.0.1", DstPort: 4789, RemoteVTEPs: 1, FloodList: ctl.List[string]{"10.255.0.2"}, RemoteMACs: 1}},
			}},
	}}
	port := func(bridge, origin, owner string, p ctl.PortStatus) ctl.PortEntry {
		return ctl.PortEntry{Bridge: bridge, Origin: origin, Owner: owner, PortStatus: p}
	}
	counts := func(rx, tx uint64) ctl.Counts {
		return ctl.Counts{{Name: "rx_packets", Value: rx}, {Name: "rx_bytes", Value: 64 * rx}, {Name: "tx_packets", Value: tx}, {Name: "tx_bytes", Value: 64 * tx},
			{Name: "flooded", Value: 1}, {Name: "learned", Value: 2}, {Name: "moved"}}
	}
	vlan := uint16(10)
	f := startFake(t, func(req ctl.Request) (any, error) {
		switch req.Cmd {
		case ctl.CmdShow:
			return status, nil
		case ctl.CmdStats:
			return []ctl.PortStats{{Bridge: "br0", Port: "veth-a", Mode: "xdp", Counters: counts(100, 90), Drops: map[string]uint64{"runt": 1, "vlan_not_carried": 0}}}, nil
		case ctl.CmdVLANStats:
			return []ctl.VLANStats{
				{Bridge: "br0", VLAN: 10, Ports: []string{"veth-a", "veth-b"}, Counters: ctl.Counts{{Name: "rx_packets", Value: 6}, {Name: "tx_packets", Value: 6}, {Name: "flooded", Value: 5}}},
				{Bridge: "br0", VLAN: 20, Ports: []string{"veth-b"}, Counters: ctl.Counts{{Name: "rx_packets"}, {Name: "tx_packets"}, {Name: "flooded"}}},
			}, nil
		case ctl.CmdFDBFlush:
			return map[string]int{"removed": 2}, nil
		case ctl.CmdPortAdd:
			return port("br0", "run", "vm1", status.Bridges[0].Ports[0]), nil
		case ctl.CmdPortDel:
			return []ctl.PortEntry{port("br0", "run", "vm1", status.Bridges[0].Ports[0])}, nil
		case ctl.CmdPortList:
			return []ctl.PortEntry{port("br0", "file", "", status.Bridges[0].Ports[1]), port("br0", "run", "vm1", status.Bridges[0].Ports[0])}, nil
		case ctl.CmdRuleShow:
			return []ctl.Rule{
				{Bridge: "br0", Index: 1, Action: "pass", Proto: "icmp", ICMPType: &icmp, Packets: 3, Bytes: 294},
				{Bridge: "br0", Index: 2, Action: "pass", In: "veth-a", Proto: "tcp", DstPort: "5201", KeepState: true, Packets: 1, Bytes: 74},
				{Bridge: "br0", Action: "pass", State: true, Packets: 10, Bytes: 1400},
				{Bridge: "br0", Action: "block", Default: true, Packets: 2, Bytes: 120},
			}, nil
		case ctl.CmdStateShow:
			return []ctl.State{{Bridge: "br0", Proto: "tcp", From: "10.0.0.1:40000", To: "10.0.0.2:5201", State: "established", Rule: 2, AgeSeconds: 12, IdleSeconds: 1, ExpiresSeconds: 86399}}, nil
		case ctl.CmdNeighShow:
			return []ctl.NeighEntry{
				{Bridge: "br0", IP: "10.0.0.21", MAC: "02:00:00:00:00:21", VLAN: 10, Port: "veth-a", Origin: ctl.NeighStatic, AgeSeconds: 12},
				{Bridge: "br0", IP: "fd00::21", MAC: "02:00:00:00:00:21", VLAN: 10, Port: "veth-a", Origin: ctl.NeighStatic, AgeSeconds: 12},
			}, nil
		case ctl.CmdMDBShow:
			return []ctl.MDBEntry{
				{Bridge: "br0", Group: "239.1.1.1", VLAN: 10, Port: "veth-a", Sources: []string{}, AgeSeconds: 12},
				{Bridge: "br0", Group: "ff3e::1:2", VLAN: 10, Port: "veth-b", Sources: []string{"fd00::5"}, AgeSeconds: 3},
				{Bridge: "br0", Port: "veth-s", Router: true, Sources: []string{}},
			}, nil
		case ctl.CmdEvents:
			return []ctl.Event{
				{Time: at, Event: ctl.EventMACMove, Bridge: "br0", MAC: "02:00:00:00:00:01", VLAN: &vlan, From: "veth-a", To: "veth-b"},
				{Time: at.Add(time.Second), Event: ctl.EventPortDown, Bridge: "br0", Port: "veth-s", State: "link-down", Mode: "xdp", Ifindex: 9, Reason: "interface down"},
			}, nil
		case ctl.CmdFDBShow, ctl.CmdFDBAdd, ctl.CmdFDBDel, ctl.CmdReload, ctl.CmdRuleAdd, ctl.CmdRuleDel:
			return nil, nil
		}
		return nil, errors.New("the golden daemon has no answer to " + req.Cmd)
	})
	f.fdb = []ctl.FDBEntry{
		{Bridge: "br0", MAC: "02:00:00:00:00:01", VLAN: 10, Port: "veth-a", AgeSeconds: 1.5},
		{Bridge: "br0", MAC: "02:00:00:00:00:09", VLAN: 10, Port: "veth-b", Static: true},
		{Bridge: "br1", MAC: "02:00:00:00:00:02", Port: "tvx1000", AgeSeconds: 2, VTEP: "10.255.0.2"},
	}
	return f
}

// TestJSONGolden holds the --json output of every command that talks to
// the daemon, and of check, to testdata/json (the shapes docs/operations.md
// lists under "The JSON contract"): go test -run TestJSONGolden -update
// rewrites them after a change meant to change them.
func TestJSONGolden(t *testing.T) {
	f := goldenDaemon(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "good.toml"), []byte(goodConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.toml"), []byte(badConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	golden := filepath.Join(testdataPath, "json")
	for _, c := range []struct {
		name string
		args []string
		code int
		// shape: the rates of top depend on the time between its
		// readings; numbers are compared as 0.
		shape bool
	}{
		{"show", []string{"show"}, exitOK, false},
		{"show-bridge", []string{"show", "br1"}, exitOK, false},
		{"stats", []string{"stats"}, exitOK, false},
		{"stats-per-vlan", []string{"stats", "--per-vlan"}, exitOK, false},
		{"stats-vlan", []string{"stats", "--vlan", "20"}, exitOK, false},
		{"fdb-show", []string{"fdb", "show"}, exitOK, false},
		{"fdb-show-port", []string{"fdb", "show", "br0", "--port", "veth-b"}, exitOK, false},
		{"fdb-add", []string{"fdb", "add", "br0", "02:00:00:00:00:07", "veth-a", "--vlan", "10"}, exitOK, false},
		{"fdb-del", []string{"fdb", "del", "br0", "02:00:00:00:00:07", "--vlan", "10"}, exitOK, false},
		{"fdb-flush", []string{"fdb", "flush", "br0", "--vlan", "10"}, exitOK, false},
		{"port-add", []string{"port", "add", "br0", "veth-a", "vlan=10", "qinq=true", "owner=vm1"}, exitOK, false},
		{"port-del", []string{"port", "del", "br0", "--owner", "vm1"}, exitOK, false},
		{"port-list", []string{"port", "list"}, exitOK, false},
		{"rule-show", []string{"rule", "show"}, exitOK, false},
		{"rule-add", []string{"rule", "add", "br0", "action=pass", "proto=icmp"}, exitOK, false},
		{"rule-del", []string{"rule", "del", "br0", "1"}, exitOK, false},
		{"state-show", []string{"state", "show"}, exitOK, false},
		{"neigh-show", []string{"neigh", "show"}, exitOK, false},
		{"mdb-show", []string{"mdb", "show"}, exitOK, false},
		{"events", []string{"events"}, exitOK, false},
		{"reload", []string{"reload"}, exitOK, false},
		{"top", []string{"top", "--once", "--interval", "100ms"}, exitOK, true},
		{"check", []string{"check", "good.toml"}, exitOK, false},
		{"check-refused", []string{"check", "bad.toml"}, exitRefused, false},
		{"failure-usage", []string{"fdb", "show", "--vlan", "4095"}, exitUsage, false},
	} {
		stdout, stderr, code := runSplit(t, f.env(), "", append(c.args, "--json")...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, c.code, stderr)
			continue
		}
		got := stdout
		if c.shape {
			got = shapeOf(t, stdout)
		}
		file := filepath.Join(golden, c.name+".json")
		if *update {
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v (go test -run TestJSONGolden -update writes it)", c.name, err)
			continue
		}
		if got != string(want) {
			t.Errorf("trestle %s --json:\n%s\nwant (%s):\n%s", strings.Join(c.args, " "), got, file, want)
		}
	}
}

// testdataPath is this package's testdata, found before a test changes
// directory.
var testdataPath, _ = filepath.Abs("testdata")

// shapeOf is JSON with every number 0: its names and types, not its
// figures.
func shapeOf(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	var zero func(any) any
	zero = func(v any) any {
		switch x := v.(type) {
		case float64:
			return 0
		case []any:
			for i := range x {
				x[i] = zero(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = zero(x[k])
			}
		}
		return v
	}
	b, err := json.MarshalIndent(zero(v), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// gen and sink run only as root, on devices: their --json is held to
// testdata/json by the shapes of what they print.
func TestJSONGoldenTraffic(t *testing.T) {
	for name, v := range map[string]any{"gen": genSummary{}, "sink": sink.Summary{}} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got := string(b) + "\n"
		file := filepath.Join(testdataPath, "json", name+".json")
		if *update {
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if want, err := os.ReadFile(file); err != nil || got != string(want) {
			t.Errorf("%s --json:\n%s\nwant (%s, %v):\n%s", name, got, file, err, want)
		}
	}
}

// The streams' JSON lines: capture --json, a frame a line; events
// --follow --json, an event a line.
func TestJSONLinesGolden(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 5, 0, time.UTC)
	old := time.Local
	time.Local = time.UTC // capture's times are the machine's local time
	t.Cleanup(func() { time.Local = old })
	capture := func(_ context.Context, req ctl.Request, s *ctl.Stream) error {
		if err := s.Header(ctl.CaptureHeader{Bridge: req.Bridge, Port: req.Port, Mode: "xdp", Snaplen: 16384, Ports: map[uint32]string{8: "veth-b"}, Reasons: []string{"none", "runt"}}); err != nil {
			return nil
		}
		frame := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 8, 6}
		_ = s.Record(ctl.CaptureRecord{TimeNs: at.UnixNano(), Dir: ctl.CaptureIn, Verdict: ctl.VerdictFlooded, Len: 60, Data: frame})
		_ = s.Record(ctl.CaptureRecord{TimeNs: at.UnixNano() + 1000, Dir: ctl.CaptureIn, Verdict: ctl.VerdictForwarded, Egress: 8, Len: 60, Data: frame})
		_ = s.Record(ctl.CaptureRecord{TimeNs: at.UnixNano() + 2000, Dir: ctl.CaptureIn, Verdict: ctl.VerdictDropped, Reason: 1, Len: 20, Data: frame[:6]})
		_ = s.Record(ctl.CaptureRecord{TimeNs: at.UnixNano() + 3000, Dir: ctl.CaptureIn, Verdict: ctl.VerdictDropped, Reason: 1, Beyond: true, Len: 60, Data: frame})
		return s.End(ctl.CaptureEnd{Captured: 4})
	}
	follow := func(_ context.Context, _ ctl.Request, s *ctl.Stream) error {
		vlan := uint16(0)
		if err := s.Header(ctl.EventsHeader{Events: []ctl.Event{{Time: at, Event: ctl.EventMACMove, Bridge: "br0", MAC: "02:00:00:00:00:01", VLAN: &vlan, From: "veth-a", To: "veth-b"}}}); err != nil {
			return nil
		}
		_ = s.Event(ctl.Event{Time: at.Add(time.Second), Event: ctl.EventTableFull, Bridge: "br0", Count: 3, Limit: 1024})
		return s.EndEvents(ctl.EventsEnd{})
	}
	f := startFake(t, func(ctl.Request) (any, error) { return nil, nil }, map[string]ctl.StreamHandler{ctl.CmdCapture: capture, ctl.CmdEventsFollow: follow})
	env := f.env()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"capture", []string{"capture", "br0", "veth-a", "--json"}},
		{"events-follow", []string{"events", "--follow", "--json"}},
	} {
		stdout, stderr, code := runSplit(t, env, "", c.args...)
		if code != exitOK {
			t.Errorf("%s: exit %d: %s", c.name, code, stderr)
			continue
		}
		file := filepath.Join(testdataPath, "json", c.name+".jsonl")
		if *update {
			if err := os.WriteFile(file, []byte(stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil || stdout != string(want) {
			t.Errorf("trestle %s:\n%s\nwant (%s, %v):\n%s", strings.Join(c.args, " "), stdout, file, err, want)
		}
	}
}

// TestShowQueriers: `trestle show` names the querier of each family in
// each VLAN, the bridge's own or the one heard and by which port.
func TestShowQueriers(t *testing.T) {
	f := goldenDaemon(t)
	out, _, code := runSplit(t, f.env(), "", "show", "br1")
	for _, want := range []string{"multicast_querier: the bridge sends", "IGMP querier, VLAN 0: 0.0.0.0 (this bridge)", "MLD querier, VLAN 0: fe80::1 (heard by tvx1000, gone in 200s"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("show br1 (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
}
