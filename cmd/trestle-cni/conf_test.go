package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
)

// conf is a network configuration of bridge br0 with extra keys.
func conf(extra string) []byte {
	s := `{"cniVersion": "1.1.0", "name": "pods", "type": "trestle", "bridge": "br0"`
	if extra != "" {
		s += ", " + extra
	}
	return []byte(s + "}")
}

func code(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func TestLoadConfDefaults(t *testing.T) {
	n, err := loadConf(conf(""), "")
	if err != nil {
		t.Fatal(err)
	}
	if n.Socket != ctl.DefaultSocket || n.Bridge != "br0" || n.VLAN != 0 || n.trunk != nil || n.mac != "" || n.MTU != 0 {
		t.Errorf("defaults: %+v", n)
	}
	if a := n.portArgs("02:00:00:00:00:01", nil); len(a) != 0 {
		t.Errorf("port args of a plain network: %q", a)
	}
}

// TestLoadConfRefused: the bridge plugin's keys that trestle does not have
// are refused with code 2 and a message naming the key, when they ask for
// something; spelled out at their zero value they pass.
func TestLoadConfRefused(t *testing.T) {
	for _, c := range []struct{ extra, want string }{
		{`"isGateway": true`, "isGateway"},
		{`"isDefaultGateway": true`, "isDefaultGateway"},
		{`"forceAddress": true`, "forceAddress"},
		{`"ipMasq": true`, "ipMasq"},
		{`"ipMasqBackend": "nftables"`, "ipMasqBackend"},
		{`"hairpinMode": true`, "hairpinMode"},
		{`"promiscMode": true`, "promiscMode"},
		{`"preserveDefaultVlan": true`, "preserveDefaultVlan"},
		{`"disableContainerInterface": true`, "disableContainerInterface"},
	} {
		_, err := loadConf(conf(c.extra), "")
		if err == nil || code(err) != types.ErrUnsupportedField || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "not supported by trestle") {
			t.Errorf("%s: err %v (code %d), want code 2 naming %s", c.extra, err, code(err), c.want)
		}
	}
	for _, extra := range []string{`"isGateway": false`, `"ipMasq": false`, `"hairpinMode": false`, `"macspoofchk": false`, `"promiscMode": false`, `"ipMasqBackend": null`} {
		if _, err := loadConf(conf(extra), ""); err != nil {
			t.Errorf("%s: %v, want accepted (asks for nothing)", extra, err)
		}
	}
}

func TestLoadConfInvalid(t *testing.T) {
	for _, c := range []struct{ stdin, args, want string }{
		{`{"cniVersion": "1.1.0", "name": "pods", "type": "trestle"}`, "", "bridge: missing"},
		{string(conf(`"vlan": 4095`)), "", "vlan: 4095"},
		{string(conf(`"vlan": -1`)), "", "vlan: -1"},
		{string(conf(`"vlanTrunk": [{"id": 0}]`)), "", "id 0 is not a VLAN"},
		{string(conf(`"vlanTrunk": [{"id": 4095}]`)), "", "id 4095"},
		{string(conf(`"vlanTrunk": [{"minID": 10}]`)), "", "minID and maxID go together"},
		{string(conf(`"vlanTrunk": [{"maxID": 10}]`)), "", "minID and maxID go together"},
		{string(conf(`"vlanTrunk": [{"minID": 20, "maxID": 10}]`)), "", "minID 20 is above maxID 10"},
		{string(conf(`"vlanTrunk": [{"minID": 0, "maxID": 10}]`)), "", "minID 0"},
		{string(conf(`"vlanTrunk": [{}]`)), "", "no id"},
		{string(conf(`"mtu": 40`)), "", "mtu: 40"},
		{string(conf(`"mtu": 70000`)), "", "mtu: 70000"},
		{string(conf(`"socket": "trestle.sock"`)), "", "not an absolute path"},
		{string(conf(`"runtimeConfig": {"mac": "zz:00:00:00:00:01"}`)), "", "not an Ethernet address"},
		{string(conf(`"args": {"cni": {"mac": "01:00:5e:00:00:01"}}`)), "", "multicast or zero"},
		{string(conf("")), "MAC=00:00:00:00:00:00", "multicast or zero"},
		{string(conf(`"runtimeConfig": {"mac": "02:00:00:00:00:01:02:03"}`)), "", "not an Ethernet address"},
	} {
		_, err := loadConf([]byte(c.stdin), c.args)
		if err == nil || code(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: err %v (code %d), want code 7 with %q", c.stdin, c.args, err, code(err), c.want)
		}
	}
	if _, err := loadConf([]byte(`{"name": "pods", "bridge": 3}`), ""); code(err) != types.ErrDecodingFailure {
		t.Errorf("bridge 3: %v (code %d), want code 6", err, code(err))
	}
	if _, err := loadConf(conf(""), "MAC=02:00:00:00:00:01;NOEQUALS"); code(err) != types.ErrInvalidEnvironmentVariables {
		t.Errorf("bad CNI_ARGS: %v (code %d), want code 4", err, code(err))
	}
}

// TestMACPrecedence: runtimeConfig over args.cni over CNI_ARGS, as the
// bridge plugin reads them.
func TestMACPrecedence(t *testing.T) {
	const env, args, rt = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c"
	argsKey := `"args": {"cni": {"mac": "` + args + `"}}`
	rtKey := `"runtimeConfig": {"mac": "` + rt + `"}`
	for _, c := range []struct {
		extra, env, want string
	}{
		{"", "", ""},
		{"", "IgnoreUnknown=1;MAC=" + env, env},
		{argsKey, "MAC=" + env, args},
		{rtKey + ", " + argsKey, "MAC=" + env, rt},
		{rtKey, "", rt},
		{"", "MAC=02:00:00:00:00:AB", "02:00:00:00:00:ab"},
	} {
		n, err := loadConf(conf(c.extra), c.env)
		if err != nil {
			t.Fatalf("%s %s: %v", c.extra, c.env, err)
		}
		if n.mac != c.want {
			t.Errorf("%s %s: mac %q, want %q", c.extra, c.env, n.mac, c.want)
		}
	}
}

// TestMACOverride: on a macspoofchk network the caller's MAC is refused,
// from any of its three places, unless the network allows it.
func TestMACOverride(t *testing.T) {
	const mac = "02:00:00:00:00:0a"
	for _, c := range []struct {
		extra, env string
		ok         bool
	}{
		{`"macspoofchk": true`, "", true},
		{`"macspoofchk": true`, "MAC=" + mac, false},
		{`"macspoofchk": true, "args": {"cni": {"mac": "` + mac + `"}}`, "", false},
		{`"macspoofchk": true, "runtimeConfig": {"mac": "` + mac + `"}`, "", false},
		{`"macspoofchk": true, "allowMacOverride": true, "runtimeConfig": {"mac": "` + mac + `"}`, "", true},
		{`"runtimeConfig": {"mac": "` + mac + `"}`, "", true},
	} {
		_, err := loadConf(conf(c.extra), c.env)
		if c.ok && err != nil {
			t.Errorf("%s %s: %v", c.extra, c.env, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "allowMacOverride")) {
			t.Errorf("%s %s: %v, want a refusal naming allowMacOverride", c.extra, c.env, err)
		}
	}
}

// TestPortArgs: the network's VLANs and isolation as trestle's port keys.
func TestPortArgs(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  []string
	}{
		{`"vlan": 100`, []string{"vlan=100"}},
		{`"vlanTrunk": [{"id": 101}, {"minID": 200, "maxID": 210}, {"id": 205}]`, []string{"trunk=101,200-210"}},
		{`"vlan": 5, "vlanTrunk": [{"id": 101}, {"id": 103}, {"id": 102}]`, []string{"trunk=5,101-103", "native=5"}},
		{`"vlan": 102, "vlanTrunk": [{"minID": 101, "maxID": 103}]`, []string{"trunk=101-103", "native=102"}},
		{`"portIsolation": true`, []string{"protected=true"}},
		{`"vlan": 7, "portIsolation": true`, []string{"vlan=7", "protected=true"}},
		{`"macspoofchk": true`, []string{"locked=true", "allowed_macs=02:00:00:00:00:01"}},
		{`"macspoofchk": false`, nil},
		{`"ipguard": true, "ipam": {"type": "host-local"}`, []string{"ip_guard=true", "allowed_ips=10.0.0.5,fd00::5,fe80::ff:fe00:1", "ra_guard=true", "dhcp_guard=true"}},
		{`"bpduGuard": true`, []string{"bpdu_guard=true"}},
	} {
		n, err := loadConf(conf(c.extra), "")
		if err != nil {
			t.Fatalf("%s: %v", c.extra, err)
		}
		var r current.Result
		for _, a := range []string{"10.0.0.5/24", "fd00::5/64", "10.0.0.5/24"} {
			ip, nw, _ := net.ParseCIDR(a)
			nw.IP = ip
			r.IPs = append(r.IPs, &current.IPConfig{Address: *nw})
		}
		got := n.portArgs("02:00:00:00:00:01", n.guardIPs("02:00:00:00:00:01", &r))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.extra, got, c.want)
		}
		// The keys are the port table's, and the daemon takes them as
		// they are written (the plugin imports nothing of the table).
		if _, err := config.ParsePortArgs(&config.Bridge{Name: "br0"}, append([]string{"interface=veth0"}, got...)); err != nil {
			t.Errorf("%s: %q is refused by the port table: %v", c.extra, got, err)
		}
	}
}

// TestCheckPort: CHECK's comparison of a port with the network.
func TestCheckPort(t *testing.T) {
	n, err := loadConf(conf(`"vlan": 5, "vlanTrunk": [{"minID": 10, "maxID": 12}], "portIsolation": true`), "")
	if err != nil {
		t.Fatal(err)
	}
	good := ctl.PortEntry{Bridge: "br0", Origin: "run", PortStatus: ctl.PortStatus{State: "up", Trunk: ctl.VLANList{5, 10, 11, 12}, Native: 5, Protected: true}}
	if d := n.checkPort(good, "02:00:00:00:00:01", nil); d != "" {
		t.Errorf("matching port: %s", d)
	}
	plain, err := loadConf(conf(""), "")
	if err != nil {
		t.Fatal(err)
	}
	if d := plain.checkPort(ctl.PortEntry{PortStatus: ctl.PortStatus{State: "up", VLAN: 1}}, "02:00:00:00:00:01", nil); d != "" {
		t.Errorf("a network with no VLAN on a VLAN-aware bridge's access VLAN 1: %s", d)
	}
	for _, c := range []struct {
		change func(*ctl.PortEntry)
		want   string
	}{
		{func(p *ctl.PortEntry) { p.State, p.Reason = "down", "gone" }, "state down"},
		{func(p *ctl.PortEntry) { p.Trunk = ctl.VLANList{5, 10, 12} }, `trunk "5,10,12"`},
		{func(p *ctl.PortEntry) { p.Trunk = ctl.VLANList{10, 11, 12} }, `trunk "10-12", want "5,10-12"`},
		{func(p *ctl.PortEntry) { p.Native = 0 }, "native VLAN 0, want 5"},
		{func(p *ctl.PortEntry) { p.VLAN, p.Trunk, p.Native = 5, nil, 0 }, "access VLAN 5, want 0"},
		{func(p *ctl.PortEntry) { p.Protected = false }, "protected false"},
		{func(p *ctl.PortEntry) { p.Locked = true }, "locked true, want false (macspoofchk)"},
		{func(p *ctl.PortEntry) { p.AllowedMACs = []string{"02:00:00:00:00:01"} }, "allowed_macs [02:00:00:00:00:01], want []"},
	} {
		p := good
		c.change(&p)
		if d := n.checkPort(p, "02:00:00:00:00:01", nil); !strings.Contains(d, c.want) {
			t.Errorf("%+v: %q, want %q in it", p, d, c.want)
		}
	}

	// macspoofchk: the port locked to the container interface's MAC.
	spoof, err := loadConf(conf(`"macspoofchk": true`), "")
	if err != nil {
		t.Fatal(err)
	}
	locked := ctl.PortEntry{PortStatus: ctl.PortStatus{State: "up", Locked: true, AllowedMACs: []string{"02:00:00:00:00:0a"}}}
	if d := spoof.checkPort(locked, "02:00:00:00:00:0A", nil); d != "" {
		t.Errorf("a port locked to the container's MAC: %s", d)
	}
	for _, c := range []struct {
		change func(*ctl.PortEntry)
		want   string
	}{
		{func(p *ctl.PortEntry) { p.Locked = false }, "locked false, want true (macspoofchk)"},
		{func(p *ctl.PortEntry) { p.AllowedMACs = []string{"02:00:00:00:00:0b"} }, "allowed_macs [02:00:00:00:00:0b], want [02:00:00:00:00:0a]"},
		{func(p *ctl.PortEntry) { p.AllowedMACs = nil }, "allowed_macs [], want [02:00:00:00:00:0a]"},
	} {
		p := locked
		c.change(&p)
		if d := spoof.checkPort(p, "02:00:00:00:00:0a", nil); !strings.Contains(d, c.want) {
			t.Errorf("%+v: %q, want %q in it", p, d, c.want)
		}
	}
}

// TestIPGuardConf: ipguard's checks and CHECK's comparison.
func TestIPGuardConf(t *testing.T) {
	if _, err := loadConf(conf(`"ipguard": true, "ipam": {"type": "dhcp"}`), ""); err == nil || !strings.Contains(err.Error(), "ipguard: the dhcp IPAM plugin gives the addresses after the port forwards") {
		t.Errorf("ipguard with dhcp: %v", err)
	}
	n, err := loadConf(conf(`"ipguard": true, "ipam": {"type": "host-local"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	ips := []string{"10.0.0.5", "fe80::ff:fe00:a"}
	guarded := ctl.PortEntry{PortStatus: ctl.PortStatus{State: "up", IPGuard: true, RAGuard: true, DHCPGuard: true, AllowedIPs: ips}}
	if d := n.checkPort(guarded, "02:00:00:00:00:0a", ips); d != "" {
		t.Errorf("a port bound to the container's addresses: %s", d)
	}
	for _, c := range []struct {
		change func(*ctl.PortEntry)
		want   string
	}{
		{func(p *ctl.PortEntry) { p.IPGuard = false }, "ip_guard false, want true (ipguard)"},
		{func(p *ctl.PortEntry) { p.RAGuard = false }, "ra_guard false, want true (ipguard)"},
		{func(p *ctl.PortEntry) { p.DHCPGuard = false }, "dhcp_guard false, want true (ipguard)"},
		{func(p *ctl.PortEntry) { p.AllowedIPs = []string{"10.0.0.6"} }, "allowed_ips [10.0.0.6], want [10.0.0.5 fe80::ff:fe00:a]"},
	} {
		p := guarded
		c.change(&p)
		if d := n.checkPort(p, "02:00:00:00:00:0a", ips); !strings.Contains(d, c.want) {
			t.Errorf("%+v: %q, want %q in it", p, d, c.want)
		}
	}
}

func TestOwnerAndHostName(t *testing.T) {
	o := owner("pods", "c0ffee", "eth1")
	if net, cid, ifn, ok := parseOwner(o); !ok || net != "pods" || cid != "c0ffee" || ifn != "eth1" {
		t.Errorf("parseOwner(%q) = %q %q %q %t", o, net, cid, ifn, ok)
	}
	for _, o := range []string{"", "qemu tap0", "pods  eth0", "a b c d"} {
		if _, _, _, ok := parseOwner(o); ok {
			t.Errorf("parseOwner(%q): ok, want not one of the plugin's", o)
		}
	}
	a, b := hostVethName("c0ffee", "eth0"), hostVethName("c0ffee", "eth1")
	if len(a) != 15 || !strings.HasPrefix(a, "tr") || a == b || a != hostVethName("c0ffee", "eth0") {
		t.Errorf("host names %q %q: want 15 bytes, deterministic, distinct", a, b)
	}
	if hostVethName("c0ffe", "eeth0") == a {
		t.Error("host name does not separate the container id from the interface")
	}
}

// TestRoom: STATUS's answer from the daemon's status: code 50 for a
// bridge it lacks, a full bridge, a full switch.
func TestRoom(t *testing.T) {
	ports := func(n int) []ctl.PortStatus { return make([]ctl.PortStatus, n) }
	for _, c := range []struct {
		name string
		st   ctl.Status
		want string
	}{
		{"room", ctl.Status{Bridges: []ctl.BridgeStatus{{Name: "br0", Ports: ports(tbpf.MaxBridgePorts - 1)}}}, ""},
		{"empty", ctl.Status{Bridges: []ctl.BridgeStatus{{Name: "br0"}}}, ""},
		{"no bridge", ctl.Status{Bridges: []ctl.BridgeStatus{{Name: "other"}}}, "has no bridge br0"},
		{"full bridge", ctl.Status{Bridges: []ctl.BridgeStatus{{Name: "br0", Ports: ports(tbpf.MaxBridgePorts)}}}, "the most a bridge takes"},
		{"full switch", ctl.Status{Bridges: []ctl.BridgeStatus{
			{Name: "br0", Ports: ports(1)},
			{Name: "big", Ports: ports(tbpf.MaxPortsAll - 1)},
		}}, "the most the switch takes"},
	} {
		err := room(c.st, "br0", "/run/t.sock")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || code(err) != types.ErrPluginNotAvailable || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v (code %d), want code 50 with %q", c.name, err, code(err), c.want)
		}
	}
}

// TestSocketAllowed: a network names the default socket, one under the
// daemon's run directory, or one the node's list names; any other is
// refused with code 7, saying how to allow it, and a list that others may
// write is not read.
func TestSocketAllowed(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "cni-sockets")
	old := socketsFile
	socketsFile = list
	t.Cleanup(func() { socketsFile = old })
	sock := func(s string) []byte { return conf(`"socket": "` + s + `"`) }
	allowed := func(s string) error {
		_, err := loadConf(sock(s), "")
		return err
	}
	for _, s := range []string{ctl.DefaultSocket, "/run/trestle/lab.sock", "/run/trestle/ns1/ctl.sock", "/run/trestle//x.sock"} {
		if err := allowed(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"/tmp/evil.sock", "/run/trestle/../docker.sock", "/run/trestle", "/run/trestle-evil/x.sock", "/srv/trestle/b.sock"} {
		err := allowed(s)
		if err == nil || code(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), "add its path there") || !strings.Contains(err.Error(), list) {
			t.Errorf("%s: %v (code %d), want code 7 saying how to allow it", s, err, code(err))
		}
	}
	if err := os.WriteFile(list, []byte("# the lab's daemon\n/srv/trestle/b.sock  # second\n\nrelative.sock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("the list must be root's: the rest needs root")
	}
	if err := allowed("/srv/trestle/b.sock"); err != nil {
		t.Errorf("a listed socket: %v", err)
	}
	if err := allowed("/srv/trestle/c.sock"); err == nil {
		t.Error("a socket the list does not name is allowed")
	}
	if err := os.Chmod(list, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := allowed("/srv/trestle/b.sock"); err == nil || !strings.Contains(err.Error(), "is not read") {
		t.Errorf("a listed socket, the list writable by all: %v, want refused saying the list is not read", err)
	}
}
