package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
}

// ErrUnavailable is wrapped when a DUT cannot run on this machine (a missing
// package, say): the lab reports it and goes on with the others.
var ErrUnavailable = errors.New("DUT not available here")

// DUTNames lists the DUTs ParseDUT knows, for --help.
var DUTNames = []string{"direct", "linux-bridge", "linux-bridge:nft", "trestle", "trestle:xdp", "trestle:tc", "ovs", "ovs:afxdp", "ovs:system"}

// offloadAliases are the short names of host offloads in DUT variants.
var offloadAliases = map[string]string{
	"tso": "tx-tcp-segmentation", "gso": "tx-generic-segmentation", "gro": "rx-gro",
	"tx": "tx-checksum-ip-generic", "lro": "rx-lro", "sg": "tx-scatter-gather",
}

// Variant is a DUT spec "NAME[@knob=value,...]" taken apart. Knobs change
// one thing, so that one run measures it on and off side by side, in
// interleaved repetitions, and ministat compares the two (as seed 001
// compares TSO and LRO): OFFLOAD=on|off sets the hosts' offloads before the
// DUT starts (ethtool feature names, or tso, gso, gro, lro, tx, sg), and
// bin=PATH runs a trestle DUT from another build ("trestle:xdp@bin=/tmp/old").
type Variant struct {
	Name     string
	Offloads map[string]bool
	Bin      string
}

// SplitVariant parses a DUT spec.
func SplitVariant(s string) (Variant, error) {
	name, knobs, ok := strings.Cut(s, "@")
	v := Variant{Name: name}
	if !ok {
		return v, nil
	}
	for _, kv := range strings.Split(knobs, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		switch {
		case ok && k == "bin" && val != "":
			if !strings.HasPrefix(name, "trestle") {
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
			return v, fmt.Errorf("DUT %q: %q is not OFFLOAD=on, OFFLOAD=off or bin=PATH", s, kv)
		}
	}
	return v, nil
}

// ParseDUT makes the DUT that a spec names (see Variant).
func ParseDUT(spec string) (DUT, error) {
	v, err := SplitVariant(spec)
	if err != nil {
		return nil, err
	}
	d, err := parseDUT(v.Name)
	if t, ok := d.(*trestleDUT); ok {
		t.name, t.bin = spec, v.Bin
	}
	return d, err
}

func parseDUT(s string) (DUT, error) {
	kind, opt, _ := strings.Cut(s, ":")
	switch kind {
	case "direct":
		if opt == "" {
			return direct{}, nil
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
// passes an accepting nftables bridge-family chain (the cost of a filter).
type linuxBridge struct {
	name string
	nft  bool
	set  map[string]string
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
				l, err := netlink.LinkByName(p)
				if err != nil {
					return fmt.Errorf("port %s: %w", p, err)
				}
				if err := netlink.LinkSetMaster(l, dev); err != nil {
					return fmt.Errorf("add %s to bridge %s: %w", p, br.Name, err)
				}
			}
			return netlink.LinkSetUp(dev)
		})
		if err != nil {
			return fmt.Errorf("linux-bridge: %w", err)
		}
	}
	if b.nft {
		rules := "table bridge trestle_lab {\n chain forward {\n  type filter hook forward priority 0; policy accept;\n  counter accept\n }\n}\n"
		f := filepath.Join(env.WorkDir, t.DUT.Name+".nft")
		if err := os.WriteFile(f, []byte(rules), 0o644); err != nil {
			return err
		}
		if _, err := t.DUT.Run(ctx, "nft", "-f", f); err != nil {
			return fmt.Errorf("linux-bridge:nft: %w (is nftables installed?)", err)
		}
		b.set["nftables"] = "bridge family, forward hook: one counter rule, accept"
	}
	return nil
}

// trestleDUT is trestle's daemon, `trestle run`, with every port in one mode.
type trestleDUT struct {
	name, mode string
	bin        string // another build than the lab's own
	proc       *Proc
	set        map[string]string
}

func (d *trestleDUT) Name() string                { return d.name }
func (d *trestleDUT) Learns() bool                { return true }
func (d *trestleDUT) Settings() map[string]string { return d.set }

func (d *trestleDUT) Setup(ctx context.Context, t *Topo, env *Env) error {
	sock := filepath.Join(env.WorkDir, t.DUT.Name+".sock")
	cfg := filepath.Join(env.WorkDir, t.DUT.Name+".toml")
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nsocket = %q\n", sock)
	for _, br := range t.Bridges {
		fmt.Fprintf(&b, "\n[[bridge]]\nname = %q\n", br.Name)
		if env.MaxEntries > 0 {
			fmt.Fprintf(&b, "max_entries = %d\n", env.MaxEntries)
		}
		for _, p := range br.Ports {
			fmt.Fprintf(&b, "\n[[bridge.port]]\ninterface = %q\nmode = %q\n", p, d.mode)
		}
	}
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return err
	}
	bin := env.Trestle
	if d.bin != "" {
		bin = d.bin
	}
	// --socket: it beats a TRESTLE_SOCKET the lab may have inherited.
	p, err := t.DUT.Start("taskset", "-c", fmt.Sprint(env.DUTCPU), bin, "run", "--config", cfg, "--socket", sock)
	if err != nil {
		return err
	}
	d.proc = p
	deadline := time.Now().Add(15 * time.Second)
	for {
		var st ctl.Status
		err := ctl.Call(sock, ctl.Request{Cmd: ctl.CmdShow}, &st)
		if err == nil && allUp(st) {
			d.set = map[string]string{"config": b.String(), "binary": bin}
			for _, br := range st.Bridges {
				for _, port := range br.Ports {
					d.set["port "+port.Interface] = fmt.Sprintf("%s: %s%s", port.Mode, port.Reason, peerNote(port.Peer))
				}
			}
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("trestle run exited: %v\n%s", p.Err(), p.Output())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("trestle run: ports not up after 15s (%v)\n%s", err, p.Output())
		}
	}
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

func (d *trestleDUT) Teardown(context.Context) error {
	if d.proc == nil {
		return nil
	}
	err := d.proc.Stop(10 * time.Second)
	d.proc = nil
	if err != nil && !strings.Contains(err.Error(), "terminated") {
		return fmt.Errorf("trestle run: %w", err)
	}
	return nil
}

// sortedKeys is for printing settings in a stable order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
