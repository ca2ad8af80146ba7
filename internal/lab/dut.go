package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/trestle/trestle/internal/ctl"
)

// DUT is a device under test: something that forwards frames between the
// ports of the bridges of a topology.
type DUT interface {
	// Name is the DUT as given on the command line, e.g. "trestle:xdp".
	Name() string
	// Learns says whether it is a learning bridge (the RFC 2889 tests need one).
	Learns() bool
	// Setup builds t.Bridges in t.DUT and returns once they forward.
	Setup(ctx context.Context, t *Topo, env *Env) error
	// Teardown stops what Setup started; the namespaces go with the Net.
	Teardown(ctx context.Context) error
	// Settings describe the DUT as it was measured, for the record.
	Settings() map[string]string
}

// Env is what a DUT may use.
type Env struct {
	Trestle string // the trestle binary, for the trestle DUT's daemon
	WorkDir string // a directory of this run, for configs, sockets and logs
	DUTCPU  int    // where the DUT's own threads should run
	// MaxEntries is the learning table size to configure where a DUT has
	// one (0: its default); the address caching test needs it large.
	MaxEntries int
	Log        func(format string, args ...any)
	// Persist: a trestle DUT's daemon pins its datapath, which outlives
	// it (the restart test restarts it under traffic); its Teardown
	// removes the datapath with `trestle down`.
	Persist bool
	// UpgradeTo is the build the restart test's upgrade events go to and
	// back from (--upgrade-to); OtherBuild makes one when none is given
	// (nil: none can be).
	UpgradeTo  string
	OtherBuild func(ctx context.Context) (TrestleBuild, error)
}

// ErrUnavailable is wrapped when a DUT cannot run on this machine (a missing
// package, say): the lab reports it and goes on with the others.
var ErrUnavailable = errors.New("DUT not available here")

// DUTNames lists the DUTs ParseDUT knows, for --help.
var DUTNames = []string{"direct", "floor", "floor:tc", "linux-bridge", "linux-bridge:nft", "trestle", "trestle:xdp", "trestle:tc", "ovs", "ovs:afxdp", "ovs:system"}

// Caps are what a kind of DUT is to the lab and what it can do, declared
// once for each kind (dutCaps) and read from a DUT's name by CapsOf: the
// parser and the reports ask these, never the name itself.
type Caps struct {
	// Subject: the switch the lab is built to measure. The reports hold
	// its figures to the goals (a shortfall is a warning), compare its
	// variants with the peers' and list it first; a peer's figures are
	// findings beside it.
	Subject bool
	// Build: it runs a binary of a build, which bin=PATH chooses.
	Build bool
	// Daemon: a daemon of its own runs it, which a restart restarts; the
	// kernel's bridges have none.
	Daemon bool
	// OwnThread: it forwards on a thread of its own (on the DUT's CPU)
	// rather than on the CPU the frame arrived on: Open vSwitch's
	// userspace datapath, its PMD thread.
	OwnThread bool
}

// dutCaps are the kinds of DUT ParseSpec knows, with what each declares.
var dutCaps = map[string]Caps{
	"direct":       {},
	"floor":        {},
	"linux-bridge": {},
	"trestle":      {Subject: true, Build: true, Daemon: true},
	"ovs":          {Daemon: true, OwnThread: true},
}

// CapsOf is what the kind of the DUT named dut ("trestle:xdp@vlan", as
// the records carry it) declares; none for a kind not known.
func CapsOf(dut string) Caps {
	kind, _, _ := strings.Cut(dut, "@")
	kind, _, _ = strings.Cut(kind, ":")
	return dutCaps[kind]
}

// offloadAliases are the short names of host offloads in DUT variants.
var offloadAliases = map[string]string{
	"tso": "tx-tcp-segmentation", "gso": "tx-generic-segmentation", "gro": "rx-gro",
	"tx": "tx-checksum-ip-generic", "lro": "rx-lro", "sg": "tx-scatter-gather",
}

// Spec is a DUT as the command line names it, "KIND[:MODE][@knob=value,...]",
// parsed once (ParseSpec) at the edge: by the command's flags and the
// scenario presets. The lab carries it from there; the string it came from
// (Text) is the DUT's name in the records (Result.DUT, UnitRecord.DUT).
//
// Kind is direct, floor, linux-bridge, trestle or ovs, and Mode what
// follows the colon (floor:tc, linux-bridge:nft, trestle:xdp or :tc,
// ovs:afxdp or :system; "" for none). The knobs change one thing, so that one run
// measures it on and off side by side, in interleaved repetitions, and
// ministat compares the two (as seed 001 compares TSO and LRO):
// OFFLOAD=on|off sets the hosts' offloads before the DUT starts (ethtool
// feature names, or tso, gso, gro, lro, tx, sg), bin=PATH runs a trestle
// DUT from another build ("trestle:xdp@bin=/tmp/old"), and vlan puts the
// bridge's ports in VLANs (seed 002's set-up, see SetVLANs): h1's an access
// port of VLAN 10, h2's a trunk carrying 10 and 20. patch and veth choose
// how the bridges of a chain are joined: by patch ports of the DUT's own
// (seed 003 found Open vSwitch's nearly free) or by veth pairs. trestle's
// default is patch ports (trestle@patch says it again), Open vSwitch's veth
// pairs (ovs@veth says it again), the Linux bridge's only join is veth
// pairs; see Patched and joinRefusal. A chain of one bridge has no joins:
// Scenario.CheckJoins refuses these knobs where no chain is longer. mirror
// copies h1's port, both ways, to a span port whose host receives the
// copies (see SetMirror); capture runs `trestle capture` on h1's port while
// the packet tests run (trestle only). rules=N gives the bridges an access
// list of N rules, the one that passes the lab's frames last, default
// block, and state makes that rule keep state; rules=0 is the filter off.
// filter turns trestle's filter on with one rule passing every frame, as
// linux-bridge:nft's chain. See Filter.
type Spec struct {
	Text     string // as given: "trestle:xdp@mirror"
	Name     string // without the knobs: "trestle:xdp"
	Kind     string // "trestle"
	Mode     string // "xdp"; "" for none
	Offloads map[string]bool
	Bin      string
	VLAN     bool
	Patch    bool    // @patch
	Veth     bool    // @veth
	Mirror   bool    // @mirror
	Capture  bool    // @capture
	Filter   *Filter // @rules=N[,state] or @filter; nil: neither
	NoSnoop  bool    // @nosnoop
	Suppress bool    // @suppress
}

// String is the spec as given.
func (v Spec) String() string { return v.Text }

// Direct says whether the spec is the straight path (or a variant of it).
func (v Spec) Direct() bool { return v.Kind == "direct" }

// Floor names the floor the spec is held against in the vs-floor column:
// the floor of its own set-up (@vlan, @mirror), at tc for trestle at tc
// (trestle:tc, and trestle's default mode, which is tc on the lab's
// veths), else the XDP floor. A floor is its own.
func (v Spec) Floor() string {
	f := "floor"
	if v.Kind == "floor" && v.Mode == "tc" || v.Kind == "trestle" && v.Mode != "xdp" {
		f = "floor:tc"
	}
	switch {
	case v.VLAN:
		f += "@vlan"
	case v.Mirror:
		f += "@mirror"
	}
	return f
}

// Patched says whether the bridges of a chain are joined by the DUT's patch
// ports (Shape.Patch): asked for with @patch, or trestle's default.
func (v Spec) Patched() bool {
	return v.Patch || v.Kind == "trestle" && !v.Veth
}

// Join is the knob that chooses how a chain's bridges are joined ("" for
// none): "patch" or "veth".
func (v Spec) Join() string {
	switch {
	case v.Patch:
		return "patch"
	case v.Veth:
		return "veth"
	}
	return ""
}

// joinRefusal says why the DUT kind cannot join bridges by join, "patch"
// or "veth" ("": it can).
func joinRefusal(kind, join string) string {
	switch kind {
	case "ovs", "trestle":
		return ""
	case "linux-bridge":
		if join == "veth" {
			return ""
		}
		return "the Linux bridge has no patch ports: bridges join only by veth pairs"
	case "direct":
		return "the straight path has no bridges to join"
	case "floor":
		if join == "veth" {
			return ""
		}
		return "the floor has no patch ports: a chain's bridges join only by veth pairs"
	}
	return "no " + join + " joins"
}

// ParseSpec parses a DUT spec: its knobs, then its kind and mode.
func ParseSpec(s string) (Spec, error) {
	name, knobs, ok := strings.Cut(s, "@")
	kind, mode, _ := strings.Cut(name, ":")
	v := Spec{Text: s, Name: name, Kind: kind, Mode: mode}
	var list []string
	if ok {
		list = strings.Split(knobs, ",")
	}
	for _, kv := range list {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		switch {
		case !ok && k == "vlan":
			if kind == "direct" {
				return v, fmt.Errorf("DUT %q: vlan is for a bridge; the straight path has no ports to put in VLANs", s)
			}
			v.VLAN = true
		case !ok && k == "mirror":
			if kind == "direct" {
				return v, fmt.Errorf("DUT %q: mirror is for a bridge; the straight path has no ports to mirror", s)
			}
			v.Mirror = true
		case !ok && k == "capture":
			if kind != "trestle" {
				return v, fmt.Errorf("DUT %q: capture runs `trestle capture` in the DUT: it is for trestle DUTs", s)
			}
			v.Capture = true
		case !ok && (k == "patch" || k == "veth"):
			if why := joinRefusal(kind, k); why != "" {
				return v, fmt.Errorf("DUT %q: %s", s, why)
			}
			if j := v.Join(); j != "" && j != k {
				return v, fmt.Errorf("DUT %q: patch or veth, not both: they choose how a chain's bridges are joined", s)
			}
			v.Patch, v.Veth = v.Patch || k == "patch", v.Veth || k == "veth"
		case ok && k == "rules":
			n, err := filterRules(s, val)
			if err != nil {
				return v, err
			}
			v.filter().Rules = n
		case !ok && k == "state":
			v.filter().State = true
		case !ok && k == "filter":
			v.filter().All = true
		case !ok && k == "nosnoop":
			if kind != "trestle" && kind != "linux-bridge" && kind != "ovs" {
				return v, fmt.Errorf("DUT %q: nosnoop turns a bridge's IGMP and MLD snooping off: it is for trestle, linux-bridge and ovs", s)
			}
			v.NoSnoop = true
		case !ok && k == "suppress":
			if kind != "trestle" && kind != "linux-bridge" {
				return v, fmt.Errorf("DUT %q: suppress turns a bridge's ARP and neighbour suppression on: it is for trestle and linux-bridge (Open vSwitch has none)", s)
			}
			v.Suppress = true
		case ok && k == "bin" && val != "":
			if !CapsOf(name).Build {
				return v, fmt.Errorf("DUT %q: bin= is for trestle DUTs", s)
			}
			v.Bin = val
		case ok && k != "" && (val == "on" || val == "off"):
			if full, ok := offloadAliases[k]; ok {
				k = full
			}
			if v.Offloads == nil {
				v.Offloads = map[string]bool{}
			}
			v.Offloads[k] = val == "on"
		default:
			return v, fmt.Errorf("DUT %q: %q is not OFFLOAD=on, OFFLOAD=off, bin=PATH, vlan, mirror, capture, patch, veth, rules=N, state, filter, nosnoop or suppress", s, kv)
		}
	}
	if v.Filter != nil {
		if err := checkFilter(s, kind, mode, v.Filter); err != nil {
			return v, err
		}
	}
	if _, err := v.NewDUT(); err != nil {
		return v, err
	}
	return v, nil
}

// MustSpecs parses the specs of a preset, which are the lab's own: one that
// does not parse is a mistake in the code.
func MustSpecs(texts ...string) []Spec {
	out := make([]Spec, len(texts))
	for i, t := range texts {
		s, err := ParseSpec(t)
		if err != nil {
			panic(err)
		}
		out[i] = s
	}
	return out
}

// SpecTexts are the specs as given, for the records.
func SpecTexts(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Text
	}
	return out
}

// filter is v's Filter, made on the first filter knob.
func (v *Spec) filter() *Filter {
	if v.Filter == nil {
		v.Filter = &Filter{}
	}
	return v.Filter
}

// ParseDUT makes the DUT that a spec names.
func ParseDUT(spec string) (DUT, error) {
	v, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return v.NewDUT()
}

// NewDUT makes the DUT that v names, a new one each time.
func (v Spec) NewDUT() (DUT, error) { return v.newDUT() }

func (v Spec) newDUT() (DUT, error) {
	d, err := parseDUT(v.Kind, v.Mode, v.Name)
	switch d := d.(type) {
	case *trestleDUT:
		d.name, d.bin = v.Text, v.Bin
	case *linuxBridge:
		d.name = v.Text
		if v.Filter != nil && v.Filter.Off() {
			d.nft, d.off = false, true // linux-bridge:nft@rules=0: no table
		}
	case *ovsDUT:
		d.name = v.Text
	}
	return d, err
}

func parseDUT(kind, opt, s string) (DUT, error) {
	switch kind {
	case "direct":
		if opt == "" {
			return direct{}, nil
		}
	case "floor":
		if opt == "" || opt == "tc" {
			return &floorDUT{tc: opt == "tc"}, nil
		}
	case "linux-bridge":
		if opt == "" || opt == "nft" {
			return &linuxBridge{name: s, nft: opt == "nft"}, nil
		}
	case "trestle":
		if opt == "" || opt == "xdp" || opt == "tc" || opt == "auto" {
			mode := opt
			if mode == "" {
				mode = "auto"
			}
			return &trestleDUT{name: s, mode: mode}, nil
		}
	case "ovs":
		if opt == "" || opt == "afxdp" || opt == "system" {
			if opt == "" {
				opt = "afxdp"
			}
			return &ovsDUT{name: s, portType: opt}, nil
		}
	}
	return nil, fmt.Errorf("DUT %q: not one of %s", s, strings.Join(DUTNames, ", "))
}

// direct is the straight veth path: no DUT, the baseline.
type direct struct{}

func (direct) Name() string                             { return "direct" }
func (direct) Learns() bool                             { return false }
func (direct) Setup(context.Context, *Topo, *Env) error { return nil }
func (direct) Teardown(context.Context) error           { return nil }
func (direct) Settings() map[string]string {
	return map[string]string{"path": "a veth pair from host to host"}
}

// linuxBridge is the kernel's bridge, one per topology bridge, with
// netfilter on bridged frames off; with nft, every forwarded frame also
// passes an nftables bridge-family chain (the cost of a filter): the
// topology's Filter, or one rule accepting every frame (@filter's). off
// is linux-bridge:nft@rules=0, the filter off: no table.
type linuxBridge struct {
	name     string
	nft, off bool
	set      map[string]string
}

func (b *linuxBridge) Name() string                   { return b.name }
func (b *linuxBridge) Learns() bool                   { return true }
func (b *linuxBridge) Settings() map[string]string    { return b.set }
func (b *linuxBridge) Teardown(context.Context) error { return nil }

func (b *linuxBridge) Setup(ctx context.Context, t *Topo, env *Env) error {
	if err := t.DUT.BridgeNetfilter(false); err != nil {
		return err
	}
	b.set = map[string]string{"bridge-nf-call-iptables": "0 (off)", "vlan_filtering": "0", "stp": "off"}
	for _, br := range t.Bridges {
		err := t.DUT.Do(func() error {
			la := netlink.NewLinkAttrs()
			la.Name = br.Name
			dev := &netlink.Bridge{LinkAttrs: la}
			if err := netlink.LinkAdd(dev); err != nil {
				return fmt.Errorf("create bridge %s: %w", br.Name, err)
			}
			for _, p := range br.Ports {
				if t.Mirror != nil && p == t.Mirror.To {
					continue // tcMirror's span port: copies and nothing else
				}
				l, err := netlink.LinkByName(p)
				if err != nil {
					return fmt.Errorf("port %s: %w", p, err)
				}
				if err := netlink.LinkSetMaster(l, dev); err != nil {
					return fmt.Errorf("add %s to bridge %s: %w", p, br.Name, err)
				}
			}
			if t.VLANs != nil {
				if err := bridgeVLANs(dev, br, t.VLANs); err != nil {
					return err
				}
			}
			return netlink.LinkSetUp(dev)
		})
		if err != nil {
			return fmt.Errorf("linux-bridge: %w", err)
		}
	}
	if t.VLANs != nil {
		b.set["vlan_filtering"] = "1"
		for _, p := range t.DUTPorts() {
			if pv, ok := t.VLANs[p]; ok {
				if pv.Access != 0 {
					b.set["vlans "+p] = fmt.Sprintf("%d pvid untagged", pv.Access)
				} else {
					b.set["vlans "+p] = joinVIDs(pv.Trunk, ", ") + " tagged"
				}
			}
		}
	}
	if t.Mirror != nil {
		made, err := tcMirror(ctx, t.DUT, t.Mirror)
		if err != nil {
			return fmt.Errorf("linux-bridge: %w", err)
		}
		b.set["mirror"] = made
	}
	if t.Loop != nil {
		for _, br := range t.Bridges {
			if br.Name == t.Loop.Bridge {
				if err := stpOn(ctx, t, br); err != nil {
					return fmt.Errorf("linux-bridge: %w", err)
				}
				b.set["stp"] = fmt.Sprintf("on, on %s only: hello_time %v, forward_delay %v (the kernel's spanning tree: what stops a loop there)", br.Name, stpHello, stpForwardDelay)
			}
		}
	}
	if t.Multicast != nil {
		if err := b.setSnooping(ctx, t); err != nil {
			return fmt.Errorf("linux-bridge: %w", err)
		}
	}
	if t.Suppress {
		for _, p := range t.DUTPorts() {
			if _, err := t.DUT.Run(ctx, "bridge", "link", "set", "dev", p, "neigh_suppress", "on"); err != nil {
				return fmt.Errorf("linux-bridge: neigh_suppress on %s: %w", p, err)
			}
		}
		b.set["neigh_suppress"] = "on, on every port (bridge link set dev PORT neigh_suppress on)"
	}
	switch {
	case b.off:
		b.set["nftables"] = "none (rules=0: the filter off)"
	case b.nft:
		return b.loadFilter(ctx, t, env)
	}
	return nil
}

// loadFilter loads the topology's Filter into the DUT's nftables, or
// without one a chain whose one rule accepts every frame.
func (b *linuxBridge) loadFilter(ctx context.Context, t *Topo, env *Env) error {
	f := Filter{All: true}
	if t.Filter != nil {
		f = *t.Filter
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("%w: linux-bridge:nft's rules are loaded with nft, which is not installed (Debian package nftables)", ErrUnavailable)
	}
	file := filepath.Join(env.WorkDir, t.DUT.Name+".nft")
	if err := os.WriteFile(file, []byte(f.nftRuleset(false)), 0o644); err != nil {
		return err
	}
	if out, err := t.DUT.Run(ctx, "nft", "-f", file); err != nil {
		if why := nftUnavailable(&f, out); why != "" {
			return fmt.Errorf("%w: %s", ErrUnavailable, why)
		}
		return fmt.Errorf("linux-bridge:nft: %w", err)
	}
	b.set["nftables"] = "bridge family, forward hook, the rules in " + file + ":\n" + f.nftRuleset(true)
	return nil
}

// bridgeVLANs turns VLAN filtering on in the bridge dev and gives each of
// br's ports its VLANs in place of the default VLAN 1: an access port its
// VLAN as PVID, untagged; a trunk its VLANs tagged, no PVID. A kernel
// without bridge VLAN filtering (CONFIG_BRIDGE_VLAN_FILTERING) refuses the
// first step: the Linux bridge has no VLANs to measure there, and the error
// says so as the DUT being unavailable, which the run reports.
func bridgeVLANs(dev *netlink.Bridge, br Bridge, vlans map[string]PortVLAN) error {
	err := netlink.BridgeSetVlanFiltering(dev, true)
	if err == nil {
		// Read it back: a kernel that ignored the attribute has no filtering.
		l, lerr := netlink.LinkByName(br.Name)
		if b, ok := l.(*netlink.Bridge); lerr != nil || !ok || b.VlanFiltering == nil || !*b.VlanFiltering {
			err = fmt.Errorf("the kernel did not keep it (%v)", lerr)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: this kernel has no bridge VLAN filtering (CONFIG_BRIDGE_VLAN_FILTERING; no /sys/class/net/%s/bridge/vlan_filtering): vlan_filtering=1 on %s: %v", ErrUnavailable, br.Name, br.Name, err)
	}
	for _, p := range br.Ports {
		pv, ok := vlans[p]
		if !ok {
			continue
		}
		l, err := netlink.LinkByName(p)
		if err != nil {
			return fmt.Errorf("port %s: %w", p, err)
		}
		if err := netlink.BridgeVlanDel(l, 1, true, true, false, true); err != nil {
			return fmt.Errorf("remove the default VLAN 1 from %s: %w", p, err)
		}
		if pv.Access != 0 {
			if err := netlink.BridgeVlanAdd(l, pv.Access, true, true, false, true); err != nil {
				return fmt.Errorf("VLAN %d pvid untagged on %s: %w", pv.Access, p, err)
			}
			continue
		}
		for _, vid := range pv.Trunk {
			if err := netlink.BridgeVlanAdd(l, vid, false, false, false, true); err != nil {
				return fmt.Errorf("VLAN %d tagged on %s: %w", vid, p, err)
			}
		}
	}
	return nil
}

// trestleDUT is trestle's daemon, `trestle run`, with every port in one mode.
type trestleDUT struct {
	name, mode string
	bin        string // another build than the lab's own
	proc       *Proc
	set        map[string]string

	env       *Env
	ns        *NS
	cfg, sock string
	// own is the DUT's build, cur the running daemon's. With persist (the
	// restart test) the daemon runs with only the network namespace
	// joined and pins its datapath at pinDir; other is the build upgrade
	// events alternate with own, upgrades how many there were.
	own, cur string
	persist  bool
	pinDir   string
	other    *TrestleBuild
	upgrades int
	labels   map[string]string
}

func (d *trestleDUT) Name() string                { return d.name }
func (d *trestleDUT) Learns() bool                { return true }
func (d *trestleDUT) Settings() map[string]string { return d.set }

func (d *trestleDUT) Setup(ctx context.Context, t *Topo, env *Env) (err error) {
	d.env, d.ns = env, t.DUT
	d.sock = filepath.Join(env.WorkDir, t.DUT.Name+".sock")
	d.cfg = filepath.Join(env.WorkDir, t.DUT.Name+".toml")
	cfg := trestleConfig(t, env, d.mode, d.sock)
	if err := os.WriteFile(d.cfg, []byte(cfg), 0o644); err != nil {
		return err
	}
	d.own = env.Trestle
	if d.bin != "" {
		d.own = d.bin
	}
	if what := t.features(); what != "" {
		// A build without VLAN or patch ports rejects their keys: that
		// build cannot be measured with them, which is not a failure of
		// the run.
		if out, err := exec.CommandContext(ctx, d.own, "check", d.cfg).CombinedOutput(); err != nil {
			why := strings.ReplaceAll(strings.TrimSpace(string(out)), d.cfg+":", "line ")
			why = strings.ReplaceAll(why, "\n", "; ")
			return fmt.Errorf("%w: %s takes no %s: trestle check of its config: %v: %s", ErrUnavailable, d.label(d.own), what, err, why)
		}
	}
	if env.Persist {
		if _, err := exec.LookPath("nsenter"); err != nil {
			return fmt.Errorf("trestle with persist runs in the DUT namespace through nsenter: %w (it is in util-linux)", err)
		}
		d.persist = true
		// A daemon that pinned its datapath and then failed to come up
		// must not leave it pinned: Setup's failure gets no Teardown.
		defer func() {
			if err != nil {
				if terr := d.Teardown(context.Background()); terr != nil {
					err = fmt.Errorf("%w; and then: %v", err, terr)
				}
			}
		}()
	}
	p, err := d.start(d.own)
	if err != nil {
		return err
	}
	st, err := d.waitUp(ctx, p, 15*time.Second)
	if err != nil {
		return err
	}
	d.set = map[string]string{"config": configText(t, env, d.mode, d.sock, true), "binary": d.label(d.own)}
	for _, br := range st.Bridges {
		for _, port := range br.Ports {
			if port.Interface != "" { // not a patch port
				d.set["port "+port.Interface] = fmt.Sprintf("%s: %s%s", port.Mode, port.Reason, peerNote(port.Peer))
			}
		}
	}
	if j := t.Joins(); j != "" {
		d.set["bridges joined by"] = j
	}
	if d.persist {
		if !st.Persist || st.PinDir == "" {
			return fmt.Errorf("trestle run with persist: the daemon says it pinned nothing (persist %v, pinned at %q)", st.Persist, st.PinDir)
		}
		d.pinDir = st.PinDir
		d.set["persist"] = "on: the datapath outlives the daemon; the daemon runs with only the DUT's network namespace joined (nsenter --net)"
		d.set["pinned at"] = st.PinDir
	}
	return nil
}

// trestleConfig is the config of a trestle DUT on t: every port in mode,
// in its VLANs where t has them, t's mirror where it has one, and t's
// filter rules on every bridge where it has them.
func trestleConfig(t *Topo, env *Env, mode, sock string) string {
	return configText(t, env, mode, sock, false)
}

// configText is trestleConfig; brief leaves most rules of a long list out,
// for the unit's record.
func configText(t *Topo, env *Env, mode, sock string, brief bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nsocket = %q\n", sock)
	if env.Persist {
		b.WriteString("persist = true\n")
	}
	for _, br := range t.Bridges {
		fmt.Fprintf(&b, "\n[[bridge]]\nname = %q\n", br.Name)
		if env.MaxEntries > 0 {
			fmt.Fprintf(&b, "max_entries = %d\n", env.MaxEntries)
		}
		if t.Filter != nil {
			b.WriteString(t.Filter.trestleKeys())
		}
		if t.Loop != nil && t.Loop.Bridge == br.Name {
			fmt.Fprintf(&b, "loop_detect = true\nloop_retry = %q\n", loopRetryText())
		}
		if t.Multicast != nil && t.Multicast.Snoop {
			b.WriteString("multicast_snooping = true\n")
		}
		if t.Suppress {
			b.WriteString("neigh_suppress = true\n")
		}
		for _, p := range br.Ports {
			fmt.Fprintf(&b, "\n[[bridge.port]]\ninterface = %q\nmode = %q\n", p, mode)
			if pv, ok := t.VLANs[p]; ok {
				if pv.Access != 0 {
					fmt.Fprintf(&b, "vlan = %d\n", pv.Access)
				} else {
					fmt.Fprintf(&b, "trunk = [%s]\n", joinVIDs(pv.Trunk, ", "))
				}
			}
		}
		// A patch port has no interface and no mode; it takes the name
		// t.Patches gives it, as Open vSwitch's does.
		for _, pp := range t.Patches {
			switch br.Name {
			case pp.A:
				fmt.Fprintf(&b, "\n[[bridge.port]]\npatch = %q\nname = %q\n", pp.B, pp.PortA)
			case pp.B:
				fmt.Fprintf(&b, "\n[[bridge.port]]\npatch = %q\nname = %q\n", pp.A, pp.PortB)
			}
		}
		// The span port is one of the bridge's ports above.
		if m := t.Mirror; m != nil && slices.Contains(br.Ports, m.To) {
			var ports []string
			for _, p := range m.Ports {
				ports = append(ports, fmt.Sprintf("%q", p))
			}
			fmt.Fprintf(&b, "\n[[bridge.mirror]]\nname = %q\nports = [%s]\ndirection = %q\nto = %q\n", m.Name, strings.Join(ports, ", "), m.Direction, m.To)
		}
		if t.Filter != nil {
			b.WriteString(t.Filter.trestleRules(brief))
		}
	}
	return b.String()
}

// start starts the daemon from bin, pinned to the DUT's CPU.
func (d *trestleDUT) start(bin string) (*Proc, error) {
	// --socket: it beats a TRESTLE_SOCKET the lab may have inherited.
	args := []string{"-c", fmt.Sprint(d.env.DUTCPU), bin, "run", "--config", d.cfg, "--socket", d.sock}
	var p *Proc
	var err error
	if d.persist {
		p, err = d.ns.StartNetOnly("taskset", args...)
	} else {
		p, err = d.ns.Start("taskset", args...)
	}
	if err != nil {
		return nil, err
	}
	d.proc, d.cur = p, bin
	return p, nil
}

// waitUp waits until the daemon p answers on its socket with every port up.
func (d *trestleDUT) waitUp(ctx context.Context, p *Proc, limit time.Duration) (ctl.Status, error) {
	deadline := time.Now().Add(limit)
	for {
		var st ctl.Status
		err := ctl.Call(d.sock, ctl.Request{Cmd: ctl.CmdShow}, &st)
		if err == nil && allUp(st) {
			return st, nil
		}
		select {
		case <-p.Done():
			return st, fmt.Errorf("trestle run exited: %v\n%s", p.Err(), p.Output())
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("trestle run: ports not up after %v (%v)\n%s", limit, err, p.Output())
		}
	}
}

// label is a build for people: its path and the version it reports.
func (d *trestleDUT) label(bin string) string {
	if l, ok := d.labels[bin]; ok {
		return l
	}
	l := bin
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		l = fmt.Sprintf("%s (%s)", bin, strings.TrimPrefix(strings.TrimSpace(string(out)), "trestle version "))
	}
	if d.labels == nil {
		d.labels = map[string]string{}
	}
	d.labels[bin] = l
	return l
}

// otherBuild is the build upgrade events alternate with the DUT's own:
// --upgrade-to, else the lab's own build for a DUT with bin=, else one
// the lab makes (Env.OtherBuild), else the same build, said so.
func (d *trestleDUT) otherBuild(ctx context.Context) TrestleBuild {
	switch {
	case d.env.UpgradeTo != "":
		return TrestleBuild{Path: d.env.UpgradeTo, Label: d.label(d.env.UpgradeTo) + ", given with --upgrade-to"}
	case d.bin != "" && d.bin != d.env.Trestle:
		return TrestleBuild{Path: d.env.Trestle, Label: d.label(d.env.Trestle) + ", the lab's own build"}
	}
	why := "no other build given (--upgrade-to PATH, or trestle@bin=PATH for the DUT's)"
	if d.env.OtherBuild != nil {
		b, err := d.env.OtherBuild(ctx)
		if err == nil {
			return b
		}
		why += ", and none could be built: " + err.Error()
	}
	return TrestleBuild{Path: d.own, Label: "the same build: " + why}
}

func (d *trestleDUT) RestartPlan(ctx context.Context, kind string) (string, error) {
	if !d.persist {
		return "", errors.New("trestle runs without persist: a restart would detach its datapath")
	}
	switch kind {
	case EventSIGKILL:
		return "SIGKILL, then the same build started again (persist: it adopts the datapath pinned by the one killed)", nil
	case EventSIGTERM:
		return "SIGTERM (persist: the datapath goes on forwarding), then the same build started again, which adopts it", nil
	case EventUpgrade:
		if d.other == nil {
			b := d.otherBuild(ctx)
			d.other = &b
		}
		if d.other.Path == d.own {
			d.set["upgrade"] = d.other.Label
			return fmt.Sprintf("SIGTERM, then %s started again, which adopts the datapath; %s: so an upgrade event is a SIGTERM event", d.label(d.own), d.other.Label), nil
		}
		d.set["upgrade"] = "alternately to " + d.other.Label + " and back to " + d.label(d.own)
		return fmt.Sprintf("SIGTERM, then another build started in its place, which adopts the datapath: alternately %s, and back to %s", d.other.Label, d.label(d.own)), nil
	}
	return "", fmt.Errorf("no such event: %s", kind)
}

func (d *trestleDUT) Restart(ctx context.Context, kind string) (Restarted, error) {
	var res Restarted
	old := d.proc
	if old == nil {
		return res, errors.New("trestle run: no daemon to restart")
	}
	sig, next := syscall.SIGTERM, d.cur
	switch kind {
	case EventSIGKILL:
		sig = syscall.SIGKILL
	case EventSIGTERM:
	case EventUpgrade:
		if d.other == nil {
			return res, errors.New("upgrade: RestartPlan found no other build")
		}
		d.upgrades++
		next = d.own
		if d.upgrades%2 == 1 {
			next = d.other.Path
		}
	default:
		return res, fmt.Errorf("no such event: %s", kind)
	}
	res.From, res.To = d.label(d.cur), d.label(next)
	t0 := time.Now()
	if err := old.Cmd.Process.Signal(sig); err != nil {
		return res, fmt.Errorf("%v to trestle run (pid %d): %w", sig, old.Cmd.Process.Pid, err)
	}
	select {
	case <-old.Done():
	case <-time.After(15 * time.Second):
		return res, fmt.Errorf("trestle run (pid %d) still running 15s after %v\n%s", old.Cmd.Process.Pid, sig, old.Output())
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.Exited = time.Since(t0)
	p, err := d.start(next)
	if err != nil {
		return res, err
	}
	_, err = d.waitUp(ctx, p, 30*time.Second)
	res.Back = time.Since(t0)
	res.Log = "old daemon (" + res.From + "), its last lines:\n" + lastLines(old.Output(), 12) + "\nnew daemon (" + res.To + "):\n" + p.Output()
	return res, err
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func peerNote(p string) string {
	if p == "" {
		return ""
	}
	return "; peer: " + p
}

func allUp(st ctl.Status) bool {
	if len(st.Bridges) == 0 {
		return false
	}
	for _, b := range st.Bridges {
		for _, p := range b.Ports {
			if p.State != "up" {
				return false
			}
		}
	}
	return true
}

func (d *trestleDUT) Teardown(ctx context.Context) error {
	var errs []error
	if d.proc != nil {
		exited := false
		select {
		case <-d.proc.Done():
			exited = true // killed by an event that then failed: that event says so
		default:
		}
		// A daemon without persist takes each program off as it stops,
		// an RCU grace period each under the RTNL lock: a bridge of 1024
		// tc ports takes some 18 s here (docs/switching.md, "Ports at
		// scale"), so the grace before SIGKILL is a minute.
		err := d.proc.StopWith(syscall.SIGTERM, time.Minute)
		d.proc = nil
		if err != nil && !exited && !strings.Contains(err.Error(), "terminated") {
			errs = append(errs, fmt.Errorf("trestle run: %w", err))
		}
	}
	if d.persist {
		// The datapath outlived the daemon: remove it, with the build that
		// ran last (it knows the layout of what it pinned), else the lab's.
		d.persist = false
		bin := d.cur
		if bin == "" {
			bin = d.own
		}
		_, err := d.ns.RunNetOnly(ctx, bin, "down", "--socket", d.sock)
		if err != nil && bin != d.env.Trestle {
			_, err = d.ns.RunNetOnly(ctx, d.env.Trestle, "down", "--socket", d.sock)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove the persisted datapath in %s: %w", d.ns.Name, err))
		}
		if d.pinDir != "" {
			if _, err := os.Stat(d.pinDir); err == nil {
				errs = append(errs, fmt.Errorf("trestle down in %s: %s is still pinned", d.ns.Name, d.pinDir))
			}
		}
	}
	return errors.Join(errs...)
}
