package lab

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/trestle/trestle/internal/config"
)

// TestTrestleConfigPatch: the config trestle's DUT writes for a patched
// chain of 3 has the hosts' ports on br1 and br3 only, and each pair of
// patch ports declared on both of its bridges, named as Topo.Patches name
// them, with no interface and no mode; internal/config takes it.
func TestTrestleConfigPatch(t *testing.T) {
	brs, ps := patchedChain(3)
	tp := &Topo{Bridges: brs, Patches: ps}
	text := trestleConfig(tp, &Env{}, "xdp", "/run/x.sock")
	var raw struct {
		Bridge []struct {
			Name string
			Port []map[string]any
		}
	}
	if err := toml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	want := map[string][]map[string]any{
		"br1": {{"interface": "p1", "mode": "xdp"}, {"patch": "br2", "name": "p1-2"}},
		"br2": {{"patch": "br1", "name": "p2-1"}, {"patch": "br3", "name": "p2-3"}},
		"br3": {{"interface": "p2", "mode": "xdp"}, {"patch": "br2", "name": "p3-2"}},
	}
	if len(raw.Bridge) != 3 {
		t.Fatalf("%d bridges, want 3:\n%s", len(raw.Bridge), text)
	}
	for _, b := range raw.Bridge {
		if !reflect.DeepEqual(b.Port, want[b.Name]) {
			t.Errorf("bridge %s: ports %v, want %v", b.Name, b.Port, want[b.Name])
		}
	}
	cfg, err := config.Parse("chain.toml", []byte(text))
	if err != nil {
		t.Fatalf("the config the lab writes for a patched chain is refused: %v\n%s", err, text)
	}
	var got []string
	for _, b := range cfg.Bridges {
		for _, p := range b.Ports {
			if p.IsPatch() {
				got = append(got, b.Name+":"+p.PortName()+">"+p.Patch)
			}
		}
	}
	if w := []string{"br1:p1-2>br2", "br2:p2-1>br1", "br2:p2-3>br3", "br3:p3-2>br2"}; !slices.Equal(got, w) {
		t.Errorf("patch ports %v, want %v", got, w)
	}
}

// TestTrestleConfigVeth: a chain joined by veth pairs (trestle@veth) is
// written with the inter-bridge veths as ports, no patch ports, and
// internal/config takes it.
func TestTrestleConfigVeth(t *testing.T) {
	tp := &Topo{Bridges: []Bridge{{Name: "br1", Ports: []string{"p1", "c1a"}}, {Name: "br2", Ports: []string{"c1b", "c2a"}}, {Name: "br3", Ports: []string{"c2b", "p2"}}}}
	text := trestleConfig(tp, &Env{}, "auto", "/run/x.sock")
	if strings.Contains(text, "patch") {
		t.Errorf("patch ports in a veth-joined chain:\n%s", text)
	}
	cfg, err := config.Parse("chain.toml", []byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if n := len(cfg.Bridges); n != 3 || len(cfg.Bridges[1].Ports) != 2 || cfg.Bridges[1].Ports[0].Interface != "c1b" {
		t.Errorf("%+v", cfg.Bridges)
	}
	if tp.Joins() != "veth pairs" {
		t.Errorf("joins %q", tp.Joins())
	}
}

// TestOVSArgsPatch: a patched chain of 3 bridges is three netdev bridges,
// the hosts' ports (AF_XDP) on the first and last only, and two pairs of
// patch ports, each the other's peer; no veth ports between bridges.
func TestOVSArgsPatch(t *testing.T) {
	brs, ps := patchedChain(3)
	tp := &Topo{Bridges: brs, Patches: ps}
	args := strings.Join(ovsArgs(tp, &Env{DUTCPU: 1}, "afxdp"), " ")
	want := []string{
		"set Open_vSwitch . other_config:pmd-cpu-mask=0x2",
		"-- add-br br1 -- set bridge br1 datapath_type=netdev",
		"-- add-br br2 -- set bridge br2 datapath_type=netdev",
		"-- add-br br3 -- set bridge br3 datapath_type=netdev",
		"-- add-port br1 p1 -- set interface p1 type=afxdp options:xdp-mode=native",
		"-- add-port br3 p2 -- set interface p2 type=afxdp options:xdp-mode=native",
		"-- add-port br1 p1-2 -- set interface p1-2 type=patch options:peer=p2-1",
		"-- add-port br2 p2-1 -- set interface p2-1 type=patch options:peer=p1-2",
		"-- add-port br2 p2-3 -- set interface p2-3 type=patch options:peer=p3-2",
		"-- add-port br3 p3-2 -- set interface p3-2 type=patch options:peer=p2-3",
	}
	for _, w := range want {
		if !strings.Contains(args, w) {
			t.Errorf("ovs-vsctl args lack %q:\n%s", w, args)
		}
	}
	if n := strings.Count(args, "add-port"); n != 6 {
		t.Errorf("%d ports added, want 6 (2 hosts', 4 patch):\n%s", n, args)
	}
	if strings.Contains(args, " c1a") || strings.Contains(args, " c1b") || strings.Count(args, "type=afxdp") != 2 {
		t.Errorf("inter-bridge veths or patch ports as AF_XDP:\n%s", args)
	}
	if got := tp.DUTPorts(); !slices.Equal(got, []string{"p1", "p2"}) {
		t.Errorf("DUT's kernel ports %v, want p1, p2", got)
	}
}
