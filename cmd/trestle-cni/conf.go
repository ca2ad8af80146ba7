package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/linklocal"
)

// NetConf is the plugin's network configuration: the bridge plugin's keys
// where they mean the same (so that a network moves over by changing
// "type"), plus "socket". docs/containers-and-vms.md lists every key.
type NetConf struct {
	types.NetConf
	Bridge        string       `json:"bridge"`
	VLAN          int          `json:"vlan"`
	VLANTrunk     []*vlanTrunk `json:"vlanTrunk,omitempty"`
	MTU           int          `json:"mtu"`
	PortIsolation bool         `json:"portIsolation,omitempty"`
	EnableDAD     bool         `json:"enabledad,omitempty"`
	// MacSpoofChk: the port is locked to the container interface's MAC
	// (locked=true allowed_macs=MAC): frames from any other source are
	// dropped at the port, as the bridge plugin's nftables rules do.
	MacSpoofChk bool `json:"macspoofchk,omitempty"`
	// AllowMacOverride lets the caller choose the container interface's
	// MAC (args.cni.mac, runtimeConfig.mac, CNI_ARGS MAC=) on a
	// macspoofchk network. Without it the choice is refused there: the
	// port would be bound to whatever address the caller named, such as
	// the gateway's. With it, an address another port holds is still
	// refused, by the daemon.
	AllowMacOverride bool `json:"allowMacOverride,omitempty"`
	// IPGuard: the port is bound to the addresses the IPAM plugin gave
	// the container and the EUI-64 link-local address of its MAC
	// (ip_guard=true allowed_ips=...): ARP, neighbour discovery and IP
	// from any other address are dropped at the port; and the container
	// is no router and no DHCP server (ra_guard=true dhcp_guard=true):
	// router advertisements, redirects and DHCP server messages from it
	// are dropped too.
	IPGuard bool `json:"ipguard,omitempty"`
	// BPDUGuard: a BPDU from the container (a VM or a container that runs
	// a bridge with spanning tree) blocks its port (bpdu_guard=true) until
	// `trestle port enable`.
	BPDUGuard bool   `json:"bpduGuard,omitempty"`
	Socket    string `json:"socket,omitempty"`

	Args struct {
		CNI struct {
			MAC string `json:"mac,omitempty"`
		} `json:"cni,omitempty"`
	} `json:"args,omitempty"`
	RuntimeConfig struct {
		MAC string `json:"mac,omitempty"`
	} `json:"runtimeConfig,omitempty"`

	// From the keys above: the trunk's VLANs in order, and the MAC the
	// container's interface gets ("": the kernel's).
	trunk []uint16
	mac   string
}

type vlanTrunk struct {
	MinID *int `json:"minID,omitempty"`
	MaxID *int `json:"maxID,omitempty"`
	ID    *int `json:"id,omitempty"`
}

// macArgs is CNI_ARGS ("MAC=...;K=V").
type macArgs struct {
	types.CommonArgs
	MAC types.UnmarshallableString `json:"mac,omitempty"`
}

// refused are the bridge plugin's keys that ask for what trestle does not
// do, with why; a key set to its zero value (false, 0, "") asks for nothing
// and passes, so that a bridge plugin config that spells out its defaults
// moves over as it is.
var refused = []struct{ key, why string }{
	{"isGateway", "trestle is a layer-2 switch: it gives the bridge no address and routes nothing; put the gateway on a host or router port of the bridge"},
	{"isDefaultGateway", "trestle is a layer-2 switch and routes nothing: give the route through ipam's routes"},
	{"forceAddress", "trestle gives the bridge no address"},
	{"ipMasq", "trestle does no NAT: masquerade on the router of the network"},
	{"ipMasqBackend", "trestle does no NAT: masquerade on the router of the network"},
	{"hairpinMode", "trestle never sends a frame back out of the port it came in on"},
	{"promiscMode", "a trestle bridge has no interface of its own to make promiscuous"},
	{"preserveDefaultVlan", "trestle has no default VLAN 1 on its ports: a port carries only the VLANs vlan and vlanTrunk name"},
	{"disableContainerInterface", "trestle leaves the container's interface up"},
}

// confError is a configuration the plugin refuses, with the spec's code.
func confError(code uint, format string, a ...any) *types.Error {
	return types.NewError(code, fmt.Sprintf(format, a...), "")
}

// loadConf parses stdin's network configuration and CNI_ARGS (envArgs)
// and checks every key, the socket among them (checkSocket); errors carry
// the spec's codes (2: a key trestle does not have, 7: a bad value).
func loadConf(stdin []byte, envArgs string) (*NetConf, error) {
	n, err := parseConf(stdin, envArgs)
	if err != nil {
		return nil, err
	}
	if err := n.checkSocket(); err != nil {
		return nil, err
	}
	return n, nil
}

// parseConf is loadConf but for the socket's check, which DEL makes apart.
func parseConf(stdin []byte, envArgs string) (*NetConf, error) {
	n := &NetConf{}
	if err := json.Unmarshal(stdin, n); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("network configuration: %v", err), "")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &raw); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("network configuration: %v", err), "")
	}
	for _, r := range refused {
		v, ok := raw[r.key]
		if !ok || isZero(v) {
			continue
		}
		return nil, confError(types.ErrUnsupportedField, "%s: %s is not supported by trestle: %s", n.Name, r.key+"="+string(v), r.why)
	}
	if n.Bridge == "" {
		return nil, confError(types.ErrInvalidNetworkConfig, "%s: bridge: missing: name the trestle bridge the network's ports join", n.Name)
	}
	if n.VLAN < 0 || n.VLAN > 4094 {
		return nil, confError(types.ErrInvalidNetworkConfig, "%s: vlan: %d is not a VLAN (1-4094, or 0 for none)", n.Name, n.VLAN)
	}
	trunk, err := collectTrunk(n.VLANTrunk)
	if err != nil {
		return nil, confError(types.ErrInvalidNetworkConfig, "%s: vlanTrunk: %v", n.Name, err)
	}
	// The bridge plugin's vlan on a trunk is its untagged VLAN (PVID):
	// trestle's native VLAN, which is one of the trunk's.
	if n.VLAN != 0 && len(trunk) > 0 && !slices.Contains(trunk, uint16(n.VLAN)) {
		trunk = append(trunk, uint16(n.VLAN))
		slices.Sort(trunk)
	}
	n.trunk = trunk
	if n.MTU < 0 || n.MTU > 65535 {
		return nil, confError(types.ErrInvalidNetworkConfig, "%s: mtu: %d is not an MTU (68-65535, or 0 for the kernel's)", n.Name, n.MTU)
	}
	if n.MTU != 0 && n.MTU < 68 {
		return nil, confError(types.ErrInvalidNetworkConfig, "%s: mtu: %d is below IPv4's minimum of 68", n.Name, n.MTU)
	}
	if n.IPGuard && ipamNeedsNetwork(n.IPAM.Type) {
		return nil, confError(types.ErrInvalidNetworkConfig, "%s: ipguard: the %s IPAM plugin gives the addresses after the port forwards, and ip_guard binds the port to them before: use host-local or static, or leave ipguard out", n.Name, n.IPAM.Type)
	}
	if n.Socket == "" {
		n.Socket = ctl.DefaultSocket
	} else if !strings.HasPrefix(n.Socket, "/") {
		return nil, confError(types.ErrInvalidNetworkConfig, "%s: socket: %q is not an absolute path", n.Name, n.Socket)
	}
	n.Socket = filepath.Clean(n.Socket)

	// The MAC: CNI_ARGS, then args.cni, then runtimeConfig, each over the
	// one before (the bridge plugin's order: runtimeConfig wins).
	if envArgs != "" {
		var e macArgs
		if err := types.LoadArgs(envArgs, &e); err != nil {
			return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: %v", err), "")
		}
		if e.MAC != "" {
			n.mac = string(e.MAC)
		}
	}
	if m := n.Args.CNI.MAC; m != "" {
		n.mac = m
	}
	if m := n.RuntimeConfig.MAC; m != "" {
		n.mac = m
	}
	if n.mac != "" {
		hw, err := net.ParseMAC(n.mac)
		if err != nil || len(hw) != 6 {
			return nil, confError(types.ErrInvalidNetworkConfig, "%s: mac: %q is not an Ethernet address", n.Name, n.mac)
		}
		if hw[0]&1 != 0 || bytes.Equal(hw, make(net.HardwareAddr, 6)) {
			return nil, confError(types.ErrInvalidNetworkConfig, "%s: mac: %s is not a station's address (multicast or zero)", n.Name, hw)
		}
		n.mac = hw.String()
		if n.MacSpoofChk && !n.AllowMacOverride {
			return nil, confError(types.ErrInvalidNetworkConfig, "%s: mac: %s was chosen by the caller (args.cni.mac, runtimeConfig.mac or CNI_ARGS MAC=), and macspoofchk binds the port to it: set \"allowMacOverride\": true in the network's config to let callers choose", n.Name, hw)
		}
	}
	return n, nil
}

// socketDir is the daemon's run directory: what is in it is root's (the
// daemon makes it, mode 0700 or 0755), so a socket there is a trestle
// daemon's the node runs.
const socketDir = "/run/trestle/"

// socketsFile lists the other control sockets a network may name, one
// absolute path a line ('#' begins a comment); read only when it is
// root's and no one else may write it. A variable for the tests.
var socketsFile = "/etc/trestle/cni-sockets"

// checkSocket refuses a socket the node does not allow (code 7): the
// plugin runs as root and does what the daemon behind the socket answers,
// so whoever may write a network configuration (a namespace's user, with
// Multus) must not choose which daemon, or which other program, that is.
// Allowed are the default socket, one under socketDir and one socketsFile
// lists: each is the node's choice, and a network cannot widen it.
func (n *NetConf) checkSocket() error {
	s := n.Socket
	if s == ctl.DefaultSocket || strings.HasPrefix(s, socketDir) && len(s) > len(socketDir) {
		return nil
	}
	listed, err := listedSockets(socketsFile)
	if err == nil && slices.Contains(listed, s) {
		return nil
	}
	why := ""
	if err != nil {
		why = fmt.Sprintf(" (%v)", err)
	}
	return confError(types.ErrInvalidNetworkConfig, "%s: socket: %s is not a socket the node allows: a network may name the default %s, one under %s, or one listed in %s%s; to allow it, add its path there as a line of its own (the file must be root's and writable by no one else)", n.Name, s, ctl.DefaultSocket, socketDir, socketsFile, why)
}

// listedSockets reads the paths of a socketsFile: none when there is no
// file, an error when it is not root's or others may write it (it is not
// read then: a user who could add a line would choose the daemon).
func listedSockets(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s is not read: it is not a file of root's that only root may write", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "/") {
			out = append(out, filepath.Clean(line))
		}
	}
	return out, nil
}

// isZero reports whether a JSON value is false, 0, "", null, [] or {}.
func isZero(v json.RawMessage) bool {
	switch s := strings.TrimSpace(string(v)); s {
	case "false", "0", `""`, "null", "[]", "{}":
		return true
	}
	return false
}

// collectTrunk turns vlanTrunk into its VLANs in order, checked as the
// bridge plugin checks them.
func collectTrunk(items []*vlanTrunk) ([]uint16, error) {
	set := map[uint16]bool{}
	for i, it := range items {
		if it == nil {
			return nil, fmt.Errorf("item %d: null", i+1)
		}
		switch {
		case it.MinID != nil && it.MaxID != nil:
			lo, hi := *it.MinID, *it.MaxID
			if lo < 1 || lo > 4094 {
				return nil, fmt.Errorf("item %d: minID %d is not a VLAN (1-4094)", i+1, lo)
			}
			if hi < 1 || hi > 4094 {
				return nil, fmt.Errorf("item %d: maxID %d is not a VLAN (1-4094)", i+1, hi)
			}
			if hi < lo {
				return nil, fmt.Errorf("item %d: minID %d is above maxID %d", i+1, lo, hi)
			}
			for v := lo; v <= hi; v++ {
				set[uint16(v)] = true
			}
		case it.MinID != nil || it.MaxID != nil:
			return nil, fmt.Errorf("item %d: minID and maxID go together", i+1)
		case it.ID == nil:
			return nil, fmt.Errorf("item %d: no id, or minID and maxID", i+1)
		}
		if it.ID != nil {
			if *it.ID < 1 || *it.ID > 4094 {
				return nil, fmt.Errorf("item %d: id %d is not a VLAN (1-4094)", i+1, *it.ID)
			}
			set[uint16(*it.ID)] = true
		}
	}
	var vs []uint16
	for v := range set {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs, nil
}

// portArgs are the port keys (trestle port add's KEY=VALUE) the network
// asks for. vlan alone is an access port; vlanTrunk a trunk, whose native
// (untagged) VLAN is vlan if both are set, as the bridge plugin makes it
// (the trunk then carries vlan too).
// Unlike the bridge plugin, a trunk with no vlan has no native VLAN (no
// VLAN 1 by default). mac is the container interface's, which macspoofchk
// binds the port to; ips the addresses ipguard binds it to (guardIPs).
func (n *NetConf) portArgs(mac string, ips []string) []string {
	var args []string
	switch {
	case len(n.trunk) > 0:
		args = append(args, "trunk="+ctl.VLANList(n.trunk).String())
		if n.VLAN != 0 {
			args = append(args, "native="+strconv.Itoa(n.VLAN))
		}
	case n.VLAN != 0:
		args = append(args, "vlan="+strconv.Itoa(n.VLAN))
	}
	if n.PortIsolation {
		args = append(args, "protected=true")
	}
	if n.MacSpoofChk {
		args = append(args, "locked=true", "allowed_macs="+mac)
	}
	if n.IPGuard {
		args = append(args, "ip_guard=true", "allowed_ips="+strings.Join(ips, ","), "ra_guard=true", "dhcp_guard=true")
	}
	if n.BPDUGuard {
		args = append(args, "bpdu_guard=true")
	}
	return args
}

// guardIPs are the addresses an ipguard network binds a container's port
// to: those of r (the IPAM plugin's, or the previous plugin's) and the
// EUI-64 link-local address of mac, the container interface's (the one
// the kernel gives it with the default addr_gen_mode). nil: no ipguard.
func (n *NetConf) guardIPs(mac string, r *current.Result) []string {
	if !n.IPGuard {
		return nil
	}
	var out []string
	for _, c := range r.IPs {
		if a := c.Address.IP.String(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if hw, err := net.ParseMAC(mac); err == nil && len(hw) == 6 {
		out = append(out, linklocal.EUI64(hw).String())
	}
	return out
}

// checkPort says how a port differs from what the network asks for ("":
// not at all); mac is the container interface's, as the ADD's result gave
// it, and ips the addresses ipguard binds the port to (guardIPs).
func (n *NetConf) checkPort(p ctl.PortEntry, mac string, ips []string) string {
	var diffs []string
	if p.State != "up" {
		diffs = append(diffs, fmt.Sprintf("state %s (%s), want up", p.State, p.Reason))
	}
	// A network with neither vlan nor vlanTrunk leaves the VLAN to the
	// bridge (on a VLAN-aware one, access VLAN 1 as for any such port).
	if n.VLAN != 0 || len(n.trunk) > 0 {
		wantVLAN, wantNative := uint16(0), uint16(0)
		if len(n.trunk) > 0 {
			wantNative = uint16(n.VLAN)
		} else {
			wantVLAN = uint16(n.VLAN)
		}
		if p.VLAN != wantVLAN {
			diffs = append(diffs, fmt.Sprintf("access VLAN %d, want %d", p.VLAN, wantVLAN))
		}
		if p.Native != wantNative {
			diffs = append(diffs, fmt.Sprintf("native VLAN %d, want %d", p.Native, wantNative))
		}
		if !slices.Equal(p.Trunk, n.trunk) {
			diffs = append(diffs, fmt.Sprintf("trunk %q, want %q", p.Trunk, ctl.VLANList(n.trunk)))
		}
	}
	if p.Protected != n.PortIsolation {
		diffs = append(diffs, fmt.Sprintf("protected %t, want %t (portIsolation)", p.Protected, n.PortIsolation))
	}
	if p.Locked != n.MacSpoofChk {
		diffs = append(diffs, fmt.Sprintf("locked %t, want %t (macspoofchk)", p.Locked, n.MacSpoofChk))
	}
	var wantMACs []string
	if n.MacSpoofChk {
		wantMACs = []string{strings.ToLower(mac)}
	}
	if !slices.Equal(p.AllowedMACs, wantMACs) {
		diffs = append(diffs, fmt.Sprintf("allowed_macs %v, want %v (macspoofchk: the container interface's MAC)", p.AllowedMACs, wantMACs))
	}
	if p.IPGuard != n.IPGuard {
		diffs = append(diffs, fmt.Sprintf("ip_guard %t, want %t (ipguard)", p.IPGuard, n.IPGuard))
	}
	if p.RAGuard != n.IPGuard {
		diffs = append(diffs, fmt.Sprintf("ra_guard %t, want %t (ipguard)", p.RAGuard, n.IPGuard))
	}
	if p.DHCPGuard != n.IPGuard {
		diffs = append(diffs, fmt.Sprintf("dhcp_guard %t, want %t (ipguard)", p.DHCPGuard, n.IPGuard))
	}
	if p.BPDUGuard != n.BPDUGuard {
		diffs = append(diffs, fmt.Sprintf("bpdu_guard %t, want %t (bpduGuard)", p.BPDUGuard, n.BPDUGuard))
	}
	if !slices.Equal(p.AllowedIPs, ips) {
		diffs = append(diffs, fmt.Sprintf("allowed_ips %v, want %v (ipguard: the container's addresses)", p.AllowedIPs, ips))
	}
	return strings.Join(diffs, "; ")
}

// owner is who a port belongs to, as the daemon keeps it: the network's
// name, the container's id and the interface's name, separated by spaces
// (none of the three may hold one: the spec's names and ids are
// [a-zA-Z0-9_.-] and an interface name has no white space).
func owner(network, containerID, ifname string) string {
	return network + " " + containerID + " " + ifname
}

// parseOwner splits an owner made by owner; ok is false for any other
// owner (another network's form, a VM's script's).
func parseOwner(o string) (network, containerID, ifname string, ok bool) {
	f := strings.Split(o, " ")
	if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] == "" {
		return "", "", "", false
	}
	return f[0], f[1], f[2], true
}

// hostVethName is the host end's name for an attachment: "tr" and 13 hex
// digits of a SHA-256 of the container id and interface name, 15 bytes
// (the kernel's most), the same on every call so that DEL and GC find the
// veth with nothing kept on disk.
func hostVethName(containerID, ifname string) string {
	h := sha256.Sum256([]byte(containerID + "\x00" + ifname))
	return "tr" + hex.EncodeToString(h[:])[:13]
}
