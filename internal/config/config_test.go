package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// doc joins lines with newlines, so a test can count lines from 1.
func doc(lines ...string) []byte {
	return []byte(strings.Join(lines, "\n") + "\n")
}

// twoPorts is a valid bridge br0 on lines 1-6; cases append to it.
var twoPorts = []string{
	`[[bridge]]`,           // 1
	`name = "br0"`,         // 2
	`[[bridge.port]]`,      // 3
	`interface = "veth-a"`, // 4
	`[[bridge.port]]`,      // 5
	`interface = "veth-b"`, // 6
}

func withBridge(lines ...string) []byte {
	return doc(append(append([]string{}, twoPorts...), lines...)...)
}

func mustMAC(s string) net.HardwareAddr {
	mac, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return mac
}

func TestLoadFull(t *testing.T) {
	got, err := Load("testdata/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File:   "testdata/full.toml",
		Daemon: Daemon{Socket: "/run/trestle/test.sock", FRRVtyDir: DefaultFRRVtyDir},
		Bridges: []Bridge{
			{
				Name:       "br0",
				Aging:      5 * time.Minute,
				MaxEntries: 1024,
				MaxStates:  DefaultMaxStates, MaxPortStates: DefaultMaxPortStates, LoopRetry: DefaultLoopRetry, MulticastQueryInterval: DefaultQueryInterval, MACMoveLimit: DefaultMACMoveLimit, MACMoveWindow: DefaultMACMoveWindow, NeighAging: DefaultNeighAging, MaxNeighsPerPort: DefaultMaxNeighsPerPort,
				Ports: []Port{
					{Interface: "veth-a", Mode: "xdp", MaxMACs: 100, Line: 11},
					{Interface: "veth-b", Mode: "auto", Line: 16},
				},
				Static: []Static{
					{MAC: mustMAC("02:00:00:00:00:01"), Port: "veth-a", VLAN: 10, Line: 19},
					{MAC: mustMAC("02:aa:bb:cc:dd:ee"), Port: "veth-b", Line: 24},
				},
				Line: 5,
			},
			{
				Name:       "br1",
				Aging:      DefaultAging,
				MaxEntries: DefaultMaxEntries,
				MaxStates:  DefaultMaxStates, MaxPortStates: DefaultMaxPortStates, LoopRetry: DefaultLoopRetry, MulticastQueryInterval: DefaultQueryInterval, MACMoveLimit: DefaultMACMoveLimit, MACMoveWindow: DefaultMACMoveWindow, NeighAging: DefaultNeighAging, MaxNeighsPerPort: DefaultMaxNeighsPerPort,
				Ports: []Port{
					{Interface: "tap0", Mode: "tc", Line: 31},
					{Interface: "tap1", Mode: "auto", Line: 32},
				},
				Line: 28,
			},
			{
				Name:       "br2",
				Aging:      DefaultAging,
				MaxEntries: DefaultMaxEntries,
				MaxStates:  DefaultMaxStates, MaxPortStates: DefaultMaxPortStates, LoopRetry: DefaultLoopRetry, MulticastQueryInterval: DefaultQueryInterval, MACMoveLimit: DefaultMACMoveLimit, MACMoveWindow: DefaultMACMoveWindow, NeighAging: DefaultNeighAging, MaxNeighsPerPort: DefaultMaxNeighsPerPort,
				Ports: []Port{
					{Interface: "acc0", Mode: "auto", VLAN: 10, Line: 43},
					{Interface: "trunk0", Mode: "auto", Trunk: []uint16{10, 20, 100, 101, 102, 4094}, Native: 20, Line: 47},
					{Interface: "plain0", Mode: "auto", VLAN: 1, Line: 52},
				},
				Static: []Static{
					{MAC: mustMAC("02:00:00:00:00:02"), Port: "trunk0", VLAN: 20, Line: 39},
					{MAC: mustMAC("02:00:00:00:00:03"), Port: "trunk0", VLAN: 101, Line: 55},
				},
				Line: 36,
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseDefaults(t *testing.T) {
	got, err := Parse("t.toml", doc(
		`[[bridge]]`,
		`name = "br0"`,
		`[[bridge.port]]`,
		`interface = "veth-a"`,
	))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File:   "t.toml",
		Daemon: Daemon{Socket: DefaultSocket, FRRVtyDir: DefaultFRRVtyDir},
		Bridges: []Bridge{{
			Name:          "br0",
			Aging:         DefaultAging,
			MaxEntries:    DefaultMaxEntries,
			MaxStates:     DefaultMaxStates,
			MaxPortStates: DefaultMaxPortStates, LoopRetry: DefaultLoopRetry, MulticastQueryInterval: DefaultQueryInterval, MACMoveLimit: DefaultMACMoveLimit, MACMoveWindow: DefaultMACMoveWindow, NeighAging: DefaultNeighAging, MaxNeighsPerPort: DefaultMaxNeighsPerPort,
			Ports: []Port{{Interface: "veth-a", Mode: "auto", Line: 3}},
			Line:  1,
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

// TestParseValid covers accepted edge values and TOML spellings.
func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  []byte
		check func(*Config) bool
	}{
		{"dotted daemon key", doc(append([]string{`daemon.socket = "/tmp/t.sock"`}, twoPorts...)...),
			func(c *Config) bool { return c.Daemon.Socket == "/tmp/t.sock" && !c.Daemon.Persist }},
		{"persist", doc(append([]string{`[daemon]`, `persist = true`}, twoPorts...)...),
			func(c *Config) bool { return c.Daemon.Persist }},
		{"metrics", doc(append([]string{`[daemon]`, `metrics = "[::1]:9470"`}, twoPorts...)...),
			func(c *Config) bool { return c.Daemon.Metrics == "[::1]:9470" }},
		{"limits", doc(
			`[[bridge]]`, `name = "A-z_0.9"`, `aging = "24h"`, `max_entries = 16777216`,
			`[[bridge.port]]`, `interface = "123456789012345"`, `max_macs = 0x1000000`,
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "123456789012345"`, `vlan = 4094`,
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "123456789012345"`, `vlan = 0`,
		), func(c *Config) bool {
			b := c.Bridges[0]
			return b.Aging == 24*time.Hour && b.MaxEntries == 1<<24 && b.Ports[0].MaxMACs == 1<<24 &&
				b.Static[0].VLAN == 4094 && b.Static[1].VLAN == 0
		}},
		{"keep-state bounds by default", doc(`[[bridge]]`, `name = "b"`, `[[bridge.port]]`, `interface = "x"`),
			func(c *Config) bool {
				return c.Bridges[0].MaxStates == DefaultMaxStates && c.Bridges[0].MaxPortStates == DefaultMaxPortStates
			}},
		{"keep-state bounds", doc(`[[bridge]]`, `name = "b"`, `filter = true`, `max_states = 262144`, `max_states_per_port = 1`,
			`[[bridge]]`, `name = "c"`, `max_states = 262144`),
			func(c *Config) bool {
				return c.Bridges[0].MaxStates == MaxStatesAll && c.Bridges[0].MaxPortStates == 1 && c.Bridges[1].MaxStates == MaxStatesAll
			}},
		{"edge guards", doc(`[[bridge]]`, `name = "b"`, `loop_detect = true`, `loop_retry = "5s"`, `[[bridge.port]]`, `interface = "x"`, `bpdu_guard = true`),
			func(c *Config) bool {
				b := c.Bridges[0]
				return b.LoopDetect && b.LoopRetry == 5*time.Second && b.Ports[0].Has(flagBPDUGuard)
			}},
		{"querier", doc(`[[bridge]]`, `name = "b"`, `multicast_querier = true`, `multicast_snooping = true`, `multicast_query_interval = "4s"`),
			func(c *Config) bool {
				b := c.Bridges[0]
				return b.MulticastQuerier && b.MulticastSnooping && b.MulticastQueryInterval == 4*time.Second
			}},
		{"min aging", doc(`[[bridge]]`, `name = "b"`, `aging = "1s"`, `[[bridge.port]]`, `interface = "x"`),
			func(c *Config) bool { return c.Bridges[0].Aging == time.Second }},
		{"static before port", doc(
			`[[bridge]]`, `name = "b"`,
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "x"`,
			`[[bridge.port]]`, `interface = "x"`,
		), func(c *Config) bool { return c.Bridges[0].Static[0].Port == "x" }},
		// A bridge for run-time ports only (issue 28): none in the file.
		{"bridge without ports", doc(`[[bridge]]`, `name = "b"`, `[[bridge]]`, `name = "c"`, `port = []`, `[[bridge]]`, `name = "d"`, `[[bridge.port]]`, `interface = "x"`),
			func(c *Config) bool {
				return len(c.Bridges) == 3 && len(c.Bridges[0].Ports) == 0 && len(c.Bridges[1].Ports) == 0 && len(c.Bridges[2].Ports) == 1
			}},
		{"static naming no port of a bridge without ports", doc(`[[bridge]]`, `name = "b"`, `[[bridge.port]]`, `interface = "x"`, `[[bridge]]`, `name = "c"`),
			func(c *Config) bool { return c.Bridges[1].Name == "c" }},
		{"comments and blank lines", doc(`# trestle`, ``, `[[bridge]] # one`, `name = "b" # two`, `[[bridge.port]]`, `interface = "x"`),
			func(c *Config) bool { return c.Bridges[0].Line == 3 && c.Bridges[0].Ports[0].Line == 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("t.toml", tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("unexpected config %+v", c)
			}
		})
	}
}

// TestParseErrors has one case per rule, with the exact messages.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		// File and top level.
		{"empty file", nil, []string{
			`t.toml: bridge: at least one [[bridge]] is required`}},
		{"no bridge", doc(`[daemon]`), []string{
			`t.toml: bridge: at least one [[bridge]] is required`}},
		{"empty bridge array", doc(`bridge = []`), []string{
			`t.toml:1: bridge: at least one [[bridge]] is required`}},
		{"bridge is a table", doc(`[bridge]`, `name = "br0"`), []string{
			`t.toml:1: bridge: must be an array of tables ([[bridge]])`}},
		{"bridge element not a table", doc(`bridge = [1]`), []string{
			`t.toml:1: bridge[0]: must be a table`}},
		// Keys that are not bare are quoted in the field, so that it names them.
		{"empty key", doc(`[""]`, `[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`, `"a.b" = 1`), []string{
			`t.toml:1: "": unknown field`, `t.toml:6: bridge[0].port[0]."a.b": unknown field`}},
		{"unknown key", doc(append([]string{`verbose = true`}, twoPorts...)...), []string{
			`t.toml:1: verbose: unknown field`}},
		{"unknown table", withBridge(`[metrics]`, `listen = ":9100"`), []string{
			`t.toml:7: metrics: unknown field`}},

		// daemon.
		{"daemon not a table", doc(append([]string{`daemon = "x"`}, twoPorts...)...), []string{
			`t.toml:1: daemon: must be a table`}},
		{"socket relative", doc(append([]string{`[daemon]`, `socket = "trestle.sock"`}, twoPorts...)...), []string{
			`t.toml:2: daemon.socket: "trestle.sock" is not an absolute path`}},
		{"socket empty", doc(append([]string{`[daemon]`, `socket = ""`}, twoPorts...)...), []string{
			`t.toml:2: daemon.socket: "" is not an absolute path`}},
		{"socket too long", doc(append([]string{`[daemon]`, `socket = "/` + strings.Repeat("s", 107) + `"`}, twoPorts...)...), []string{
			`t.toml:2: daemon.socket: "/` + strings.Repeat("s", 107) + `" is longer than 107 bytes, the limit for a unix socket path`}},
		{"socket not a string", doc(append([]string{`[daemon]`, `socket = 1`}, twoPorts...)...), []string{
			`t.toml:2: daemon.socket: must be a string`}},
		{"metrics no port", doc(append([]string{`[daemon]`, `metrics = "127.0.0.1"`}, twoPorts...)...), []string{
			`t.toml:2: daemon.metrics: "127.0.0.1" is not host:port (e.g. "127.0.0.1:9470" or "[::1]:9470")`}},
		{"metrics bad port", doc(append([]string{`[daemon]`, `metrics = "localhost:99999"`}, twoPorts...)...), []string{
			`t.toml:2: daemon.metrics: "localhost:99999": port "99999" is not 1..65535`}},
		{"metrics not a string", doc(append([]string{`[daemon]`, `metrics = 9470`}, twoPorts...)...), []string{
			`t.toml:2: daemon.metrics: must be a string`}},
		{"persist not a bool", doc(append([]string{`[daemon]`, `persist = "yes"`}, twoPorts...)...), []string{
			`t.toml:2: daemon.persist: must be true or false`}},
		{"daemon unknown key", doc(append([]string{`[daemon]`, `pidfile = "/run/t.pid"`}, twoPorts...)...), []string{
			`t.toml:2: daemon.pidfile: unknown field`}},

		// bridge.
		{"name missing", doc(`[[bridge]]`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:1: bridge[0].name: is required`}},
		{"name not a string", doc(`[[bridge]]`, `name = 0`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:2: bridge[0].name: must be a string`}},
		{"name bad character", doc(`[[bridge]]`, `name = "br 0"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:2: bridge[0].name: "br 0" is not a valid bridge name: use 1 to 15 of A-Z a-z 0-9 _ . -`}},
		{"name too long", doc(`[[bridge]]`, `name = "0123456789abcdef"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:2: bridge[0].name: "0123456789abcdef" is not a valid bridge name: use 1 to 15 of A-Z a-z 0-9 _ . -`}},
		{"name empty", doc(`[[bridge]]`, `name = ""`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:2: bridge[0].name: "" is not a valid bridge name: use 1 to 15 of A-Z a-z 0-9 _ . -`}},
		{"name dot-dot", doc(`[[bridge]]`, `name = ".."`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:2: bridge[0].name: ".." is not a valid bridge name: use 1 to 15 of A-Z a-z 0-9 _ . -`}},
		{"name duplicate", withBridge(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "veth-c"`), []string{
			`t.toml:8: bridge[1].name: "br0" is already the name of the bridge at line 2`}},
		{"aging not a duration", doc(`[[bridge]]`, `name = "b"`, `aging = "5x"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].aging: "5x" is not a duration such as "300s" or "5m"`}},
		{"aging too short", doc(`[[bridge]]`, `name = "b"`, `aging = "999ms"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].aging: "999ms" is out of range 1s..24h`}},
		{"aging too long", doc(`[[bridge]]`, `name = "b"`, `aging = "24h1s"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].aging: "24h1s" is out of range 1s..24h`}},
		{"aging negative", doc(`[[bridge]]`, `name = "b"`, `aging = "-5m"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].aging: "-5m" is out of range 1s..24h`}},
		{"aging integer", doc(`[[bridge]]`, `name = "b"`, `aging = 300`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].aging: must be a string`}},
		{"querier without snooping", doc(`[[bridge]]`, `name = "b"`, `multicast_querier = true`), []string{
			`t.toml:3: bridge[0].multicast_querier: needs multicast_snooping = true: the querier's election and the reports it asks for are the snooping's`}},
		{"query interval too short", doc(`[[bridge]]`, `name = "b"`, `multicast_snooping = true`, `multicast_querier = true`, `multicast_query_interval = "1s"`), []string{
			`t.toml:5: bridge[0].multicast_query_interval: "1s" is out of range 2s..8h49m4s`}},
		{"loop_retry too short", doc(`[[bridge]]`, `name = "b"`, `loop_detect = true`, `loop_retry = "500ms"`), []string{
			`t.toml:4: bridge[0].loop_retry: "500ms" is out of range 1s..24h`}},
		{"loop_detect not a boolean", doc(`[[bridge]]`, `name = "b"`, `loop_detect = "yes"`), []string{
			`t.toml:3: bridge[0].loop_detect: must be true or false`}},
		{"bpdu_guard on a patch port", doc(`[[bridge]]`, `name = "b"`, `[[bridge.port]]`, `patch = "c"`, `bpdu_guard = true`,
			`[[bridge]]`, `name = "c"`, `[[bridge.port]]`, `patch = "b"`), []string{
			`t.toml:5: bridge[0].port[0].bpdu_guard: guards an edge port's cable, and a patch port has none`}},
		{"max_states zero", doc(`[[bridge]]`, `name = "b"`, `max_states = 0`), []string{
			`t.toml:3: bridge[0].max_states: 0 is out of range 1..262144`}},
		{"max_states_per_port too big", doc(`[[bridge]]`, `name = "b"`, `max_states_per_port = 262145`), []string{
			`t.toml:3: bridge[0].max_states_per_port: 262145 is out of range 1..262144`}},
		{"max_states of filtering bridges over the table", doc(
			`[[bridge]]`, `name = "b"`, `filter = true`, `max_states = 200000`,
			`[[bridge]]`, `name = "c"`, `max_states = 200000`,
			`[[bridge]]`, `name = "d"`, `filter = true`, `max_states = 62145`), []string{
			`t.toml:11: bridge[2].max_states: the filtering bridges' max_states add up to 262145, over the 262144 established connections the datapath holds for all of them: lower max_states (default 16384)`}},
		{"max_entries zero", doc(`[[bridge]]`, `name = "b"`, `max_entries = 0`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].max_entries: 0 is out of range 1..16777216`}},
		{"max_entries negative", doc(`[[bridge]]`, `name = "b"`, `max_entries = -1`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].max_entries: -1 is out of range 1..16777216`}},
		{"max_entries too big", doc(`[[bridge]]`, `name = "b"`, `max_entries = 16_777_217`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].max_entries: 16_777_217 is out of range 1..16777216`}},
		{"max_entries string", doc(`[[bridge]]`, `name = "b"`, `max_entries = "64k"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].max_entries: must be an integer`}},
		{"max_entries float", doc(`[[bridge]]`, `name = "b"`, `max_entries = 1e3`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].max_entries: must be an integer`}},
		{"filter table", doc(`[[bridge]]`, `name = "b"`, `filter = { rules = "r.txt" }`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].filter: must be true or false`}},
		{"bridge unknown key", doc(`[[bridge]]`, `name = "b"`, `stp = true`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].stp: unknown field`}},
		{"bridge unknown table", withBridge(`[[bridge.patch]]`, `peer = "br1"`), []string{
			`t.toml:7: bridge[0].patch: unknown field`}},
		{"port is a table", doc(`[[bridge]]`, `name = "b"`, `[bridge.port]`, `interface = "a"`), []string{
			`t.toml:3: bridge[0].port: must be an array of tables ([[bridge.port]])`}},

		// bridge.port.
		{"interface missing", withBridge(`[[bridge.port]]`, `mode = "tc"`), []string{
			`t.toml:7: bridge[0].port[2]: interface, patch or vxlan is required`}},
		{"interface not a string", withBridge(`[[bridge.port]]`, `interface = 3`), []string{
			`t.toml:8: bridge[0].port[2].interface: must be a string`}},
		{"interface empty", withBridge(`[[bridge.port]]`, `interface = ""`), []string{
			`t.toml:8: bridge[0].port[2].interface: "" is not a valid interface name: it is empty`}},
		{"interface too long", withBridge(`[[bridge.port]]`, `interface = "0123456789abcdef"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "0123456789abcdef" is not a valid interface name: longer than 15 bytes`}},
		{"interface slash", withBridge(`[[bridge.port]]`, `interface = "a/b"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "a/b" is not a valid interface name: contains '/'`}},
		{"interface colon", withBridge(`[[bridge.port]]`, `interface = "eth0:1"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "eth0:1" is not a valid interface name: contains ':'`}},
		{"interface space", withBridge(`[[bridge.port]]`, `interface = "a b"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "a b" is not a valid interface name: contains whitespace`}},
		{"interface tab", withBridge(`[[bridge.port]]`, `interface = "a\tb"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "a\tb" is not a valid interface name: contains whitespace`}},
		{"interface control character", withBridge(`[[bridge.port]]`, `interface = "a\u0000"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "a\x00" is not a valid interface name: contains a control character`}},
		{"interface dot", withBridge(`[[bridge.port]]`, `interface = "."`), []string{
			`t.toml:8: bridge[0].port[2].interface: "." is not a valid interface name: reserved name`}},
		{"interface dot-dot", withBridge(`[[bridge.port]]`, `interface = ".."`), []string{
			`t.toml:8: bridge[0].port[2].interface: ".." is not a valid interface name: reserved name`}},
		{"interface twice in a bridge", withBridge(`[[bridge.port]]`, `interface = "veth-a"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "veth-a" is also a port of bridge br0 at line 4`}},
		{"interface in two bridges", withBridge(`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `interface = "veth-b"`), []string{
			`t.toml:10: bridge[1].port[0].interface: "veth-b" is also a port of bridge br0 at line 6`}},
		{"mode unknown", withBridge(`mode = "fast"`), []string{
			`t.toml:7: bridge[0].port[1].mode: "fast" is not one of auto, xdp, tc`}},
		{"mode not a string", withBridge(`mode = 1`), []string{
			`t.toml:7: bridge[0].port[1].mode: must be a string`}},
		{"max_macs negative", withBridge(`max_macs = -1`), []string{
			`t.toml:7: bridge[0].port[1].max_macs: -1 is out of range 0..16777216`}},
		{"max_macs too big", withBridge(`max_macs = 16777217`), []string{
			`t.toml:7: bridge[0].port[1].max_macs: 16777217 is out of range 0..16777216`}},
		{"max_macs bool", withBridge(`max_macs = true`), []string{
			`t.toml:7: bridge[0].port[1].max_macs: must be an integer`}},
		{"port unknown key", withBridge(`speed = 1000`), []string{
			`t.toml:7: bridge[0].port[1].speed: unknown field`}},
		{"port inline table line", doc(`[[bridge]]`, `name = "b"`, `port = [`, `  { interface = "a" },`, `  { interface = "b",`, `    mode = "fast" },`, `]`), []string{
			`t.toml:6: bridge[0].port[1].mode: "fast" is not one of auto, xdp, tc`}},
		{"port not a table", doc(`[[bridge]]`, `name = "b"`, `port = [`, `  { interface = "a" },`, `  "b",`, `]`), []string{
			`t.toml:5: bridge[0].port[1]: must be a table`}},

		// bridge.static.
		{"mac missing", withBridge(`[[bridge.static]]`, `port = "veth-a"`), []string{
			`t.toml:7: bridge[0].static[0].mac: is required`}},
		{"static port missing", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`), []string{
			`t.toml:7: bridge[0].static[0].port: is required`}},
		{"mac not a string", withBridge(`[[bridge.static]]`, `mac = 2`, `port = "veth-a"`), []string{
			`t.toml:8: bridge[0].static[0].mac: must be a string`}},
		{"mac malformed", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00"`, `port = "veth-a"`), []string{
			`t.toml:8: bridge[0].static[0].mac: "02:00:00:00:00" is not a MAC address such as 02:00:00:00:00:01`}},
		{"mac not hex", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:zz"`, `port = "veth-a"`), []string{
			`t.toml:8: bridge[0].static[0].mac: "02:00:00:00:00:zz" is not a MAC address such as 02:00:00:00:00:01`}},
		{"mac too long", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:00:00:01"`, `port = "veth-a"`), []string{
			`t.toml:8: bridge[0].static[0].mac: "02:00:00:00:00:00:00:01" is not a MAC address such as 02:00:00:00:00:01`}},
		{"mac multicast", withBridge(`[[bridge.static]]`, `mac = "01:00:5E:00:00:01"`, `port = "veth-a"`), []string{
			`t.toml:8: bridge[0].static[0].mac: "01:00:5E:00:00:01" is a multicast address; static entries must be unicast`}},
		{"mac broadcast", withBridge(`[[bridge.static]]`, `mac = "ff:ff:ff:ff:ff:ff"`, `port = "veth-a"`), []string{
			`t.toml:8: bridge[0].static[0].mac: "ff:ff:ff:ff:ff:ff" is a multicast address; static entries must be unicast`}},
		{"mac zero", withBridge(`[[bridge.static]]`, `mac = "00:00:00:00:00:00"`, `port = "veth-a"`), []string{
			`t.toml:8: bridge[0].static[0].mac: "00:00:00:00:00:00" is the zero address`}},
		{"static port unknown", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "veth-z"`), []string{
			`t.toml:9: bridge[0].static[0].port: "veth-z" is not a port of bridge br0`}},
		{"static port of another bridge", withBridge(
			`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `interface = "veth-c"`,
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "veth-a"`), []string{
			`t.toml:13: bridge[1].static[0].port: "veth-a" is not a port of bridge br1`}},
		{"static port with invalid interface", withBridge(`[[bridge.port]]`, `interface = "eth0:1"`,
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "eth0:1"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "eth0:1" is not a valid interface name: contains ':'`}},
		{"static port not a string", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = ["veth-a"]`), []string{
			`t.toml:9: bridge[0].static[0].port: must be a string`}},
		{"static vlan too big", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "veth-a"`, `vlan = 4095`), []string{
			`t.toml:10: bridge[0].static[0].vlan: 4095 is out of range 0..4094`}},
		{"static vlan negative", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "veth-a"`, `vlan = -1`), []string{
			`t.toml:10: bridge[0].static[0].vlan: -1 is out of range 0..4094`}},
		{"static vlan string", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "veth-a"`, `vlan = "10"`), []string{
			`t.toml:10: bridge[0].static[0].vlan: must be an integer`}},
		{"static duplicate", withBridge(
			`[[bridge.static]]`, `mac = "02:aa:00:00:00:01"`, `port = "veth-a"`, `vlan = 10`,
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "veth-b"`, `vlan = 10`,
			`[[bridge.static]]`, `mac = "02:AA:00:00:00:01"`, `port = "veth-b"`, `vlan = 10`), []string{
			`t.toml:16: bridge[0].static[2].mac: 02:aa:00:00:00:01 vlan 10 is already a static entry at line 8`}},
		{"static unknown key", withBridge(`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "veth-a"`, `ttl = 5`), []string{
			`t.toml:10: bridge[0].static[0].ttl: unknown field`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, tc.data, tc.want)
		})
	}
}

// TestParseVLANErrors has one case per VLAN rule, with the exact messages.
// Lines 1-6 are twoPorts, so keys on line 7 belong to port[1], veth-b.
func TestParseVLANErrors(t *testing.T) {
	const mac = `mac = "02:00:00:00:00:01"`
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		// vlan and native.
		{"vlan zero", withBridge(`vlan = 0`), []string{
			`t.toml:7: bridge[0].port[1].vlan: 0 is out of range 1..4094`}},
		{"vlan too big", withBridge(`vlan = 4095`), []string{
			`t.toml:7: bridge[0].port[1].vlan: 4095 is out of range 1..4094`}},
		{"vlan negative", withBridge(`vlan = -1`), []string{
			`t.toml:7: bridge[0].port[1].vlan: -1 is out of range 1..4094`}},
		{"vlan string", withBridge(`vlan = "10"`), []string{
			`t.toml:7: bridge[0].port[1].vlan: must be an integer`}},
		{"native zero", withBridge(`trunk = [10]`, `native = 0`), []string{
			`t.toml:8: bridge[0].port[1].native: 0 is out of range 1..4094`}},
		{"native too big", withBridge(`trunk = [10]`, `native = 4095`), []string{
			`t.toml:8: bridge[0].port[1].native: 4095 is out of range 1..4094`}},
		{"native array", withBridge(`trunk = [10]`, `native = [10]`), []string{
			`t.toml:8: bridge[0].port[1].native: must be an integer`}},

		// The combinations.
		{"vlan and trunk", withBridge(`vlan = 10`, `trunk = [10, 20]`), []string{
			`t.toml:8: bridge[0].port[1].trunk: conflicts with vlan at line 7: a port is an access port (vlan) or a trunk, not both; a trunk's untagged VLAN is native`}},
		{"trunk and vlan", withBridge(`trunk = [10, 20]`, `vlan = 10`), []string{
			`t.toml:7: bridge[0].port[1].trunk: conflicts with vlan at line 8: a port is an access port (vlan) or a trunk, not both; a trunk's untagged VLAN is native`}},
		{"native without trunk", withBridge(`native = 1`), []string{
			`t.toml:7: bridge[0].port[1].native: is for trunks only: set trunk too, or use vlan for an access port`}},
		{"native on an access port", withBridge(`vlan = 10`, `native = 10`), []string{
			`t.toml:8: bridge[0].port[1].native: is for trunks only: set trunk too, or use vlan for an access port`}},
		{"native not in trunk", withBridge(`native = 30`, `trunk = [10, "20-29"]`), []string{
			`t.toml:7: bridge[0].port[1].native: 30 is not one of the port's trunk VLANs (10,20-29)`}},
		{"native with a wrong trunk", withBridge(`trunk = [0, 10]`, `native = 30`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: 0 is out of range 1..4094`}},

		// trunk.
		{"trunk integer", withBridge(`trunk = 10`), []string{
			`t.toml:7: bridge[0].port[1].trunk: must be an array of VLAN IDs and ranges such as [10, 20, "100-199"]`}},
		{"trunk string", withBridge(`trunk = "10-20"`), []string{
			`t.toml:7: bridge[0].port[1].trunk: must be an array of VLAN IDs and ranges such as [10, 20, "100-199"]`}},
		{"trunk empty", withBridge(`trunk = []`), []string{
			`t.toml:7: bridge[0].port[1].trunk: is empty: list the VLANs the trunk carries`}},
		{"trunk zero", withBridge(`trunk = [10, 0]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[1]: 0 is out of range 1..4094`}},
		{"trunk too big", withBridge(`trunk = [4095]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: 4095 is out of range 1..4094`}},
		{"trunk string zero", withBridge(`trunk = ["0"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "0": 0 is out of range 1..4094`}},
		{"range from zero", withBridge(`trunk = ["0-10"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "0-10": 0 is out of range 1..4094`}},
		{"range too far", withBridge(`trunk = ["4000-4095"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "4000-4095": 4095 is out of range 1..4094`}},
		{"range overflows int", withBridge(`trunk = ["1-99999999999999999999"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "1-99999999999999999999": 99999999999999999999 is out of range 1..4094`}},
		{"range backwards", withBridge(`trunk = ["20-10"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "20-10" is backwards: write "10-20"`}},
		{"range dots", withBridge(`trunk = ["10..20"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "10..20" is not a VLAN ID or range such as "100-199"`}},
		{"range open", withBridge(`trunk = ["10-"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "10-" is not a VLAN ID or range such as "100-199"`}},
		{"range negative", withBridge(`trunk = ["-5"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "-5" is not a VLAN ID or range such as "100-199"`}},
		{"range of three", withBridge(`trunk = ["1-2-3"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "1-2-3" is not a VLAN ID or range such as "100-199"`}},
		{"range spaces", withBridge(`trunk = ["10 - 20"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "10 - 20" is not a VLAN ID or range such as "100-199"`}},
		{"trunk empty string", withBridge(`trunk = [""]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "" is not a VLAN ID or range such as "100-199"`}},
		{"trunk name", withBridge(`trunk = ["all"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "all" is not a VLAN ID or range such as "100-199"`}},
		{"trunk float", withBridge(`trunk = [1.5]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: must be a VLAN ID or a range such as "100-199"`}},
		{"trunk bool", withBridge(`trunk = [10, true]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[1]: must be a VLAN ID or a range such as "100-199"`}},
		{"trunk nested array", withBridge(`trunk = [[10, 20]]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: must be a VLAN ID or a range such as "100-199"`}},
		{"trunk table", withBridge(`trunk = [{ from = 10, to = 20 }]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: must be a VLAN ID or a range such as "100-199"`}},
		{"trunk duplicate", withBridge(`trunk = [10, 20, 10]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[2]: 10 repeats 10`}},
		{"trunk duplicate spelled two ways", withBridge(`trunk = [10, "10"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[1]: "10" repeats 10`}},
		{"trunk range twice", withBridge(`trunk = ["1-5", "1-5"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[1]: "1-5" repeats "1-5"`}},
		{"trunk number in a range", withBridge(`trunk = ["10-29", 20]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[1]: 20 overlaps "10-29"`}},
		{"trunk ranges overlap", withBridge(`trunk = [10, "10-29", 20, "25-40"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[1]: "10-29" overlaps 10`,
			`t.toml:7: bridge[0].port[1].trunk[2]: 20 overlaps "10-29"`,
			`t.toml:7: bridge[0].port[1].trunk[3]: "25-40" overlaps "10-29"`}},
		{"trunk range over two", withBridge(`trunk = [10, 20, "5-25"]`), []string{
			`t.toml:7: bridge[0].port[1].trunk[2]: "5-25" overlaps 10`}},
		{"trunk element lines", withBridge(`trunk = [`, `  10,`, `  "20-10",  # backwards`, `  4095,`, `]`), []string{
			`t.toml:9: bridge[0].port[1].trunk[1]: "20-10" is backwards: write "10-20"`,
			`t.toml:10: bridge[0].port[1].trunk[2]: 4095 is out of range 1..4094`}},
		{"vlan in an inline port", doc(`[[bridge]]`, `name = "b"`, `port = [`, `  { interface = "a", vlan = 10 },`, `  { interface = "b",`, `    trunk = [10, 10] },`, `]`), []string{
			`t.toml:6: bridge[0].port[1].trunk[1]: 10 repeats 10`}},

		// Static entries on a VLAN-aware bridge.
		{"static vlan not on access port", withBridge(`vlan = 10`, `[[bridge.static]]`, mac, `port = "veth-b"`, `vlan = 30`), []string{
			`t.toml:11: bridge[0].static[0].vlan: VLAN 30 is not carried by port "veth-b" (access VLAN 10)`}},
		{"static vlan not on default port", withBridge(`vlan = 10`, `[[bridge.static]]`, mac, `port = "veth-a"`, `vlan = 10`), []string{
			`t.toml:11: bridge[0].static[0].vlan: VLAN 10 is not carried by port "veth-a" (access VLAN 1)`}},
		{"static vlan not on trunk", withBridge(`trunk = [10, 20, "100-199"]`, `native = 10`, `[[bridge.static]]`, mac, `port = "veth-b"`, `vlan = 30`), []string{
			`t.toml:12: bridge[0].static[0].vlan: VLAN 30 is not carried by port "veth-b" (trunk VLANs 10,20,100-199, native 10)`}},
		{"static vlan zero", withBridge(`vlan = 10`, `[[bridge.static]]`, mac, `port = "veth-b"`, `vlan = 0`), []string{
			`t.toml:11: bridge[0].static[0].vlan: 0 (untagged) is not a VLAN of VLAN-aware bridge br0: use 1..4094, or leave vlan out for the port's untagged VLAN`}},
		{"static vlan zero on unknown port", withBridge(`vlan = 10`, `[[bridge.static]]`, mac, `port = "veth-z"`, `vlan = 0`), []string{
			`t.toml:10: bridge[0].static[0].port: "veth-z" is not a port of bridge br0`,
			`t.toml:11: bridge[0].static[0].vlan: 0 (untagged) is not a VLAN of VLAN-aware bridge br0: use 1..4094, or leave vlan out for the port's untagged VLAN`}},
		{"static on trunk without native", withBridge(`trunk = [10]`, `[[bridge.static]]`, mac, `port = "veth-b"`), []string{
			`t.toml:8: bridge[0].static[0].vlan: port "veth-b" is a trunk with no native VLAN: set vlan`}},
		{"static before the port that makes the bridge VLAN-aware", doc(
			`[[bridge]]`, `name = "b"`,
			`[[bridge.static]]`, mac, `port = "x"`, `vlan = 10`, // 3-6
			`[[bridge.static]]`, mac, `port = "y"`, // 7-9
			`[[bridge.port]]`, `interface = "x"`,
			`[[bridge.port]]`, `interface = "y"`, `trunk = [10]`,
		), []string{
			`t.toml:6: bridge[0].static[0].vlan: VLAN 10 is not carried by port "x" (access VLAN 1)`,
			`t.toml:7: bridge[0].static[1].vlan: port "y" is a trunk with no native VLAN: set vlan`}},
		{"static duplicate through the port's VLAN", withBridge(`vlan = 10`,
			`[[bridge.static]]`, mac, `port = "veth-b"`, // 8-10
			`[[bridge.static]]`, mac, `port = "veth-b"`, `vlan = 10`), []string{
			`t.toml:12: bridge[0].static[1].mac: 02:00:00:00:00:01 vlan 10 is already a static entry at line 9`}},
		{"static on a port with VLAN errors", withBridge(`vlan = 5000`, `[[bridge.static]]`, mac, `port = "veth-b"`, `vlan = 30`), []string{
			`t.toml:7: bridge[0].port[1].vlan: 5000 is out of range 1..4094`}},
		{"static without vlan on a port with VLAN errors", withBridge(`trunk = ["x"]`, `[[bridge.static]]`, mac, `port = "veth-b"`), []string{
			`t.toml:7: bridge[0].port[1].trunk[0]: "x" is not a VLAN ID or range such as "100-199"`}},
		{"static on an unnamed VLAN-aware bridge", doc(`[[bridge]]`, `[[bridge.port]]`, `interface = "a"`, `vlan = 2`,
			`[[bridge.static]]`, mac, `port = "a"`, `vlan = 0`), []string{
			`t.toml:1: bridge[0].name: is required`,
			`t.toml:8: bridge[0].static[0].vlan: 0 (untagged) is not a VLAN of VLAN-aware bridge[0]: use 1..4094, or leave vlan out for the port's untagged VLAN`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, tc.data, tc.want)
		})
	}
}

// vids returns lo..hi.
func vids(lo, hi uint16) []uint16 {
	var s []uint16
	for v := lo; v <= hi; v++ {
		s = append(s, v)
	}
	return s
}

func TestParseVLANPorts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   []byte
		ports  []Port
		static []Static
	}{
		{"access, trunk and default", doc(
			`[[bridge]]`, `name = "br0"`,
			`[[bridge.port]]`, `interface = "p1"`, `vlan = 10`, // 3
			`[[bridge.port]]`, `interface = "p4"`, `trunk = [10, 20, "100-199"]`, `native = 10`, // 6
			`[[bridge.port]]`, `interface = "p5"`, // 10
		), []Port{
			{Interface: "p1", Mode: "auto", VLAN: 10, Line: 3},
			{Interface: "p4", Mode: "auto", Trunk: append([]uint16{10, 20}, vids(100, 199)...), Native: 10, Line: 6},
			{Interface: "p5", Mode: "auto", VLAN: 1, Line: 10},
		}, nil},
		{"trunk only, no native", doc(
			`[[bridge]]`, `name = "br0"`,
			`[[bridge.port]]`, `interface = "p1"`, `trunk = [5]`,
			`[[bridge.port]]`, `interface = "p2"`,
		), []Port{
			{Interface: "p1", Mode: "auto", Trunk: []uint16{5}, Line: 3},
			{Interface: "p2", Mode: "auto", VLAN: 1, Line: 6},
		}, nil},
		{"trunk spellings, unsorted", doc(
			`[[bridge]]`, `name = "br0"`,
			`[[bridge.port]]`, `interface = "p1"`, `trunk = [4094, "7", 0x10, "1-3", "5-5", 1_0]`, `native = 0x7`,
		), []Port{
			{Interface: "p1", Mode: "auto", Trunk: []uint16{1, 2, 3, 5, 7, 10, 16, 4094}, Native: 7, Line: 3},
		}, nil},
		{"every VLAN", doc(
			`[[bridge]]`, `name = "br0"`,
			`[[bridge.port]]`, `interface = "p1"`, `trunk = ["1-4094"]`, `native = 4094`,
			`[[bridge.port]]`, `interface = "p2"`, `vlan = 1`,
		), []Port{
			{Interface: "p1", Mode: "auto", Trunk: vids(1, 4094), Native: 4094, Line: 3},
			{Interface: "p2", Mode: "auto", VLAN: 1, Line: 7},
		}, nil},
		{"not VLAN-aware", doc(
			`[[bridge]]`, `name = "br0"`,
			`[[bridge.port]]`, `interface = "p1"`,
			`[[bridge.port]]`, `interface = "p2"`,
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "p1"`, // 7
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "p2"`, `vlan = 30`, // 10
		), []Port{
			{Interface: "p1", Mode: "auto", Line: 3},
			{Interface: "p2", Mode: "auto", Line: 5},
		}, []Static{
			{MAC: mustMAC("02:00:00:00:00:01"), Port: "p1", Line: 7},
			{MAC: mustMAC("02:00:00:00:00:01"), Port: "p2", VLAN: 30, Line: 10},
		}},
		{"static entries take the port's VLAN", doc(
			`[[bridge]]`, `name = "br0"`,
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "p1"`, // 3: before the ports
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "p2"`, // 6: native
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "p3"`, // 9: default VLAN 1
			`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "p2"`, `vlan = 200`, // 12: tagged
			`[[bridge.port]]`, `interface = "p1"`, `vlan = 10`, // 16
			`[[bridge.port]]`, `interface = "p2"`, `trunk = [20, "100-200"]`, `native = 20`, // 19
			`[[bridge.port]]`, `interface = "p3"`, // 23
		), []Port{
			{Interface: "p1", Mode: "auto", VLAN: 10, Line: 16},
			{Interface: "p2", Mode: "auto", Trunk: append([]uint16{20}, vids(100, 200)...), Native: 20, Line: 19},
			{Interface: "p3", Mode: "auto", VLAN: 1, Line: 23},
		}, []Static{
			{MAC: mustMAC("02:00:00:00:00:01"), Port: "p1", VLAN: 10, Line: 3},
			{MAC: mustMAC("02:00:00:00:00:01"), Port: "p2", VLAN: 20, Line: 6},
			{MAC: mustMAC("02:00:00:00:00:01"), Port: "p3", VLAN: 1, Line: 9},
			{MAC: mustMAC("02:00:00:00:00:01"), Port: "p2", VLAN: 200, Line: 12},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("t.toml", tc.data)
			if err != nil {
				t.Fatal(err)
			}
			b := c.Bridges[0]
			if !reflect.DeepEqual(b.Ports, tc.ports) {
				t.Errorf("ports\n%+v\nwant\n%+v", b.Ports, tc.ports)
			}
			if !reflect.DeepEqual(b.Static, tc.static) {
				t.Errorf("static entries\n%+v\nwant\n%+v", b.Static, tc.static)
			}
		})
	}
}

func TestParseVLANAwareIsPerBridge(t *testing.T) {
	c, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`,
		`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `interface = "b"`, `vlan = 3`,
		`[[bridge.port]]`, `interface = "c"`,
	))
	if err != nil {
		t.Fatal(err)
	}
	if b := &c.Bridges[0]; b.VLANAware() || b.Ports[0].VLAN != 0 {
		t.Errorf("br0 %+v: want not VLAN-aware, port VLAN 0", b)
	}
	if b := &c.Bridges[1]; !b.VLANAware() || b.Ports[1].VLAN != 1 {
		t.Errorf("br1 %+v: want VLAN-aware, default port VLAN 1", b)
	}
}

func TestPortVLANs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       Port
		trunk   bool
		pvid    uint16
		vlans   []uint16
		carries []uint16
		not     []uint16
	}{
		{"not VLAN-aware", Port{}, false, 0, nil, []uint16{0}, []uint16{1, 10}},
		{"access", Port{VLAN: 10}, false, 10, []uint16{10}, []uint16{10}, []uint16{0, 1, 11}},
		{"trunk", Port{Trunk: []uint16{10, 20, 30}}, true, 0, []uint16{10, 20, 30}, []uint16{10, 20, 30}, []uint16{0, 15, 31}},
		{"trunk with native", Port{Trunk: []uint16{10, 20}, Native: 20}, true, 20, []uint16{10, 20}, []uint16{10, 20}, []uint16{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &tc.p
			if got := p.IsTrunk(); got != tc.trunk {
				t.Errorf("IsTrunk() = %v", got)
			}
			if got := p.PVID(); got != tc.pvid {
				t.Errorf("PVID() = %d, want %d", got, tc.pvid)
			}
			if got := p.VLANs(); !reflect.DeepEqual(got, tc.vlans) {
				t.Errorf("VLANs() = %v, want %v", got, tc.vlans)
			}
			for _, v := range tc.carries {
				if !p.Carries(v) {
					t.Errorf("Carries(%d) = false", v)
				}
			}
			for _, v := range tc.not {
				if p.Carries(v) {
					t.Errorf("Carries(%d) = true", v)
				}
			}
			b := Bridge{Ports: []Port{{}, *p}}
			if got := b.VLANAware(); got != (tc.vlans != nil) {
				t.Errorf("VLANAware() = %v", got)
			}
		})
	}
	// VLANs returns a copy: callers may sort or append without touching
	// the config.
	p := Port{Trunk: []uint16{1, 2}}
	p.VLANs()[0] = 9
	if p.Trunk[0] != 1 {
		t.Errorf("VLANs() shares its slice with Trunk")
	}
}

func TestVLANRanges(t *testing.T) {
	for _, tc := range []struct {
		vids []uint16
		want string
	}{
		{nil, ""},
		{[]uint16{5}, "5"},
		{[]uint16{1, 2}, "1-2"},
		{[]uint16{1, 3}, "1,3"},
		{append([]uint16{10, 20}, vids(100, 199)...), "10,20,100-199"},
		{[]uint16{4094, 1, 4093, 1, 7}, "1,7,4093-4094"},
		{vids(1, 4094), "1-4094"},
	} {
		got := VLANRanges(tc.vids)
		if got != tc.want {
			t.Errorf("VLANRanges(%v) = %q, want %q", tc.vids, got, tc.want)
		}
		if got == "" {
			continue
		}
		// Round trip: each part is a trunk element the parser takes.
		var elems []string
		for _, part := range strings.Split(got, ",") {
			elems = append(elems, fmt.Sprintf("%q", part))
		}
		c, err := Parse("t.toml", doc(`[[bridge]]`, `name = "b"`, `[[bridge.port]]`, `interface = "p"`,
			`trunk = [`+strings.Join(elems, ", ")+`]`))
		if err != nil {
			t.Fatalf("%q does not parse back: %v", got, err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(tc.vids)))
		if back := c.Bridges[0].Ports[0].Trunk; !reflect.DeepEqual(back, want) {
			t.Errorf("%q parses back to %v, want %v", got, back, want)
		}
	}
}

// trunkBridges returns a config of bridges with one trunk port each, five
// lines per bridge.
func trunkBridges(trunks ...string) []byte {
	var lines []string
	for i, tr := range trunks {
		lines = append(lines, `[[bridge]]`, fmt.Sprintf(`name = "b%d"`, i),
			`[[bridge.port]]`, fmt.Sprintf(`interface = "p%d"`, i), `trunk = [`+tr+`]`)
	}
	return doc(lines...)
}

func TestParseVLANLimit(t *testing.T) {
	if MaxVLANs != 8191 {
		t.Fatalf("MaxVLANs = %d; the cases below assume 8191", MaxVLANs)
	}
	all := `"1-4094"`
	t.Run("two bridges of every VLAN", func(t *testing.T) {
		if _, err := Parse("t.toml", trunkBridges(all, all)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("exactly the limit", func(t *testing.T) {
		// 4094 + 4094 + 3: VLAN 1 counts again in a bridge of its own.
		if _, err := Parse("t.toml", trunkBridges(all, all, `"1-3"`)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("one over", func(t *testing.T) {
		checkErrors(t, trunkBridges(all, all, `"1-4"`), []string{
			`t.toml:11: bridge[2]: bridge b2 brings the VLANs of all bridges to 8192; the datapath holds 8191`})
	})
	t.Run("three bridges of every VLAN", func(t *testing.T) {
		// Reported once, by the bridge that crosses the limit.
		checkErrors(t, trunkBridges(all, all, all, `5`), []string{
			`t.toml:11: bridge[2]: bridge b2 brings the VLANs of all bridges to 12282; the datapath holds 8191`})
	})
	t.Run("counted once per bridge", func(t *testing.T) {
		// Ports of one bridge share its VLANs, and its default VLAN 1 is
		// among them.
		data := doc(append(strings.Split(strings.TrimSpace(string(trunkBridges(all, all))), "\n"),
			`[[bridge]]`, `name = "b2"`,
			`[[bridge.port]]`, `interface = "q0"`, `trunk = ["1-3"]`,
			`[[bridge.port]]`, `interface = "q1"`, `vlan = 2`,
			`[[bridge.port]]`, `interface = "q2"`,
		)...)
		if _, err := Parse("t.toml", data); err != nil {
			t.Fatal(err)
		}
	})
}

// checkErrors asserts that Parse fails with exactly the wanted lines.
func checkErrors(t *testing.T, data []byte, want []string) {
	t.Helper()
	cfg, err := Parse("t.toml", data)
	if err == nil {
		t.Fatalf("no error; config %+v", cfg)
	}
	if cfg != nil {
		t.Errorf("config returned with an error: %+v", cfg)
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, not Errors: %v", err, err)
	}
	got := make([]string, len(es))
	for i, e := range es {
		got[i] = e.Error()
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got errors\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if err.Error() != strings.Join(got, "\n") {
		t.Errorf("Errors.Error() = %q, want one error per line", err.Error())
	}
}

func TestParseSeveralErrorsInLineOrder(t *testing.T) {
	// Static entries are checked after ports, and a missing interface is
	// found after the port's other keys, so the order here is the sort's.
	checkErrors(t, doc(
		`[daemon]`,                  // 1
		`socket = "relative"`,       // 2
		`[[bridge]]`,                // 3
		`name = "br0"`,              // 4
		`aging = "soon"`,            // 5
		`[[bridge.static]]`,         // 6
		`mac = "01:00:00:00:00:01"`, // 7
		`port = "veth-z"`,           // 8
		`[[bridge.port]]`,           // 9
		`mode = "xdp"`,              // 10
		`vlan = 5000`,               // 11
		`[[bridge.port]]`,           // 12
		`interface = "veth-a"`,      // 13
		`[[bridge]]`,                // 14
		`name = "br0"`,              // 15
		`[[bridge.port]]`,           // 16
		`interface = "veth-a"`,      // 17
		`max_macs = -3`,             // 18
		`[extra]`,                   // 19
	), []string{
		`t.toml:2: daemon.socket: "relative" is not an absolute path`,
		`t.toml:5: bridge[0].aging: "soon" is not a duration such as "300s" or "5m"`,
		`t.toml:7: bridge[0].static[0].mac: "01:00:00:00:00:01" is a multicast address; static entries must be unicast`,
		`t.toml:8: bridge[0].static[0].port: "veth-z" is not a port of bridge br0`,
		`t.toml:9: bridge[0].port[0]: interface, patch or vxlan is required`,
		`t.toml:11: bridge[0].port[0].vlan: 5000 is out of range 1..4094`,
		`t.toml:15: bridge[1].name: "br0" is already the name of the bridge at line 4`,
		`t.toml:17: bridge[1].port[0].interface: "veth-a" is also a port of bridge br0 at line 13`,
		`t.toml:18: bridge[1].port[0].max_macs: -3 is out of range 0..16777216`,
		`t.toml:19: extra: unknown field`,
	})
}

// manyBridges returns a config with the given number of ports in each
// bridge, every bridge header and port on three lines.
func manyBridges(ports ...int) []byte {
	var lines []string
	n := 0
	for i, np := range ports {
		lines = append(lines, `[[bridge]]`, fmt.Sprintf(`name = "b%d"`, i), ``)
		for range np {
			lines = append(lines, `[[bridge.port]]`, fmt.Sprintf(`interface = "p%d"`, n), ``)
			n++
		}
	}
	return doc(lines...)
}

func TestParseLimits(t *testing.T) {
	ones := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	t.Run("max bridges", func(t *testing.T) {
		if _, err := Parse("t.toml", manyBridges(ones(MaxBridges)...)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("too many bridges", func(t *testing.T) {
		// Bridge 64 starts after 64 bridges of six lines each.
		checkErrors(t, manyBridges(ones(MaxBridges+1)...), []string{
			`t.toml:385: bridge[64]: too many bridges: at most 64 are allowed`})
	})
	t.Run("max ports per bridge", func(t *testing.T) {
		if _, err := Parse("t.toml", manyBridges(MaxPortsPerBridge)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("too many ports per bridge", func(t *testing.T) {
		// A bridge's three lines, then three a port.
		checkErrors(t, manyBridges(MaxPortsPerBridge+1), []string{
			fmt.Sprintf(`t.toml:%d: bridge[0].port[%d]: too many ports in one bridge: at most %d are allowed`,
				4+3*MaxPortsPerBridge, MaxPortsPerBridge, MaxPortsPerBridge)})
	})
	full := make([]int, MaxPorts/MaxPortsPerBridge)
	for i := range full {
		full[i] = MaxPortsPerBridge
	}
	t.Run("max ports", func(t *testing.T) {
		if MaxPorts%MaxPortsPerBridge != 0 {
			t.Fatalf("MaxPorts %d is not a number of full bridges of %d", MaxPorts, MaxPortsPerBridge)
		}
		if _, err := Parse("t.toml", manyBridges(full...)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("too many ports", func(t *testing.T) {
		// The port after MaxPorts is the first of one more bridge.
		line := len(full)*(3+3*MaxPortsPerBridge) + 4
		checkErrors(t, manyBridges(append(full, 1)...), []string{
			fmt.Sprintf(`t.toml:%d: bridge[%d].port[0]: too many ports in all bridges together: at most %d are allowed`,
				line, len(full), MaxPorts)})
	})
}

func TestParseSyntaxError(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		line int
	}{
		{"unterminated string", doc(`[[bridge]]`, `name = "br0`, `[[bridge.port]]`), 2},
		{"missing value", doc(`[[bridge]]`, `name = "br0"`, `aging =`), 3},
		{"bad escape", doc(`[[bridge]]`, `name = "br0"`, ``, `interface = "\u00"`), 4},
		{"duplicate key", doc(`[[bridge]]`, `name = "br0"`, `name = "br1"`), 3},
		{"table defined twice", doc(`[daemon]`, `[daemon]`), 2},
		{"integer overflow", doc(`[[bridge]]`, `max_entries = 99999999999999999999`), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.toml", tc.data)
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 {
				t.Fatalf("want one Errors entry, got %v", err)
			}
			// File and line are the contract; go-toml owns the wording.
			prefix := fmt.Sprintf("t.toml:%d: invalid TOML: ", tc.line)
			if got := es[0].Error(); !strings.HasPrefix(got, prefix) {
				t.Errorf("got %q, want it to start with %q", got, prefix)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := t.TempDir() + "/nope.toml"
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v does not name %s", err, path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v does not wrap fs.ErrNotExist", err)
	}
}

func TestLoadErrorNamesFile(t *testing.T) {
	_, err := Load("testdata/bad.toml")
	want := `testdata/bad.toml:7: bridge[0].port[1].mode: "fast" is not one of auto, xdp, tc`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "br.toml", Line: 7, Field: "bridge[0].port[1].mode", Msg: "bad"}, "br.toml:7: bridge[0].port[1].mode: bad"},
		{Error{File: "br.toml", Line: 0, Field: "bridge", Msg: "missing"}, "br.toml: bridge: missing"},
		{Error{File: "br.toml", Line: 3, Field: "", Msg: "invalid TOML: x"}, "br.toml:3: invalid TOML: x"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// patched is a valid pair of bridges joined by a patch, lines 1-10: br0
// has interface p1 and a patch to br1, br1 a patch back.
var patched = []string{
	`[[bridge]]`,       // 1
	`name = "br0"`,     // 2
	`[[bridge.port]]`,  // 3
	`interface = "p1"`, // 4
	`[[bridge.port]]`,  // 5
	`patch = "br1"`,    // 6
	`[[bridge]]`,       // 7
	`name = "br1"`,     // 8
	`[[bridge.port]]`,  // 9
	`patch = "br0"`,    // 10
}

// withPatch returns patched with lines inserted after line n.
func withPatch(n int, lines ...string) []byte {
	all := append(append(append([]string{}, patched[:n]...), lines...), patched[n:]...)
	return doc(all...)
}

// TestParsePatchErrors has one case per patch rule, with the exact
// messages.
func TestParsePatchErrors(t *testing.T) {
	const mac = `mac = "02:00:00:00:00:01"`
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"valid pair", doc(patched...), nil},

		// One port.
		{"interface and patch", withPatch(6, `interface = "p2"`), []string{
			`t.toml:6: bridge[0].port[1].patch: conflicts with interface at line 7: a port attaches an interface or patches to another bridge, not both`,
		}},
		{"neither interface nor patch", withPatch(6, `[[bridge.port]]`, `max_macs = 5`), []string{
			`t.toml:7: bridge[0].port[2]: interface, patch or vxlan is required`,
		}},
		{"patch not a string", withPatch(6, `[[bridge.port]]`, `patch = 1`), []string{
			`t.toml:8: bridge[0].port[2].patch: must be a string`,
		}},
		{"patch empty", withPatch(6, `[[bridge.port]]`, `patch = ""`), []string{
			`t.toml:8: bridge[0].port[2].patch: "" is not a valid bridge name: use 1 to 15 of A-Z a-z 0-9 _ . -`,
		}},
		{"patch bad bridge name", withPatch(6, `[[bridge.port]]`, `patch = "br 1"`), []string{
			`t.toml:8: bridge[0].port[2].patch: "br 1" is not a valid bridge name: use 1 to 15 of A-Z a-z 0-9 _ . -`,
		}},
		{"mode on a patch port", withPatch(6, `mode = "xdp"`), []string{
			`t.toml:7: bridge[0].port[1].mode: a patch port attaches to no interface and has no mode`,
		}},
		{"mode auto on a patch port", withPatch(6, `mode = "auto"`), []string{
			`t.toml:7: bridge[0].port[1].mode: a patch port attaches to no interface and has no mode`,
		}},
		{"max_macs on a patch port", withPatch(6, `max_macs = 5`), nil},
		{"name on an interface port", withPatch(4, `name = "uplink"`), []string{
			`t.toml:5: bridge[0].port[0].name: is for patch ports only: a port with an interface is named by it`,
		}},
		{"name not a string", withPatch(6, `name = 7`), []string{
			`t.toml:7: bridge[0].port[1].name: must be a string`,
		}},
		{"name invalid", withPatch(6, `name = "to:br1"`), []string{
			`t.toml:7: bridge[0].port[1].name: "to:br1" is not a valid port name: contains ':'`,
		}},
		{"name too long", withPatch(6, `name = "0123456789abcdef"`), []string{
			`t.toml:7: bridge[0].port[1].name: "0123456789abcdef" is not a valid port name: longer than 15 bytes`,
		}},
		{"default name too long", doc(
			`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `patch = "abcdefghijklmno"`, // 1-4
			`[[bridge]]`, `name = "abcdefghijklmno"`, `[[bridge.port]]`, `patch = "br0"`, // 5-8
		), []string{
			`t.toml:3: bridge[0].port[0].name: the default name "patch-abcdefghijklmno" is not a valid port name: longer than 15 bytes; set name`,
		}},
		{"VLAN error on a patch port", withPatch(6, `trunk = [10]`, `native = 20`), []string{
			`t.toml:8: bridge[0].port[1].native: 20 is not one of the port's trunk VLANs (10)`,
		}},

		// Names shared by interfaces and patch ports.
		{"patch name is an interface", withPatch(6, `name = "p1"`), []string{
			`t.toml:7: bridge[0].port[1].name: "p1" is already the name of a port of bridge br0 at line 4`,
		}},
		{"interface is a patch name", withPatch(6, `name = "up"`, `[[bridge.port]]`, `interface = "up"`), []string{
			`t.toml:9: bridge[0].port[2].interface: "up" is already the name of a port of bridge br0 at line 7`,
		}},
		{"interface is a default patch name", withPatch(6, `[[bridge.port]]`, `interface = "patch-br1"`), []string{
			`t.toml:8: bridge[0].port[2].interface: "patch-br1" is already the name of a port of bridge br0 at line 5`,
		}},
		{"default patch name is an interface", withPatch(4, `[[bridge.port]]`, `interface = "patch-br1"`), []string{
			`t.toml:7: bridge[0].port[2].name: the default name "patch-br1" is already the name of a port of bridge br0 at line 6; set name`,
		}},
		{"two patch ports of one name", doc(
			`[[bridge]]`, `name = "br0"`,
			`[[bridge.port]]`, `patch = "br1"`, `name = "up"`, // 3-5
			`[[bridge.port]]`, `patch = "br2"`, `name = "up"`, // 6-8
			`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `patch = "br0"`, // 9-12
			`[[bridge]]`, `name = "br2"`, `[[bridge.port]]`, `patch = "br0"`, // 13-16
		), []string{
			`t.toml:8: bridge[0].port[1].name: "up" is already the name of a port of bridge br0 at line 5`,
		}},
		{"one name in two bridges", doc(
			`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `patch = "br1"`, `name = "up"`, // 1-5
			`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `patch = "br0"`, `name = "up"`, // 6-10
		), []string{}},

		// Across bridges.
		{"one-sided patch", doc(
			`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `patch = "br1"`, // 1-4
			`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `interface = "p2"`, // 5-8
		), []string{
			`t.toml:4: bridge[0].port[0].patch: bridge br1 has no patch back to br0: declare patch = "br0" in bridge br1 too`}},
		{"one-sided patch, back to another bridge", withPatch(10,
			`[[bridge]]`, `name = "br2"`, `[[bridge.port]]`, `patch = "br0"`), []string{
			`t.toml:14: bridge[2].port[0].patch: bridge br0 has no patch back to br2: declare patch = "br2" in bridge br0 too`}},
		{"unknown peer", withPatch(6, `[[bridge.port]]`, `patch = "br9"`), []string{
			`t.toml:8: bridge[0].port[2].patch: no bridge is named "br9"`,
		}},
		{"peer without a valid name", doc(
			`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `patch = "br1"`, // 1-4
			`[[bridge]]`, `[[bridge.port]]`, `patch = "br0"`, // 5-7
		), []string{
			`t.toml:4: bridge[0].port[0].patch: no bridge is named "br1"`,
			`t.toml:5: bridge[1].name: is required`}},
		{"patch to itself", withPatch(6, `[[bridge.port]]`, `patch = "br0"`), []string{
			`t.toml:8: bridge[0].port[2].patch: "br0" is this bridge: a patch joins two bridges`,
		}},
		{"two patches between the same bridges", withPatch(6, `[[bridge.port]]`, `patch = "br1"`), []string{
			`t.toml:8: bridge[0].port[2].patch: bridge br0 already has a patch to br1 at line 6: two bridges are joined by one patch at most`,
		}},
		{"two patches between the same bridges, both sides", withPatch(10,
			`[[bridge.port]]`, `patch = "br0"`, `name = "second"`,
			`[[bridge]]`, `name = "br2"`, `[[bridge.port]]`, `patch = "br0"`), []string{
			`t.toml:12: bridge[1].port[1].patch: bridge br1 already has a patch to br0 at line 10: two bridges are joined by one patch at most`,
			`t.toml:17: bridge[2].port[0].patch: bridge br0 has no patch back to br2: declare patch = "br2" in bridge br0 too`}},
		{"cycle of three", doc(
			`[[bridge]]`, `name = "br0"`,
			`[[bridge.port]]`, `interface = "p0"`,
			`[[bridge.port]]`, `patch = "br1"`, // 5-6
			`[[bridge.port]]`, `patch = "br2"`, // 7-8
			`[[bridge]]`, `name = "br1"`,
			`[[bridge.port]]`, `patch = "br0"`, // 11-12
			`[[bridge.port]]`, `patch = "br2"`, // 13-14
			`[[bridge]]`, `name = "br2"`,
			`[[bridge.port]]`, `patch = "br1"`, // 17-18
			`[[bridge.port]]`, `patch = "br0"`, // 19-20
		), []string{
			`t.toml:20: bridge[2].port[1].patch: br2 -> br0 closes the cycle br0 -> br1 -> br2 -> br0`}},
		// a-b is complete at b's patch to a, a-c at c's to a, and b-c at
		// c's to b, which closes the cycle; b's to c is its other end.
		{"cycle closed in the middle of the file", doc(
			`[[bridge]]`, `name = "a"`, `[[bridge.port]]`, `patch = "b"`, `[[bridge.port]]`, `patch = "c"`, // 1-6
			`[[bridge]]`, `name = "b"`, `[[bridge.port]]`, `patch = "c"`, `[[bridge.port]]`, `patch = "a"`, // 7-12
			`[[bridge]]`, `name = "c"`, `[[bridge.port]]`, `patch = "a"`, `[[bridge.port]]`, `patch = "b"`, // 13-18
		), []string{
			`t.toml:18: bridge[2].port[1].patch: c -> b closes the cycle b -> a -> c -> b`}},
		{"static on a patch port with a VLAN it does not carry", withPatch(6, `vlan = 10`,
			`[[bridge.static]]`, mac, `port = "patch-br1"`, `vlan = 20`), []string{
			`t.toml:11: bridge[0].static[0].vlan: VLAN 20 is not carried by port "patch-br1" (access VLAN 10)`,
			`t.toml:15: bridge[1].port[0].patch: the ends of the patch br0 - br1 carry VLANs differently (br0: access VLAN 10; br1: no VLANs (the bridge is not VLAN-aware)): a patch does not translate VLANs, so both ends carry the same VLANs the same way`,
		}},
		{"static on a patch trunk without native", withPatch(6, `trunk = [10]`,
			`[[bridge.static]]`, mac, `port = "patch-br1"`), []string{
			`t.toml:8: bridge[0].static[0].vlan: port "patch-br1" is a trunk with no native VLAN: set vlan`,
			`t.toml:14: bridge[1].port[0].patch: the ends of the patch br0 - br1 carry VLANs differently (br0: trunk 10; br1: no VLANs (the bridge is not VLAN-aware)): a patch does not translate VLANs, so both ends carry the same VLANs the same way`,
		}},
		{"static on a patch port's peer name", withPatch(6, `[[bridge.static]]`, mac, `port = "br1"`), []string{
			`t.toml:9: bridge[0].static[0].port: "br1" is not a port of bridge br0`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.want) == 0 {
				if _, err := Parse("t.toml", tc.data); err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			checkErrors(t, tc.data, tc.want)
		})
	}
}

// chain returns n bridges b0..b(n-1) joined in a line by patches, and the
// line of b(n-1)'s patch to b(n-2), the last key of the file. Each bridge
// has an interface port, then its patch to b(i-1), then its patch to b(i+1).
func chain(n int) ([]byte, int) {
	var lines []string
	last := 0
	for i := range n {
		lines = append(lines, `[[bridge]]`, fmt.Sprintf(`name = "b%d"`, i), `[[bridge.port]]`, fmt.Sprintf(`interface = "p%d"`, i))
		for _, peer := range []int{i - 1, i + 1} {
			if peer < 0 || peer == n {
				continue
			}
			lines = append(lines, `[[bridge.port]]`, fmt.Sprintf(`patch = "b%d"`, peer))
			last = len(lines)
		}
	}
	return doc(lines...), last
}

func TestParsePatchChain(t *testing.T) {
	if MaxPatchChain != 16 {
		t.Fatalf("MaxPatchChain = %d; the cases below assume 16", MaxPatchChain)
	}
	t.Run("16 bridges", func(t *testing.T) {
		data, _ := chain(16)
		if _, err := Parse("t.toml", data); err != nil {
			t.Fatalf("a chain of 16 refused: %v", err)
		}
	})
	t.Run("17 bridges", func(t *testing.T) {
		data, line := chain(17)
		// The last pair, completed by b16's patch to b15, is refused.
		var names []string
		for i := range 17 {
			names = append(names, fmt.Sprintf("b%d", i))
		}
		checkErrors(t, data, []string{
			fmt.Sprintf(`t.toml:%d: bridge[16].port[1].patch: b16 -> b15 makes a chain of 17 bridges: %s; at most 16 may be joined by patches`, line, strings.Join(names, " -> "))})
	})
	t.Run("a tree of 17", func(t *testing.T) {
		// A star: b0 in the middle, 16 bridges around it, no chain
		// longer than 3, but 17 bridges in one walk of a broadcast.
		lines := []string{`[[bridge]]`, `name = "b0"`}
		for i := 1; i <= 16; i++ {
			lines = append(lines, `[[bridge.port]]`, fmt.Sprintf(`patch = "b%d"`, i))
		}
		var names []string
		for i := 1; i <= 16; i++ {
			lines = append(lines, `[[bridge]]`, fmt.Sprintf(`name = "b%d"`, i), `[[bridge.port]]`, `patch = "b0"`)
		}
		for i := 0; i <= 15; i++ {
			names = append(names, fmt.Sprintf("b%d", i))
		}
		checkErrors(t, doc(lines...), []string{
			fmt.Sprintf(`t.toml:%d: bridge[16].port[0].patch: b16 -> b0 joins 17 bridges by patches: %s, b16; at most 16 may be`, len(lines), strings.Join(names, ", "))})
	})
}

// TestParsePatchPorts checks what a valid patch port becomes.
func TestParsePatchPorts(t *testing.T) {
	data := doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `vlan = 10`, // 3
		`[[bridge.port]]`, `patch = "br1"`, // 6: default VLAN 1, default name
		`[[bridge.port]]`, `patch = "br2"`, `name = "up"`, `trunk = [10, 20]`, `native = 10`, `max_macs = 8`, // 8
		`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "patch-br1"`, // 14
		`[[bridge.static]]`, `mac = "02:00:00:00:00:02"`, `port = "up"`, `vlan = 20`, // 17
		`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `patch = "br0"`, `vlan = 1`, // 21
		`[[bridge]]`, `name = "br2"`, `[[bridge.port]]`, `patch = "br0"`, `trunk = [10, 20]`, `native = 10`, // 26
	)
	root, serr := parseTOML(data)
	if serr != nil {
		t.Fatal(serr.msg)
	}
	c := &checker{file: "t.toml", ifaces: map[string]portRef{}}
	bridges := c.bridges(root.vals["bridge"])
	var got []string
	for _, e := range c.errs {
		got = append(got, e.Error())
	}
	if len(got) != 0 {
		t.Errorf("errors\n\t%s", strings.Join(got, "\n\t"))
	}
	b := bridges[0]
	wantPorts := []Port{
		{Interface: "p1", Mode: "auto", VLAN: 10, Line: 3},
		{Patch: "br1", Name: "patch-br1", Mode: "auto", VLAN: 1, Line: 6},
		{Patch: "br2", Name: "up", Mode: "auto", MaxMACs: 8, Trunk: []uint16{10, 20}, Native: 10, Line: 8},
	}
	if !reflect.DeepEqual(b.Ports, wantPorts) {
		t.Errorf("ports\n%+v\nwant\n%+v", b.Ports, wantPorts)
	}
	wantStatic := []Static{
		{MAC: mustMAC("02:00:00:00:00:01"), Port: "patch-br1", VLAN: 1, Line: 14},
		{MAC: mustMAC("02:00:00:00:00:02"), Port: "up", VLAN: 20, Line: 17},
	}
	if !reflect.DeepEqual(b.Static, wantStatic) {
		t.Errorf("static entries\n%+v\nwant\n%+v", b.Static, wantStatic)
	}
	if p := bridges[1].Ports[0]; p.VLAN != 1 || p.Name != "patch-br0" {
		t.Errorf("br1's patch port %+v: want access VLAN 1, named patch-br0", p)
	}
}

func TestPortName(t *testing.T) {
	for _, tc := range []struct {
		p     Port
		patch bool
		name  string
	}{
		{Port{Interface: "veth-a"}, false, "veth-a"},
		{Port{Patch: "br1", Name: "patch-br1"}, true, "patch-br1"},
		{Port{Patch: "br1", Name: "up"}, true, "up"},
	} {
		if got := tc.p.IsPatch(); got != tc.patch {
			t.Errorf("%+v: IsPatch() = %v", tc.p, got)
		}
		if got := tc.p.PortName(); got != tc.name {
			t.Errorf("%+v: PortName() = %q, want %q", tc.p, got, tc.name)
		}
	}
}

// TestParsePortPolicies: learning, mac_limit_action, protected and the
// flood switches (issue 13).
func TestParsePortPolicies(t *testing.T) {
	cfg, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `learning = false`,
		`[[bridge.port]]`, `interface = "p2"`, `max_macs = 2`, `mac_limit_action = "forward"`,
		`[[bridge.port]]`, `interface = "p3"`, `max_macs = 2`, `mac_limit_action = "drop"`, `learning = true`,
		`[[bridge.port]]`, `interface = "p4"`, `protected = true`, `flood = false`, `mcast_flood = false`, `bcast_flood = false`,
		`[[bridge.port]]`, `interface = "p5"`, `protected = false`, `flood = true`, `mcast_flood = true`, `bcast_flood = true`,
	))
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Bridges[0].Ports
	if !ps[0].Has(flagNoLearn) || ps[0].Has(flagLimitForward) || ps[1].Has(flagNoLearn) || !ps[1].Has(flagLimitForward) || ps[2].Has(flagNoLearn) || ps[2].Has(flagLimitForward) {
		t.Errorf("ports %+v", ps)
	}
	if p := ps[3]; !p.Has(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED) || !p.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_FLOOD) || !p.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_MFLOOD) || !p.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_BFLOOD) {
		t.Errorf("p4 %+v: want protected, no floods", p)
	}
	if p := ps[4]; p.Has(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED) || p.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_FLOOD) || p.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_MFLOOD) || p.Has(tbpf.TrestleTrPortFlagsTR_PORT_NO_BFLOOD) {
		t.Errorf("p5 %+v: want the defaults", p)
	}
	checkErrors(t, doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `learning = "no"`, // 3-5
		`[[bridge.port]]`, `interface = "p2"`, `max_macs = 2`, `mac_limit_action = "flood"`, // 6-9
		`[[bridge.port]]`, `interface = "p3"`, `mac_limit_action = "forward"`, // 10-12
		`[[bridge.port]]`, `interface = "p4"`, `protected = 1`, `bcast_flood = "off"`, // 13-16
	), []string{
		`t.toml:5: bridge[0].port[0].learning: must be true or false`,
		`t.toml:9: bridge[0].port[1].mac_limit_action: "flood" is not "drop" (frames from new sources at max_macs are dropped) or "forward" (forwarded without learning)`,
		`t.toml:12: bridge[0].port[2].mac_limit_action: says what happens at max_macs, which the port does not set (or sets to 0, no limit)`,
		`t.toml:15: bridge[0].port[3].protected: must be true or false`,
		`t.toml:16: bridge[0].port[3].bcast_flood: must be true or false`,
	})
}

func TestParseStormAndMirrors(t *testing.T) {
	cfg, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `storm = { broadcast = 1000, multicast = 5000, unknown_unicast = 1_000 }`,
		`[[bridge.port]]`, `interface = "p2"`, `storm = { broadcast = 10 }`,
		`[[bridge.port]]`, `interface = "p3"`,
		`[[bridge.port]]`, `interface = "p4"`,
		`[[bridge.mirror]]`, `name = "tap0"`, `ports = ["p1", "p2"]`, `to = "p4"`,
		`[[bridge.mirror]]`, `name = "tap1"`, `ports = ["p3"]`, `direction = "in"`, `to = "p4"`,
	))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Bridges[0]
	if s := b.Ports[0].Storm; s != (Storm{1000, 5000, 1000}) {
		t.Errorf("p1 storm %+v", s)
	}
	if s := b.Ports[1].Storm; s != (Storm{Broadcast: 10}) || b.Ports[2].Storm.Any() {
		t.Errorf("p2 storm %+v, p3 %+v", s, b.Ports[2].Storm)
	}
	if len(b.Mirrors) != 2 {
		t.Fatalf("mirrors %+v", b.Mirrors)
	}
	if m := b.Mirrors[0]; m.Name != "tap0" || !m.In || !m.Out || m.To != "p4" || len(m.Ports) != 2 || m.Direction() != "both" {
		t.Errorf("mirror 0 %+v", m)
	}
	if m := b.Mirrors[1]; !m.In || m.Out || m.Direction() != "in" {
		t.Errorf("mirror 1 %+v", m)
	}
	if b.SpanPort("p4") == nil || b.SpanPort("p1") != nil || b.MirrorOf("p3") != &b.Mirrors[1] {
		t.Errorf("SpanPort/MirrorOf wrong")
	}

	vcfg, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `trunk = [10, 20, 30]`,
		`[[bridge.port]]`, `interface = "p2"`, `vlan = 10`,
		`[[bridge.port]]`, `interface = "p4"`,
		`[[bridge.mirror]]`, `name = "m"`, `ports = ["p1"]`, `to = "p4"`, `vlans = [10, "20-21"]`,
	))
	if err != nil {
		t.Fatal(err)
	}
	if m := vcfg.Bridges[0].Mirrors[0]; !slices.Equal(m.VLANs, []uint16{10, 20, 21}) {
		t.Errorf("mirror vlans %v", m.VLANs)
	}

	checkErrors(t, doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `storm = { broadcast = -1, anycast = 5 }`, // 3-5
		`[[bridge.port]]`, `interface = "p2"`, `storm = 100`, // 6-8
		`[[bridge.port]]`, `interface = "p3"`, `storm = { multicast = 0 }`, // 9-11
		`[[bridge.port]]`, `interface = "p4"`, // 12-13
		`[[bridge.port]]`, `patch = "br1"`, `storm = { broadcast = 5 }`, // 14-16
		`[[bridge.mirror]]`, `name = "m0"`, `ports = ["p1", "p9", "p1"]`, `to = "p4"`, `direction = "sideways"`, // 17-21
		`[[bridge.mirror]]`, `name = "m0"`, `ports = ["p1", "p4", "patch-br1"]`, `to = "p5"`, // 22-25
		`[[bridge.mirror]]`, `name = "m2"`, `ports = ["p2"]`, `to = "p1"`, `vlans = [10]`, // 26-30
		`[[bridge.mirror]]`, `name = "m3"`, `ports = ["p3"]`, `to = "p3"`, // 31-34
		`[[bridge.mirror]]`, `name = "m4"`, // 35-36
		`[[bridge.static]]`, `mac = "02:00:00:00:00:01"`, `port = "p4"`, // 37-39
		`[[bridge]]`, `name = "br1"`,
		`[[bridge.port]]`, `patch = "br0"`,
		`[[bridge.port]]`, `interface = "p5"`,
	), []string{
		`t.toml:5: bridge[0].port[0].storm.broadcast: -1 is out of range 1..100000000`,
		`t.toml:5: bridge[0].port[0].storm.anycast: unknown field`,
		`t.toml:8: bridge[0].port[1].storm: must be a table such as { broadcast = 1000, multicast = 5000, unknown_unicast = 1000 } (frames a second)`,
		`t.toml:11: bridge[0].port[2].storm.multicast: 0 is out of range 1..100000000`,
		`t.toml:16: bridge[0].port[4].storm: limits what a port's interface floods into the bridge, and a patch port has none`,
		`t.toml:19: bridge[0].mirror[0].ports[1]: "p9" is not a port of bridge br0: a mirror copies frames of its own bridge's ports`,
		`t.toml:19: bridge[0].mirror[0].ports[2]: "p1" is listed twice`,
		`t.toml:21: bridge[0].mirror[0].direction: "sideways" is not "in" (what the ports receive), "out" (what the bridge sends out of them) or "both"`,
		`t.toml:23: bridge[0].mirror[1].name: "m0" is already the name of the mirror at line 17`,
		`t.toml:24: bridge[0].mirror[1].ports[0]: "p1" is already mirrored by mirror "m0" at line 17: a port has one mirror`,
		`t.toml:24: bridge[0].mirror[1].ports[1]: "p4" is the span port of mirror "m0" at line 17: a span port is not mirrored`,
		`t.toml:24: bridge[0].mirror[1].ports[2]: "patch-br1" is a patch port: mirrors copy frames of ports with an interface`,
		`t.toml:25: bridge[0].mirror[1].to: "p5" is not a port of bridge br0: the span port is a [[bridge.port]] of the mirror's bridge`,
		`t.toml:29: bridge[0].mirror[2].to: "p1" is mirrored by mirror "m0" at line 17: a span port receives copies and nothing else`,
		`t.toml:30: bridge[0].mirror[2].vlans: bridge br0 is not VLAN-aware: no port has vlan or trunk`,
		`t.toml:34: bridge[0].mirror[3].to: "p3" is also one of the mirror's ports: the span port receives the copies and nothing else`,
		`t.toml:35: bridge[0].mirror[4].ports: is required`,
		`t.toml:35: bridge[0].mirror[4].to: is required`,
		`t.toml:39: bridge[0].static[0].port: "p4" is the span port of mirror "m0": no station lives there`,
	})
}

func TestParseRules(t *testing.T) {
	cfg, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`, `filter = false`, `default = "block"`,
		`[[bridge.port]]`, `interface = "p1"`,
		`[[bridge.port]]`, `interface = "p2"`,
		`[[bridge.rule]]`, `action = "pass"`, `ethertype = "arp"`,
		`[[bridge.rule]]`, `action = "pass"`, `in = "p1"`, `proto = "tcp"`, `src = "10.254.0.0/24"`, `dst = "10.254.0.2"`, `dst_port = "5201"`, `keep_state = true`,
		`[[bridge.rule]]`, `action = "block"`, `src_mac = "02:00:00:00:00:66"`, `out = "p2"`,
		`[[bridge.rule]]`, `action = "pass"`, `proto = "icmpv6"`, `icmp_type = 135`, `dst = "fe80::/10"`,
		`[[bridge.rule]]`, `action = "pass"`, `proto = 17`, `src_port = 53`, `dst_port = "1024-65535"`, `ethertype = 0x0800`,
	))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Bridges[0]
	if b.Filter || !b.DefaultBlock || len(b.Rules) != 5 {
		t.Fatalf("filter %v default block %v rules %d", b.Filter, b.DefaultBlock, len(b.Rules))
	}
	r := b.Rules[1]
	if r.Block || r.In != "p1" || !r.HasProto || r.Proto != 6 || r.Src.String() != "10.254.0.0/24" || r.Dst.String() != "10.254.0.2/32" ||
		r.DstPort != (PortRange{5201, 5201}) || r.SrcPort.Set() || !r.KeepState {
		t.Errorf("rule 2: %+v", r)
	}
	if r := b.Rules[0]; r.EtherType != 0x0806 || r.HasProto {
		t.Errorf("rule 1: %+v", r)
	}
	if r := b.Rules[2]; !r.Block || r.SrcMAC.String() != "02:00:00:00:00:66" || r.Out != "p2" {
		t.Errorf("rule 3: %+v", r)
	}
	if r := b.Rules[3]; r.Proto != 58 || !r.HasICMPType || r.ICMPType != 135 || r.Dst.String() != "fe80::/10" {
		t.Errorf("rule 4: %+v", r)
	}
	if r := b.Rules[4]; r.Proto != 17 || r.SrcPort != (PortRange{53, 53}) || r.DstPort != (PortRange{1024, 65535}) || r.EtherType != 0x0800 {
		t.Errorf("rule 5: %+v", r)
	}

	checkErrors(t, doc(
		`[[bridge]]`, `name = "br0"`, `default = "drop"`, // 1-3
		`[[bridge.port]]`, `interface = "p1"`, // 4-5
		`[[bridge.rule]]`, `action = "allow"`, `src = "10.0.0.1/24"`, `dst = "10.0.0.0/33"`, // 6-9
		`[[bridge.rule]]`, `proto = "tcp"`, `ethertype = "arp"`, `in = "p9"`, // 10-13
		`[[bridge.rule]]`, `action = "block"`, `keep_state = true`, `dst_port = "2000-1000"`, `proto = "tcp"`, // 14-18
		`[[bridge.rule]]`, `action = "pass"`, `src_port = 80`, // 19-21
		`[[bridge.rule]]`, `action = "pass"`, `src = "10.0.0.0/8"`, `dst = "fd00::/8"`, // 22-25
		`[[bridge.rule]]`, `action = "pass"`, `proto = "icmp"`, `dst = "fd00::1"`, `vlan = 10`, // 26-30
		`[[bridge.rule]]`, `action = "pass"`, `icmp_type = 8`, `proto = "gre"`, `ethertype = 12`, `src_mac = "zz"`, // 31-36
		`[[bridge.rule]]`, `action = "pass"`, `ethertype = "arp"`, `keep_state = true`, `colour = "red"`, // 37-41
	), []string{
		`t.toml:3: bridge[0].default: "drop" is not "pass" or "block": what a frame no rule matches gets`,
		`t.toml:7: bridge[0].rule[0].action: "allow" is not "pass" or "block"`,
		`t.toml:8: bridge[0].rule[0].src: "10.0.0.1/24" has host bits set: the network is "10.0.0.0/24"`,
		`t.toml:9: bridge[0].rule[0].dst: "10.0.0.0/33" is not an IPv4 or IPv6 prefix such as "10.0.0.0/24"`,
		`t.toml:10: bridge[0].rule[1].action: is required: "pass" or "block"`,
		`t.toml:12: bridge[0].rule[1].ethertype: 0x0806 is not IP, and the rule matches IP fields (proto, src, dst, ports, icmp_type): it can never match`,
		`t.toml:13: bridge[0].rule[1].in: "p9" is not a port of bridge br0`,
		`t.toml:16: bridge[0].rule[2].keep_state: is for pass rules: a blocked frame opens no connection`,
		`t.toml:17: bridge[0].rule[2].dst_port: "2000-1000" is an empty range: its first port is above its last`,
		`t.toml:21: bridge[0].rule[3].src_port: matches TCP and UDP ports: set proto = "tcp" or "udp"`,
		`t.toml:25: bridge[0].rule[4].dst: dst fd00::/8 is IPv6, but src 10.0.0.0/8 is IPv4: the rule can never match`,
		`t.toml:29: bridge[0].rule[5].dst: dst fd00::1/128 is IPv6, but proto icmp is IPv4: the rule can never match`,
		`t.toml:30: bridge[0].rule[5].vlan: bridge br0 is not VLAN-aware (no port has vlan or trunk): its frames have no VLAN to match`,
		`t.toml:33: bridge[0].rule[6].icmp_type: matches ICMP types: set proto = "icmp" or "icmpv6"`,
		`t.toml:34: bridge[0].rule[6].proto: "gre" is not a protocol: "tcp", "udp", "icmp", "icmpv6" or a number 0..255`,
		`t.toml:35: bridge[0].rule[6].ethertype: 12 is out of range 1536..65535`,
		`t.toml:36: bridge[0].rule[6].src_mac: "zz" is not a MAC address such as 02:00:00:00:00:01`,
		`t.toml:40: bridge[0].rule[7].keep_state: tracks IP connections, and the rule matches EtherType 0x0806`,
		`t.toml:41: bridge[0].rule[7].colour: unknown field`,
	})
}

func TestParseRuleArgs(t *testing.T) {
	cfg, err := Parse("t.toml", []byte(doc(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "p1"`, `[[bridge.port]]`, `interface = "p2"`)))
	if err != nil {
		t.Fatal(err)
	}
	b := &cfg.Bridges[0]
	r, err := ParseRuleArgs(b, []string{"action=pass", "in=p1", "proto=tcp", "dst=10.0.0.2", "dst_port=5201", "keep_state=true"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Block || r.In != "p1" || r.Proto != 6 || r.Dst.String() != "10.0.0.2/32" || r.DstPort != (PortRange{5201, 5201}) || !r.KeepState {
		t.Errorf("parsed %+v", r)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"proto=tcp"}, `action: is required: "pass" or "block"`},
		{[]string{"action=pass", "in=p9"}, `in: "p9" is not a port of bridge br0`},
		{[]string{"action=pass", "proto=tcp", "ethertype=arp"}, "can never match"},
		{[]string{"action=block", "keep_state=true"}, "keep_state: is for pass rules"},
		{[]string{"action=pass", "dst_port=2000-1000", "proto=udp"}, "empty range"},
		{[]string{"action"}, `"action": want KEY=VALUE`},
		{[]string{"action=pass", "colour=red"}, "colour: unknown field"},
		{[]string{"action=pass", "src=10.0.0.1/8"}, "host bits set"},
	} {
		_, err := ParseRuleArgs(b, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

func TestParseLockedPorts(t *testing.T) {
	cfg, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `locked = true`, `allowed_macs = ["02:00:00:00:00:01", "02-00-00-00-00-02"]`,
		`[[bridge.port]]`, `interface = "p2"`, `locked = true`,
		`[[bridge.port]]`, `interface = "p3"`,
		`[[bridge.static]]`, `mac = "02:00:00:00:00:03"`, `port = "p2"`,
	))
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Bridges[0].Ports
	if !ps[0].Has(flagLocked) || !ps[1].Has(flagLocked) || ps[2].Has(flagLocked) {
		t.Errorf("locked: %t %t %t, want true true false", ps[0].Has(flagLocked), ps[1].Has(flagLocked), ps[2].Has(flagLocked))
	}
	got := ps[0].AllowedStatics()
	if len(got) != 2 || got[0].MAC.String() != "02:00:00:00:00:01" || got[1].MAC.String() != "02:00:00:00:00:02" || got[0].Port != "p1" || got[0].VLAN != 0 {
		t.Errorf("p1's allowed statics %+v, want 02:..:01 and 02:..:02 on p1, untagged", got)
	}

	// On a VLAN-aware bridge, an allowed address is bound in every VLAN
	// the port carries.
	cfg, err = Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `trunk = [10, 20]`, `locked = true`, `allowed_macs = ["02:00:00:00:00:01"]`,
		`[[bridge.port]]`, `interface = "p2"`, `vlan = 30`, `locked = true`, `allowed_macs = ["02:00:00:00:00:01"]`,
	))
	if err != nil {
		t.Fatal(err)
	}
	var vlans []uint16
	for _, s := range cfg.Bridges[0].Ports[0].AllowedStatics() {
		vlans = append(vlans, s.VLAN)
	}
	if !slices.Equal(vlans, []uint16{10, 20}) {
		t.Errorf("trunk's allowed address in VLANs %v, want [10 20]", vlans)
	}

	checkErrors(t, doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `locked = "yes"`, // 3-5
		`[[bridge.port]]`, `interface = "p2"`, `allowed_macs = ["02:00:00:00:00:01"]`, // 6-8
		`[[bridge.port]]`, `interface = "p3"`, `locked = true`, `allowed_macs = ["01:00:5e:00:00:01", "00:00:00:00:00:00", "nope", "02:00:00:00:00:09", "02:00:00:00:00:09", 7]`, // 9-12
		`[[bridge.port]]`, `interface = "p4"`, `locked = true`, `allowed_macs = "02:00:00:00:00:01"`, // 13-16
		`[[bridge.port]]`, `interface = "p5"`, `locked = true`, `allowed_macs = ["02:00:00:00:00:05"]`, // 17-20
		`[[bridge.port]]`, `patch = "br1"`, `locked = true`, // 21-23
		`[[bridge.static]]`, `mac = "02:00:00:00:00:05"`, `port = "p1"`, // 24-26
		`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `patch = "br0"`,
	), []string{
		`t.toml:5: bridge[0].port[0].locked: must be true or false`,
		`t.toml:8: bridge[0].port[1].allowed_macs: says which sources a locked port takes: set locked = true`,
		`t.toml:12: bridge[0].port[2].allowed_macs[0]: "01:00:5e:00:00:01" is a multicast address; a station sends from a unicast one`,
		`t.toml:12: bridge[0].port[2].allowed_macs[1]: "00:00:00:00:00:00" is the zero address`,
		`t.toml:12: bridge[0].port[2].allowed_macs[2]: "nope" is not a MAC address such as 02:00:00:00:00:01`,
		`t.toml:12: bridge[0].port[2].allowed_macs[4]: 02:00:00:00:00:09 is listed twice`,
		`t.toml:12: bridge[0].port[2].allowed_macs[5]: must be a string`,
		`t.toml:16: bridge[0].port[3].allowed_macs: must be an array of MAC addresses, such as ["02:00:00:00:00:01"]`,
		`t.toml:20: bridge[0].port[4].allowed_macs: 02:00:00:00:00:05 is bound to port "p1" already (vlan 0: a static entry, or its allowed_macs): an address is bound to one port`,
		`t.toml:23: bridge[0].port[5].locked: binds the sources of a port's host, and a patch port has none`,
	})
}

func TestParsePortArgsLocked(t *testing.T) {
	b := &Bridge{Name: "br0", Static: []Static{{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 5}, Port: "p1"}}}
	p, err := ParsePortArgs(b, []string{"interface=p9", "locked=true", "allowed_macs=02:00:00:00:00:01,02:00:00:00:00:02"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Has(flagLocked) || len(p.AllowedMACs) != 2 || p.AllowedMACs[1].String() != "02:00:00:00:00:02" {
		t.Errorf("port %+v: want locked with two allowed addresses", p)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"interface=p9", "allowed_macs=02:00:00:00:00:01"}, "allowed_macs: says which sources a locked port takes: set locked = true"},
		{[]string{"interface=p9", "locked=true", "allowed_macs=ff:ff:ff:ff:ff:ff"}, `allowed_macs[0]: "ff:ff:ff:ff:ff:ff" is a multicast address`},
		{[]string{"interface=p9", "locked=true", "allowed_macs=02:00:00:00:00:05"}, `allowed_macs: 02:00:00:00:00:05 is bound to port "p1" already`},
	} {
		_, err := ParsePortArgs(b, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
}

// TestNeighbours: neigh_suppress is a bridge's boolean, false by default;
// the static neighbours of a port are its allowed_ips with its one
// allowed MAC and each allowed MAC's EUI-64 link-local address, in every
// VLAN it carries, on ip_guard ports only.
func TestNeighbours(t *testing.T) {
	cfg, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`, `neigh_suppress = true`,
		`[[bridge.port]]`, `interface = "p1"`, `ip_guard = true`, `allowed_ips = ["10.0.0.6", "fd00::6"]`, `locked = true`, `allowed_macs = ["02:00:00:00:00:06"]`, `trunk = [10, 20]`,
		`[[bridge.port]]`, `interface = "p2"`, `ip_guard = true`, `allowed_ips = ["10.0.0.7"]`, `locked = true`, `allowed_macs = ["02:00:00:00:00:07", "02:00:00:00:00:08"]`, `vlan = 10`,
		`[[bridge.port]]`, `interface = "p3"`, `ip_guard = true`, `allowed_ips = ["10.0.0.9"]`, `vlan = 10`,
		`[[bridge.port]]`, `interface = "p4"`, `locked = true`, `allowed_macs = ["02:00:00:00:00:04"]`, `vlan = 10`,
		`[[bridge]]`, `name = "br1"`,
	))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Bridges[0].NeighSuppress || cfg.Bridges[1].NeighSuppress {
		t.Errorf("neigh_suppress %t %t, want true false", cfg.Bridges[0].NeighSuppress, cfg.Bridges[1].NeighSuppress)
	}
	str := func(ns []Neighbour) string {
		var w []string
		for _, n := range ns {
			w = append(w, fmt.Sprintf("%v=%v@%d", n.Addr, n.MAC, n.VLAN))
		}
		return strings.Join(w, " ")
	}
	ps := cfg.Bridges[0].Ports
	for i, want := range []string{
		"10.0.0.6=02:00:00:00:00:06@10 fd00::6=02:00:00:00:00:06@10 fe80::ff:fe00:6=02:00:00:00:00:06@10 " +
			"10.0.0.6=02:00:00:00:00:06@20 fd00::6=02:00:00:00:00:06@20 fe80::ff:fe00:6=02:00:00:00:00:06@20",
		// Two MACs: which holds 10.0.0.7 is not said; their link-local addresses are theirs.
		"fe80::ff:fe00:7=02:00:00:00:00:07@10 fe80::ff:fe00:8=02:00:00:00:00:08@10",
		"", // no MAC
		"", // no ip_guard
	} {
		if got := str(ps[i].Neighbours()); got != want {
			t.Errorf("%s's neighbours %q, want %q", ps[i].Interface, got, want)
		}
	}
	if _, err := Parse("t.toml", doc(`[[bridge]]`, `name = "br0"`, `neigh_suppress = "yes"`)); err == nil ||
		!strings.Contains(err.Error(), "t.toml:3: bridge[0].neigh_suppress: must be true or false") {
		t.Errorf("neigh_suppress = \"yes\": error %v, want one of the key", err)
	}
}

func TestParseIPGuard(t *testing.T) {
	cfg, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `ip_guard = true`, `allowed_ips = ["10.0.0.5", "fd00::5", "fe80::1"]`,
		`[[bridge.port]]`, `interface = "p2"`, `ip_guard = true`, `allowed_ips = ["10.0.0.6"]`, `locked = true`, `allowed_macs = ["02:00:00:00:00:06"]`,
		`[[bridge.port]]`, `interface = "p3"`, `ip_guard = false`,
	))
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Bridges[0].Ports
	if !ps[0].Has(flagIPGuard) || !ps[1].Has(flagIPGuard) || ps[2].Has(flagIPGuard) {
		t.Errorf("ip_guard: %t %t %t, want true true false", ps[0].Has(flagIPGuard), ps[1].Has(flagIPGuard), ps[2].Has(flagIPGuard))
	}
	str := func(as []netip.Addr) string { return fmt.Sprint(as) }
	if got := str(ps[0].AllowedIPs); got != "[10.0.0.5 fd00::5 fe80::1]" {
		t.Errorf("p1's allowed_ips %s", got)
	}
	if got := str(ps[0].GuardIPs()); got != "[10.0.0.5 fd00::5 fe80::1]" {
		t.Errorf("p1's guarded addresses %s, want its allowed_ips sorted", got)
	}
	// A locked port's allowed_macs add their EUI-64 link-local addresses.
	if got := str(ps[1].GuardIPs()); got != "[10.0.0.6 fe80::ff:fe00:6]" {
		t.Errorf("p2's guarded addresses %s, want 10.0.0.6 and fe80::ff:fe00:6", got)
	}
	if got := ps[2].GuardIPs(); got != nil {
		t.Errorf("p3's guarded addresses %v, want none", got)
	}

	many := make([]string, MaxAllowedIPs+1)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("10.1.%d.%d", i/256, i%256))
	}
	checkErrors(t, doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `ip_guard = true`, // 3-5
		`[[bridge.port]]`, `interface = "p2"`, `allowed_ips = ["10.0.0.1"]`, // 6-8
		`[[bridge.port]]`, `interface = "p3"`, `ip_guard = true`,
		`allowed_ips = ["10.0.0.0/24", "nope", "0.0.0.0", "::", "ff02::1", "255.255.255.255", "127.0.0.1", "::ffff:10.0.0.1", "fe80::1%eth0", "10.0.0.1", "10.0.0.1", 7]`, // 9-12
		`[[bridge.port]]`, `interface = "p4"`, `ip_guard = true`, `allowed_ips = "10.0.0.1"`, // 13-16
		`[[bridge.port]]`, `interface = "p5"`, `ip_guard = true`, `allowed_ips = [`+strings.Join(many, ", ")+`]`, // 17-20
		`[[bridge.port]]`, `patch = "br1"`, `ip_guard = true`, `allowed_ips = ["10.0.0.1"]`, // 21-24
		`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `patch = "br0"`,
	), []string{
		`t.toml:5: bridge[0].port[0].ip_guard: binds the port to its addresses, and it lists none: set allowed_ips (without one, every IP frame of the port would be dropped)`,
		`t.toml:8: bridge[0].port[1].allowed_ips: says which addresses an ip_guard port's host uses: set ip_guard = true`,
		`t.toml:12: bridge[0].port[2].allowed_ips[0]: "10.0.0.0/24" is a prefix: ip_guard binds addresses, each written alone, such as "10.0.0.5"`,
		`t.toml:12: bridge[0].port[2].allowed_ips[1]: "nope" is not an IP address, such as "10.0.0.5" or "fd00::5"`,
		`t.toml:12: bridge[0].port[2].allowed_ips[2]: "0.0.0.0" is the unspecified address, which ip_guard allows only for DHCP and duplicate address detection`,
		`t.toml:12: bridge[0].port[2].allowed_ips[3]: "::" is the unspecified address, which ip_guard allows only for DHCP and duplicate address detection`,
		`t.toml:12: bridge[0].port[2].allowed_ips[4]: "ff02::1" is a group address: a host sends from a unicast one`,
		`t.toml:12: bridge[0].port[2].allowed_ips[5]: "255.255.255.255" is a group address: a host sends from a unicast one`,
		`t.toml:12: bridge[0].port[2].allowed_ips[6]: "127.0.0.1" is a loopback address, which never leaves its host`,
		`t.toml:12: bridge[0].port[2].allowed_ips[7]: "::ffff:10.0.0.1" is an IPv4-mapped IPv6 address, which no frame carries: write it as IPv4 (10.0.0.1)`,
		`t.toml:12: bridge[0].port[2].allowed_ips[8]: "fe80::1%eth0" has a zone: write the address alone`,
		`t.toml:12: bridge[0].port[2].allowed_ips[10]: 10.0.0.1 is listed twice`,
		`t.toml:12: bridge[0].port[2].allowed_ips[11]: must be a string`,
		`t.toml:16: bridge[0].port[3].allowed_ips: must be an array of IP addresses, such as ["10.0.0.5", "fd00::5"]`,
		`t.toml:20: bridge[0].port[4].allowed_ips: lists 65 addresses, more than 64`,
		`t.toml:23: bridge[0].port[5].ip_guard: binds the addresses of a port's host, and a patch port has none`,
	})
}

func TestParsePortArgsIPGuard(t *testing.T) {
	b := &Bridge{Name: "br0"}
	p, err := ParsePortArgs(b, []string{"interface=p9", "ip_guard=true", "allowed_ips=10.0.0.5,fd00::5"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Has(flagIPGuard) || fmt.Sprint(p.AllowedIPs) != "[10.0.0.5 fd00::5]" {
		t.Errorf("port %+v: want ip_guard with 10.0.0.5 and fd00::5", p)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"interface=p9", "allowed_ips=10.0.0.5"}, "allowed_ips: says which addresses an ip_guard port's host uses: set ip_guard = true"},
		{[]string{"interface=p9", "ip_guard=true"}, "ip_guard: binds the port to its addresses, and it lists none"},
		{[]string{"interface=p9", "ip_guard=true", "allowed_ips=10.0.0.0/8"}, `allowed_ips[0]: "10.0.0.0/8" is a prefix`},
	} {
		_, err := ParsePortArgs(b, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
}

func TestParseVLANTags(t *testing.T) {
	cfg, err := Parse("t.toml", doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `trunk = [10, 20]`, `native = 10`, `native_tagged = true`,
		`[[bridge.port]]`, `interface = "p2"`, `vlan = 10`, `qinq = true`,
		`[[bridge.port]]`, `interface = "p3"`, `qinq = true`, // VLAN 1, as the bridge is VLAN-aware
		`[[bridge.port]]`, `interface = "p4"`, `trunk = [10]`, `native = 10`, `native_tagged = false`,
	))
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Bridges[0].Ports
	if !ps[0].Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED) || ps[0].Has(flagQinQ) || ps[1].Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED) || !ps[1].Has(flagQinQ) || !ps[2].Has(flagQinQ) || ps[2].VLAN != 1 || ps[3].Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED) {
		t.Errorf("native_tagged %t %t %t %t, qinq %t %t %t %t (p3 in VLAN %d), want native_tagged on p1 only, qinq on p2 and p3 (VLAN 1)",
			ps[0].Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED), ps[1].Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED), ps[2].Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED), ps[3].Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED), ps[0].Has(flagQinQ), ps[1].Has(flagQinQ), ps[2].Has(flagQinQ), ps[3].Has(flagQinQ), ps[2].VLAN)
	}

	checkErrors(t, doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "p1"`, `trunk = [10, 20]`, `native_tagged = true`, // 3-6
		`[[bridge.port]]`, `interface = "p2"`, `vlan = 10`, `native_tagged = true`, // 7-10
		`[[bridge.port]]`, `interface = "p3"`, `trunk = [10, 20]`, `native = 10`, `qinq = true`, // 11-15
		`[[bridge.port]]`, `interface = "p4"`, `native_tagged = "yes"`, `qinq = 1`, // 16-19
		`[[bridge.port]]`, `patch = "br1"`, `qinq = true`, // 20-22
		`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `patch = "br0"`, // 23-26
		`[[bridge]]`, `name = "br2"`, // 27-28
		`[[bridge.port]]`, `interface = "p5"`, `qinq = true`, // 29-31
		`[[bridge]]`, `name = "br3"`, `[[bridge.port]]`, `interface = "p6"`, `vlan = 10`, // 32-36
		`[[bridge.port]]`, `patch = "br4"`, `trunk = [10]`, `native = 10`, `native_tagged = true`, // 37-41
		`[[bridge]]`, `name = "br4"`, `[[bridge.port]]`, `patch = "br3"`, `trunk = [10]`, // 42-46
	), []string{
		`t.toml:6: bridge[0].port[0].native_tagged: tags a trunk's native VLAN on the way out: set trunk and native too`,
		`t.toml:10: bridge[0].port[1].native_tagged: tags a trunk's native VLAN on the way out: set trunk and native too`,
		`t.toml:15: bridge[0].port[2].qinq: is for access ports: a trunk's outer tag is its VLAN, and what follows is that VLAN's payload`,
		`t.toml:18: bridge[0].port[3].native_tagged: must be true or false`,
		`t.toml:19: bridge[0].port[3].qinq: must be true or false`,
		`t.toml:22: bridge[0].port[4].qinq: is for access ports of an interface, and a patch port's frames were classified in the bridge they left`,
		`t.toml:31: bridge[2].port[0].qinq: is for access ports of a VLAN-aware bridge, and bridge br2 is not one: set vlan too`,
		`t.toml:41: bridge[3].port[1].native_tagged: is for trunks of an interface: a frame crossing a patch port keeps its VLAN`,
	})
}

func TestParsePortArgsVLANTags(t *testing.T) {
	aware := &Bridge{Name: "br0", Ports: []Port{{Interface: "p1", VLAN: 10}}}
	p, err := ParsePortArgs(aware, []string{"interface=p9", "trunk=10,20", "native=10", "native_tagged=true"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED) || p.Native != 10 {
		t.Errorf("port %+v: want a trunk with native 10 tagged", p)
	}
	if p, err = ParsePortArgs(aware, []string{"interface=p9", "qinq=true"}); err != nil || !p.Has(flagQinQ) || p.VLAN != 1 {
		t.Errorf("qinq=true on a VLAN-aware bridge: port %+v, error %v; want a qinq access port of VLAN 1", p, err)
	}
	// Whether the bridge is VLAN-aware is the caller's (the daemon's
	// port add): the port's own keys are all it checks.
	for _, tc := range []struct {
		b    *Bridge
		args []string
		want string
	}{
		{aware, []string{"interface=p9", "trunk=10,20", "native_tagged=true"}, "native_tagged: tags a trunk's native VLAN on the way out: set trunk and native too"},
		{aware, []string{"interface=p9", "trunk=10,20", "native=10", "qinq=true"}, "qinq: is for access ports"},
		{aware, []string{"interface=p9", "qinq=maybe"}, "qinq"},
	} {
		_, err := ParsePortArgs(tc.b, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
}

// A span port takes every VLAN tagged: qinq = true is refused on it, as
// vlan, trunk and native are; qinq = false asks for nothing and passes.
func TestSpanPortRefusesQinQ(t *testing.T) {
	base := []string{
		`[[bridge]]`,        // 1
		`name = "br0"`,      // 2
		`[[bridge.port]]`,   // 3
		`interface = "p1"`,  // 4
		`vlan = 10`,         // 5
		`[[bridge.port]]`,   // 6
		`interface = "p2"`,  // 7
		`qinq = true`,       // 8
		`[[bridge.mirror]]`, // 9
		`name = "m0"`,       // 10
		`ports = ["p1"]`,    // 11
		`to = "p2"`,         // 12
	}
	with := func(v string) []byte {
		lines := slices.Clone(base)
		lines[7] = "qinq = " + v
		return doc(lines...)
	}
	checkErrors(t, with("true"), []string{
		`t.toml:8: bridge[0].port[1].qinq: port "p2" is the span port of mirror "m0": it takes every VLAN tagged, and has no qinq`,
	})
	if _, err := Parse("t.toml", with("false")); err != nil {
		t.Errorf("qinq = false on a span port: %v", err)
	}
}

// TestServiceGuardKeys: ra_guard and dhcp_guard set their flags, alone or
// beside ip_guard, and are refused on patch and overlay ports.
func TestServiceGuardKeys(t *testing.T) {
	b := &Bridge{Name: "br0"}
	p, err := ParsePortArgs(b, []string{"interface=p9", "ra_guard=true", "dhcp_guard=true"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Has(tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD) || !p.Has(tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD) || p.Has(flagIPGuard) {
		t.Errorf("ra_guard=true dhcp_guard=true: flags %#x", p.Policy.Flags)
	}
	checkErrors(t, doc(
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `patch = "br1"`, `ra_guard = true`, // 3-5
		`[[bridge.port]]`, `patch = "br2"`, `dhcp_guard = true`, // 6-8
		`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `patch = "br0"`,
		`[[bridge]]`, `name = "br2"`, `[[bridge.port]]`, `patch = "br0"`,
	), []string{
		`t.toml:5: bridge[0].port[0].ra_guard: guards a host's port, and a patch port's frames were guarded at the port they entered by`,
		`t.toml:8: bridge[0].port[1].dhcp_guard: guards a host's port, and a patch port's frames were guarded at the port they entered by`,
	})
}
