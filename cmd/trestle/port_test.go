package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
)

func TestPortCommands(t *testing.T) {
	entry := ctl.PortEntry{Bridge: "br0", Origin: "run", Owner: "vm1", PortStatus: ctl.PortStatus{Name: "tap1", Interface: "tap1", State: "up", Mode: "tc", VLAN: 10}}
	f := startFake(t, func(r ctl.Request) (any, error) {
		switch r.Cmd {
		case ctl.CmdPortAdd:
			return entry, nil
		case ctl.CmdPortDel:
			return []ctl.PortEntry{entry}, nil
		case ctl.CmdPortList:
			return []ctl.PortEntry{{Bridge: "br0", Origin: "file", PortStatus: ctl.PortStatus{Name: "p1", State: "up", Mode: "xdp"}}, entry}, nil
		}
		return nil, nil
	})
	env, asked := f.env(), f.requests
	out, code := runCLI(t, env, "port", "add", "br0", "tap1", "vlan=10", "owner=vm1", "max_macs=4")
	if code != 0 || out != "added port tap1 to br0: up at tc\n" {
		t.Errorf("port add: %d %q", code, out)
	}
	r := asked()[0]
	if r.Cmd != ctl.CmdPortAdd || r.Bridge != "br0" || r.Port != "tap1" || r.Owner != "vm1" || !slices.Equal(r.Args, []string{"vlan=10", "max_macs=4"}) {
		t.Errorf("port add sent %+v", r)
	}
	if out, code = runCLI(t, env, "port", "del", "br0", "--owner", "vm1"); code != 0 || !strings.Contains(out, `removed 1 ports of owner "vm1" from br0: tap1`) {
		t.Errorf("port del --owner: %d %q", code, out)
	}
	if r := asked()[1]; r.Owner != "vm1" || r.Port != "" {
		t.Errorf("port del --owner sent %+v", r)
	}
	out, code = runCLI(t, env, "port", "list")
	if code != 0 || !strings.Contains(out, "BRIDGE  PORT  ORIGIN  OWNER  STATE  MODE  VLANS") || !strings.Contains(out, "br0     tap1  run     vm1    up     tc    10") || !strings.Contains(out, "br0     p1    file    -      up     xdp   -") {
		t.Errorf("port list:\n%s", out)
	}
	if out, code = runCLI(t, env, "port", "list", "--json"); code != 0 || !strings.Contains(out, `"origin": "run"`) || !strings.Contains(out, `"owner": "vm1"`) {
		t.Errorf("port list --json: %d %s", code, out)
	}
	n := len(asked())
	for _, bad := range [][]string{
		{"port", "del", "br0"},
		{"port", "del", "br0", "tap1", "--owner", "vm1"},
		{"port", "add", "br0"},
	} {
		if out, code := runCLI(t, env, bad...); code == 0 {
			t.Errorf("%v: accepted: %q", bad, out)
		}
	}
	if len(asked()) != n {
		t.Error("bad arguments reached the daemon")
	}
	if out, _ := runCLI(t, nil, "port", "add", "--help"); !strings.Contains(out, "trestle port add br0 tap-vm1 vlan=10") || !strings.Contains(out, "storm.broadcast") {
		t.Errorf("port add --help teaches nothing:\n%s", out)
	}
}
