package config

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/configuration.md from the key table")

const (
	referenceFile = "../../docs/configuration.md"
	// referenceMark opens the generated part of referenceFile; everything
	// after it is Reference's.
	referenceMark = "<!-- Everything below is generated from internal/config's key table (keys.go and a var ...Table in each table's file) by `go test ./internal/config -run TestKeyReference -update`. Do not edit it here. -->\n"
)

// reference writes the key reference of docs/configuration.md: each table
// with its keys, their values, defaults and meaning.
func reference() string {
	var b strings.Builder
	for _, t := range Tables {
		switch {
		case t.Inline:
			parent := t.Path[:strings.LastIndexByte(t.Path, '.')]
			fmt.Fprintf(&b, "\n### `%s` in `%s`\n\n", t.Header(), TableOf(parent).Header())
		default:
			fmt.Fprintf(&b, "\n### `%s`\n\n", t.Header())
		}
		fmt.Fprintf(&b, "%s\n\n", t.Help)
		b.WriteString("| Key | Value | Default | Meaning |\n|---|---|---|---|\n")
		for _, k := range t.Keys {
			def := "-"
			switch {
			case k.Required:
				def = "required"
			case k.Default != "" && isTOMLValue(k.Default):
				def = "`" + k.Default + "`"
			case k.Default != "":
				def = k.Default
			}
			help := k.Help
			for _, v := range k.Values {
				if v.Help != "" {
					help += fmt.Sprintf(" `%q`: %s.", v.Name, v.Help)
				}
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Name, cell(k.Type()), cell(def), cell(help))
		}
	}
	return b.String()
}

// cell escapes what would end a Markdown table's cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// isTOMLValue reports whether s is a TOML value, as a Default that is one
// written as the file writes it, not a sentence.
func isTOMLValue(s string) bool {
	var m map[string]any
	return toml.Unmarshal([]byte("x = "+s), &m) == nil
}

// TestKeyReference holds docs/configuration.md to the key table: the part
// after referenceMark is what reference writes. -update rewrites it.
func TestKeyReference(t *testing.T) {
	data, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	head, got, found := strings.Cut(string(data), referenceMark)
	if !found {
		t.Fatalf("%s has no line %q", referenceFile, strings.TrimSpace(referenceMark))
	}
	want := reference()
	if *update {
		if err := os.WriteFile(referenceFile, []byte(head+referenceMark+want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Errorf("%s differs from the key table: run go test ./internal/config -run TestKeyReference -update\n--- got\n%s\n--- want\n%s", referenceFile, got, want)
	}
}

// keyDoc builds a valid file around key k of table tab, set to val, with
// what the key needs beside it: ports, a peer bridge, a trunk. When val is
// "", the key is left out and a comment takes its line, so the two files
// have the same lines.
func keyDoc(tab *Table, k *Key, val string) []byte {
	var (
		daemon, bridge, portA, portB, static, mirror, rule, after []string
	)
	line := "# " + k.Name + " left out"
	if val != "" {
		line = k.Name + " = " + val
	}
	bridge = []string{`name = "br0"`}
	portA = []string{`interface = "veth-a"`}
	portB = []string{`interface = "veth-b"`}
	// set puts line in lines, in place of the key's own line when it has one.
	set := func(lines *[]string, line string) {
		key, _, _ := strings.Cut(line, " = ")
		for i, l := range *lines {
			if strings.HasPrefix(l, key+" = ") {
				(*lines)[i] = line
				return
			}
		}
		*lines = append(*lines, line)
	}
	vlanAware := func() { set(&portA, "vlan = 10") }
	switch tab.Path {
	case "daemon":
		set(&daemon, line)
	case "bridge":
		if k.Name == "multicast_querier" && val == "true" {
			set(&bridge, "multicast_snooping = true")
		}
		set(&bridge, line)
	case "bridge.port":
		switch k.Name {
		case "patch", "name":
			portA = []string{`patch = "br1"`}
			after = []string{`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `patch = "br0"`}
		case "vxlan", "mtu", "dstport":
			portA = []string{"vxlan = 1000"}
			daemon = []string{`vtep = "192.0.2.1"`}
		case "mac_limit_action":
			set(&portA, "max_macs = 100")
		case "native":
			set(&portA, `trunk = [10, 20]`)
		case "native_tagged":
			set(&portA, `trunk = [10, 20]`)
			set(&portA, "native = 10")
		case "qinq":
			vlanAware()
		case "allowed_macs":
			set(&portA, "locked = true")
		case "allowed_ips":
			set(&portA, "ip_guard = true")
		case "ip_guard":
			if val == "true" {
				set(&portA, `allowed_ips = ["10.0.0.9"]`)
			}
		}
		set(&portA, line)
	case "bridge.port.storm":
		if val == "" {
			set(&portA, "# storm left out")
		} else {
			set(&portA, "storm = { "+line+" }")
		}
	case "bridge.static":
		static = []string{`mac = "02:00:00:00:00:01"`, `port = "veth-a"`}
		set(&static, line)
	case "bridge.mirror":
		portB = append(portB, `[[bridge.port]]`, `interface = "veth-c"`)
		mirror = []string{`name = "m0"`, `ports = ["veth-a"]`, `to = "veth-c"`}
		if k.Name == "vlans" {
			vlanAware()
		}
		set(&mirror, line)
	case "bridge.rule":
		rule = []string{`action = "pass"`}
		switch k.Name {
		case "src_port", "dst_port":
			set(&rule, `proto = "tcp"`)
		case "icmp_type":
			set(&rule, `proto = "icmp"`)
		case "vlan":
			vlanAware()
		}
		set(&rule, line)
	}
	var b strings.Builder
	section := func(header string, lines []string) {
		if lines != nil {
			b.WriteString(header + "\n" + strings.Join(lines, "\n") + "\n")
		}
	}
	section("[daemon]", daemon)
	section("[[bridge]]", bridge)
	section("[[bridge.port]]", portA)
	section("[[bridge.port]]", portB)
	section("[[bridge.static]]", static)
	section("[[bridge.mirror]]", mirror)
	section("[[bridge.rule]]", rule)
	b.WriteString(strings.Join(after, "\n") + "\n")
	return []byte(b.String())
}

// TestKeyExamples parses every key of the table, set to its example: each
// key the table has is one the checker takes.
func TestKeyExamples(t *testing.T) {
	for _, tab := range Tables {
		for i := range tab.Keys {
			k := &tab.Keys[i]
			if k.Kind == KindTables {
				continue // the tables' own keys are tried
			}
			if k.Example == "" || k.Help == "" || k.Type() == "" {
				t.Errorf("%s.%s: an example, a help line and a type are required", tab.Path, k.Name)
				continue
			}
			data := keyDoc(tab, k, k.Example)
			if _, err := Parse("t.toml", data); err != nil {
				t.Errorf("%s.%s = %s: %v\n%s", tab.Path, k.Name, k.Example, err, data)
			}
		}
	}
}

// TestKeyDefaults holds each key's Default to what Parse fills in: a file
// that sets the key to its default reads as one that leaves it out.
// Defaults that are not values (they depend on other keys) are named here.
func TestKeyDefaults(t *testing.T) {
	described := map[string]bool{
		"bridge.port.name":   true, // "patch-" + patch: TestParsePatchPorts
		"bridge.port.vlan":   true, // 1 on a VLAN-aware bridge: TestParseVLANPorts
		"bridge.static.vlan": true, // the port's untagged VLAN: TestParseVLANPorts
		"bridge.port.mtu":    true, // the underlay's minus 50: the daemon's, tests/overlay
	}
	for _, tab := range Tables {
		for i := range tab.Keys {
			k := &tab.Keys[i]
			name := tab.Path + "." + k.Name
			if k.Default == "" {
				continue
			}
			if !isTOMLValue(k.Default) {
				if !described[name] {
					t.Errorf("%s: default %s is not a TOML value", name, k.Default)
				}
				continue
			}
			set, err := Parse("t.toml", keyDoc(tab, k, k.Default))
			if err != nil {
				t.Errorf("%s = %s: %v", name, k.Default, err)
				continue
			}
			left, err := Parse("t.toml", keyDoc(tab, k, ""))
			if err != nil {
				t.Errorf("%s left out: %v", name, err)
				continue
			}
			if !reflect.DeepEqual(set, left) {
				t.Errorf("%s = %s is not what leaving it out gives:\n set: %+v\nleft: %+v", name, k.Default, set, left)
			}
		}
	}
}

// distFile is the example config the package ships.
const distFile = "../../dist/trestle.toml"

// TestDistKeys checks the keys of dist/trestle.toml, its commented-out
// examples too, against the key table, and parses the file with every
// example uncommented.
func TestDistKeys(t *testing.T) {
	data, err := os.ReadFile(distFile)
	if err != nil {
		t.Fatal(err)
	}
	var (
		header = regexp.MustCompile(`^(?:# ?)?\[\[?([a-z.]+)\]\]?\s*(?:#.*)?$`)
		// A key line, commented out or not: "# " and a lowercase key, " = ".
		keyLine = regexp.MustCompile(`^(# ?)?([a-z_]+) = (.*)$`)
		inline  = regexp.MustCompile(`([a-z_]+) = `)
	)
	var uncommented bytes.Buffer
	table, keys := "", 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if m := header.FindStringSubmatch(l); m != nil {
			table = m[1]
			if TableOf(table) == nil {
				t.Errorf("%s:%d: no table %s", distFile, n, table)
			}
			fmt.Fprintln(&uncommented, strings.TrimLeft(l, "# "))
			continue
		}
		m := keyLine.FindStringSubmatch(l)
		if m == nil {
			fmt.Fprintln(&uncommented, l)
			continue
		}
		keys++
		tab := TableOf(table)
		k := (*Key)(nil)
		if tab != nil {
			k = tab.Key(m[2])
		}
		switch {
		case k == nil:
			t.Errorf("%s:%d: %s is not a key of [%s]", distFile, n, m[2], table)
		case k.Kind == KindTable:
			// The keys of an inline table: storm = { broadcast = 10000 }.
			sub := TableOf(table + "." + k.Name)
			body, _, _ := strings.Cut(m[3], "}")
			for _, im := range inline.FindAllStringSubmatch(body, -1) {
				if sub.Key(im[1]) == nil {
					t.Errorf("%s:%d: %s is not a key of %s", distFile, n, im[1], sub.Header())
				}
			}
		}
		fmt.Fprintln(&uncommented, strings.TrimPrefix(l, m[1]))
	}
	if keys < 10 {
		t.Errorf("%s: only %d keys recognised", distFile, keys)
	}
	if _, err := Parse("dist/trestle.toml, uncommented", uncommented.Bytes()); err != nil {
		t.Errorf("%v\n%s", err, uncommented.Bytes())
	}
}

func TestParsePortArgs(t *testing.T) {
	cfg, err := Parse("t.toml", withBridge())
	if err != nil {
		t.Fatal(err)
	}
	b := &cfg.Bridges[0]
	for _, c := range []struct {
		args []string
		want Port
	}{
		{[]string{"interface=veth-c"}, Port{Interface: "veth-c", Mode: "auto"}},
		{[]string{"interface=veth-c", "mode=tc", "vlan=10", "max_macs=100", "mac_limit_action=forward", "learning=false", "storm.broadcast=1000", "storm.unknown_unicast=0x10"},
			Port{Interface: "veth-c", Mode: "tc", VLAN: 10, MaxMACs: 100, Policy: tbpf.PortPolicy{Flags: flagLimitForward | flagNoLearn}, Storm: Storm{Broadcast: 1000, UnknownUnicast: 16}}},
		{[]string{"interface=veth-c", "trunk=10, 20-22", "native=10"}, Port{Interface: "veth-c", Mode: "auto", Trunk: []uint16{10, 20, 21, 22}, Native: 10}},
		{[]string{"patch=br1"}, Port{Patch: "br1", Name: "patch-br1", Mode: "auto"}},
	} {
		got, err := ParsePortArgs(b, c.args)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"vlan=10"}, "interface, patch or vxlan is required"},
		{[]string{"vxlan=1000"}, "overlay ports are declared in the config file"},
		{[]string{"interface=veth-a"}, `interface: "veth-a" is already a port of bridge br0`},
		{[]string{"interface=veth-c", "vlan=5000"}, "vlan: 5000 is out of range 1..4094"},
		{[]string{"interface=veth-c", "learning=maybe"}, "learning: must be true or false"},
		{[]string{"interface=veth-c", "mode=fast"}, `mode: "fast" is not one of auto, xdp, tc`},
		{[]string{"interface=veth-c", "native=10"}, "native: is for trunks only"},
		{[]string{"interface=veth-c", "trunk=10,5000"}, `trunk[1]: 5000 is out of range 1..4094`},
		{[]string{"interface=veth-c", "storm.gusts=1"}, "storm.gusts: unknown field"},
		{[]string{"interface=veth-c", "colour=red"}, "colour: unknown field"},
		{[]string{"interface"}, `"interface": want KEY=VALUE`},
		{[]string{"interface=veth-c", "interface=veth-d"}, "a key given twice?"},
	} {
		_, err := ParsePortArgs(b, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
	// A port of a VLAN-aware bridge that sets no VLAN is an access port of
	// VLAN 1, as in a file.
	cfg, err = Parse("t.toml", withBridge("vlan = 10"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := ParsePortArgs(&cfg.Bridges[0], []string{"interface=veth-c"}); err != nil || p.VLAN != 1 {
		t.Errorf("on a VLAN-aware bridge: %+v, %v; want VLAN 1", p, err)
	}
}

// TestPortFlagRows: a boolean port key whose row names a datapath flag is
// the whole of the key on the Go side: set to what is not its default, it
// sets its flag in the port's Policy and nothing else, off it sets none,
// and no two rows share a flag. A new row is tested here as it is; with
// checks, extra gives the port the keys they ask for.
func TestPortFlagRows(t *testing.T) {
	extra := map[string][]string{
		"native_tagged": {"trunk=10", "native=10"},
		"qinq":          {"vlan=10"},
		"ip_guard":      {"allowed_ips=10.0.0.1"},
	}
	aware := &Bridge{Name: "br0"}
	seen := map[tbpf.PortFlag]string{}
	rows := 0
	for _, k := range portTable.Keys {
		if k.Flag == 0 {
			continue
		}
		rows++
		if k.Kind != KindBool || (k.Default != "true" && k.Default != "false") {
			t.Errorf("%s: a row with a flag is a boolean key with a default, not %v %q", k.Name, k.Kind, k.Default)
			continue
		}
		if k.Flag&(k.Flag-1) != 0 {
			t.Errorf("%s: flag %#x is not one flag", k.Name, k.Flag)
		}
		if o, dup := seen[k.Flag]; dup {
			t.Errorf("%s: flag %#x is %s's too", k.Name, k.Flag, o)
		}
		seen[k.Flag] = k.Name
		on := map[string]string{"true": "false", "false": "true"}[k.Default]
		for _, c := range []struct {
			value string
			want  tbpf.PortFlag
		}{{on, k.Flag}, {k.Default, 0}} {
			args := []string{"interface=p1", k.Name + "=" + c.value}
			if c.want != 0 {
				args = append(args, extra[k.Name]...)
			}
			p, err := ParsePortArgs(aware, args)
			if err != nil {
				t.Errorf("%s: %v", args, err)
				continue
			}
			if p.Policy.Flags != c.want {
				t.Errorf("%s: policy flags %#x, want %#x", args, p.Policy.Flags, c.want)
			}
		}
	}
	if rows == 0 {
		t.Fatal("no row of the port table names a flag")
	}
}

// TestPortArgsHelp: port add --help lists every key of the port table a
// run-time port takes, each once, and nothing else.
func TestPortArgsHelp(t *testing.T) {
	listed := map[string]int{}
	for _, l := range strings.Split(PortArgsHelp(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") {
			k, _, ok := strings.Cut(f[0], "=")
			if !ok {
				t.Errorf("%q is not KEY=VALUE", f[0])
			}
			listed[k]++
		}
	}
	for _, k := range portTable.Keys {
		want := 1
		if k.fileOnly || k.Kind == KindTable {
			want = 0
		}
		if listed[k.Name] != want {
			t.Errorf("%s listed %d times, want %d", k.Name, listed[k.Name], want)
		}
		delete(listed, k.Name)
	}
	for _, k := range stormTable.Keys {
		if listed["storm."+k.Name] != 1 {
			t.Errorf("storm.%s listed %d times, want once", k.Name, listed["storm."+k.Name])
		}
		delete(listed, "storm."+k.Name)
	}
	for k := range listed {
		t.Errorf("%s listed, and no key of the port table", k)
	}
}
