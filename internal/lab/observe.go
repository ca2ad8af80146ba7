package lab

// What the lab reads of a DUT while traffic runs (the mac-flood and soak
// tests): the size of its learning tables, their static entries, the
// memory of its daemon and the eBPF maps of the programs on its ports.
// Each DUT reads its table its own way (trestle's control socket, the
// Linux bridge's netlink attributes, ovs-appctl); what a DUT cannot tell
// is said so, never filled in.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/frame"
)

// TableReading is one reading of a bridge's learning table.
type TableReading struct {
	// Learned is the learned addresses the table holds (static entries
	// apart): what a table limit bounds. -1: not readable.
	Learned int `json:"learned"`
	// Entries is everything it holds, static entries too (0: not told).
	Entries int `json:"entries,omitempty"`
	// Evicted is what the DUT has thrown out of the table to make room
	// since it started (Open vSwitch tells; 0 for the others).
	Evicted int64 `json:"evicted,omitempty"`
}

// FDBEntry is where a bridge's table sends an address.
type FDBEntry struct {
	Port   string
	Static bool
}

// Tables is a DUT whose learning tables the lab can read and change.
type Tables interface {
	// ReadTable reads the size of bridge's table: cheap enough for once a
	// second while a flood runs.
	ReadTable(ctx context.Context, t *Topo, bridge string) (TableReading, error)
	// FDBEntries lists bridge's table, by lower-case MAC address.
	FDBEntries(ctx context.Context, t *Topo, bridge string) (map[string]FDBEntry, error)
	// AddStatic adds a static entry of mac on port.
	AddStatic(ctx context.Context, t *Topo, bridge, port string, mac net.HardwareAddr) error
	// TableLimit makes n the most addresses bridge learns, where the DUT
	// takes a limit at run time (the others were given Env.MaxEntries at
	// Setup), and says what the limit is.
	TableLimit(ctx context.Context, t *Topo, bridge string, n int) (string, error)
}

// daemonOf is a DUT whose work is a daemon's: its process, for its memory.
type daemonOf interface {
	daemon() (pid int, comm string)
}

// DaemonRSS is the daemon's memory: the resident set of the process (VmRSS), found from the
// PID the lab started, which `ip netns exec` and taskset exec into.
func DaemonRSS(d DUT) (kib uint64, what string, err error) {
	pid, what, err := DaemonPID(d)
	if err != nil {
		return 0, what, err
	}
	kib, err = ReadRSS(pid)
	return kib, what, err
}

// daemonPID is the process of a DUT's daemon, and what it is ("comm (pid
// N)"; the command alone on an error); errNoDaemon for a DUT without one.
func DaemonPID(d DUT) (pid int, what string, err error) {
	dd, ok := d.(daemonOf)
	if !ok {
		return 0, "", ErrNoDaemon
	}
	pid, comm := dd.daemon()
	if pid == 0 {
		return 0, comm, fmt.Errorf("%s is not running", comm)
	}
	pid, err = findComm(pid, comm, 3)
	if err != nil {
		return 0, comm, err
	}
	return pid, fmt.Sprintf("%s (pid %d)", comm, pid), nil
}

var ErrNoDaemon = errors.New("no daemon: the forwarding and the table are the kernel's")

// findComm is pid, or the first of its descendants (depth levels down)
// whose command is comm.
func findComm(pid int, comm string, depth int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	// The kernel cuts a command's name at 15 bytes.
	if got := strings.TrimSpace(string(b)); got == comm || len(comm) > 15 && got == comm[:15] {
		return pid, nil
	}
	if depth > 0 {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					if p, err := findComm(n, comm, depth-1); err == nil {
						return p, nil
					}
				}
			}
		}
	}
	return 0, fmt.Errorf("process %d is not %s, nor any of its children", pid, comm)
}

// readRSS is VmRSS of /proc/PID/status, in KiB.
func ReadRSS(pid int) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("process %d: no VmRSS in its status", pid)
}

// MapSize is one eBPF map of the programs on the DUT's ports.
type MapSize struct {
	Name       string `json:"name"`
	ID         uint32 `json:"id"`
	Type       string `json:"type"`
	MaxEntries uint32 `json:"max_entries"`
	// Entries is what a hash-like map holds, counted key by key; -1 for a
	// map of fixed size (an array: its size is MaxEntries, always).
	Entries int    `json:"entries"`
	Memlock uint64 `json:"memlock_bytes,omitempty"`
}

// counted says whether a map's entries come and go (and so are counted).
func counted(t ebpf.MapType) bool {
	switch t {
	case ebpf.Hash, ebpf.PerCPUHash, ebpf.LRUHash, ebpf.LRUCPUHash, ebpf.LPMTrie, ebpf.HashOfMaps, ebpf.DevMapHash, ebpf.SockHash:
		return true
	}
	return false
}

// MapSizes reads every map of the programs on the DUT's ports (XDP and tcx
// ingress), counting the entries of the hash-like ones from this process:
// a key at a time, so for tables of a few thousand entries at most.
func (r *Rig) MapSizes() ([]MapSize, error) {
	progs, _, err := r.dutPrograms()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	var out []MapSize
	seen := map[ebpf.MapID]bool{}
	for _, p := range progs {
		info, err := p.Info()
		if err != nil {
			return out, err
		}
		ids, _ := info.MapIDs()
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue // gone since: the program was replaced
				}
				return out, fmt.Errorf("open map %d: %w", id, err)
			}
			ms, err := sizeOf(m, id)
			m.Close()
			if err != nil {
				return out, err
			}
			out = append(out, ms)
		}
	}
	return out, nil
}

func sizeOf(m *ebpf.Map, id ebpf.MapID) (MapSize, error) {
	info, err := m.Info()
	if err != nil {
		return MapSize{}, fmt.Errorf("map %d: %w", id, err)
	}
	ms := MapSize{Name: info.Name, ID: uint32(id), Type: info.Type.String(), MaxEntries: info.MaxEntries, Entries: -1}
	ms.Memlock, _ = info.Memlock()
	if !counted(info.Type) {
		return ms, nil
	}
	// A deletion under the walk makes the kernel start it again: the cap
	// keeps a busy map from being walked for ever.
	ms.Entries = 0
	var key any // nil: the first key
	for n := 0; n <= 2*int(info.MaxEntries); n++ {
		next, err := m.NextKeyBytes(key)
		if errors.Is(err, ebpf.ErrKeyNotExist) || err == nil && next == nil {
			return ms, nil
		}
		if err != nil {
			return ms, fmt.Errorf("map %s (%d): next key: %w", info.Name, id, err)
		}
		ms.Entries++
		key = next
	}
	return ms, nil
}

// SendFrames sends frames out of the host's interface through one packet
// socket, in order.
func SendFrames(h *Host, frames [][]byte) error {
	return h.NS.Do(func() error {
		l, err := netlink.LinkByName(h.If)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return fmt.Errorf("packet socket in %s: %w", h.NS.Name, err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: l.Attrs().Index}
		for _, f := range frames {
			for {
				err := unix.Sendto(fd, f, 0, to)
				if err == unix.ENOBUFS || err == unix.EAGAIN {
					continue // the interface's queue is full for a moment
				}
				if err != nil {
					return fmt.Errorf("send from %s: %w", h.NS.Name, err)
				}
				break
			}
		}
		return nil
	})
}

// LearningFrames are n broadcast frames from n addresses (base plus i in
// the low 24 bits), with the lab's learning ethertype: a bridge learns
// each, the hosts' stacks drop them.
func LearningFrames(base net.HardwareAddr, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = learningFrame(MACPlus(base, i))
	}
	return out
}

// learningFrame is a broadcast frame from src with the IEEE local
// experimental ethertype, 60 bytes: bridges learn src, the sinks count it
// apart (it carries no test header).
func learningFrame(src net.HardwareAddr) []byte {
	return frame.Eth{Dst: frame.Broadcast(), Src: src, Type: 0x88b5, Payload: []byte("trestle lab: learning frame"), Pad: true}.MustBytes()
}

// MACPlus is base plus i in its low 24 bits, wrapping within them.
func MACPlus(base net.HardwareAddr, i int) net.HardwareAddr {
	m := append(net.HardwareAddr(nil), base...)
	v := (int(m[3])<<16 | int(m[4])<<8 | int(m[5])) + i
	m[3], m[4], m[5] = byte(v>>16), byte(v>>8), byte(v)
	return m
}

// trestle: its control socket, as `trestle show`, `fdb show` and `fdb add` use it.

func (d *trestleDUT) daemon() (int, string) {
	// The daemon's command is the name of the file it was started from:
	// "trestle", or a build's own name (bin=/tmp/trestle-old, a lab run
	// from a copy of the binary).
	comm := "trestle"
	if d.cur != "" {
		comm = filepath.Base(d.cur)
	}
	if d.proc == nil || d.proc.Cmd.Process == nil {
		return 0, comm
	}
	return d.proc.Cmd.Process.Pid, comm
}

func (d *trestleDUT) bridgeStatus(bridge string) (ctl.BridgeStatus, error) {
	var st ctl.Status
	if err := ctl.Call(d.sock, ctl.Request{Cmd: ctl.CmdShow}, &st); err != nil {
		return ctl.BridgeStatus{}, fmt.Errorf("trestle show: %w", err)
	}
	for _, b := range st.Bridges {
		if b.Name == bridge {
			return b, nil
		}
	}
	return ctl.BridgeStatus{}, fmt.Errorf("trestle show: no bridge %s", bridge)
}

// ReadTable: the addresses each port learned (the datapath counts them
// exactly, as it learns and as the daemon ages them out), and every entry.
func (d *trestleDUT) ReadTable(_ context.Context, _ *Topo, bridge string) (TableReading, error) {
	b, err := d.bridgeStatus(bridge)
	if err != nil {
		return TableReading{Learned: -1}, err
	}
	tr := TableReading{Entries: b.Entries}
	for _, p := range b.Ports {
		tr.Learned += p.MACs
	}
	return tr, nil
}

func (d *trestleDUT) FDBEntries(_ context.Context, _ *Topo, bridge string) (map[string]FDBEntry, error) {
	es, err := ctl.FDB(d.sock, bridge)
	if err != nil {
		return nil, fmt.Errorf("trestle fdb show %s: %w", bridge, err)
	}
	out := make(map[string]FDBEntry, len(es))
	for _, e := range es {
		out[strings.ToLower(e.MAC)] = FDBEntry{Port: e.Port, Static: e.Static}
	}
	return out, nil
}

func (d *trestleDUT) AddStatic(_ context.Context, _ *Topo, bridge, port string, mac net.HardwareAddr) error {
	if err := ctl.Call(d.sock, ctl.Request{Cmd: ctl.CmdFDBAdd, Bridge: bridge, MAC: mac.String(), Port: port}, nil); err != nil {
		return fmt.Errorf("trestle fdb add %s %s %s: %w", bridge, mac, port, err)
	}
	return nil
}

func (d *trestleDUT) TableLimit(_ context.Context, _ *Topo, bridge string, n int) (string, error) {
	b, err := d.bridgeStatus(bridge)
	if err != nil {
		return "", err
	}
	if n > 0 && b.MaxEntries != n {
		return "", fmt.Errorf("trestle: bridge %s has max_entries %d, the test asked for %d", bridge, b.MaxEntries, n)
	}
	return fmt.Sprintf("max_entries = %d (learned addresses; a new source it refuses is forwarded unlearned, counted unlearned_full; dropped as table_full on a VLAN-aware bridge)", b.MaxEntries), nil
}

// The Linux bridge: its netlink attributes IFLA_BR_FDB_N_LEARNED and
// IFLA_BR_FDB_MAX_LEARNED (Linux 6.8), and the bridge command.

// bridgeLearned reads the learned-address count and limit of a Linux
// bridge; ok is false on a kernel without them.
func bridgeLearned(ns *NS, bridge string) (n, limit uint32, ok bool, err error) {
	err = ns.Do(func() error {
		l, err := netlink.LinkByName(bridge)
		if err != nil {
			return err
		}
		req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_ACK)
		msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
		msg.Index = int32(l.Attrs().Index)
		req.AddData(msg)
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if len(m) < unix.SizeofIfInfomsg {
				continue
			}
			n, limit, ok, err = parseBridgeLearned(m[unix.SizeofIfInfomsg:])
			return err
		}
		return errors.New("no answer")
	})
	if err != nil {
		err = fmt.Errorf("read bridge %s's learned addresses (netlink): %w", bridge, err)
	}
	return n, limit, ok, err
}

// parseBridgeLearned finds the two attributes in a link message's
// attributes (IFLA_LINKINFO, its IFLA_INFO_DATA).
func parseBridgeLearned(b []byte) (n, limit uint32, ok bool, err error) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return 0, 0, false, err
	}
	for _, a := range attrs {
		if a.Attr.Type&^syscall.NLA_F_NESTED != unix.IFLA_LINKINFO {
			continue
		}
		info, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			return 0, 0, false, err
		}
		for _, i := range info {
			if i.Attr.Type&^syscall.NLA_F_NESTED != nl.IFLA_INFO_DATA {
				continue
			}
			data, err := nl.ParseRouteAttr(i.Value)
			if err != nil {
				return 0, 0, false, err
			}
			var seen int
			for _, d := range data {
				if len(d.Value) < 4 {
					continue
				}
				switch d.Attr.Type {
				case unix.IFLA_BR_FDB_N_LEARNED:
					n, seen = nl.NativeEndian().Uint32(d.Value), seen+1
				case unix.IFLA_BR_FDB_MAX_LEARNED:
					limit, seen = nl.NativeEndian().Uint32(d.Value), seen+1
				}
			}
			return n, limit, seen == 2, nil
		}
	}
	return 0, 0, false, nil
}

func (b *linuxBridge) ReadTable(_ context.Context, t *Topo, bridge string) (TableReading, error) {
	n, _, ok, err := bridgeLearned(t.DUT, bridge)
	if err != nil {
		return TableReading{Learned: -1}, err
	}
	if !ok {
		return TableReading{Learned: -1}, errors.New("this kernel does not count a bridge's learned addresses (IFLA_BR_FDB_N_LEARNED, Linux 6.8)")
	}
	return TableReading{Learned: int(n)}, nil
}

func (b *linuxBridge) FDBEntries(ctx context.Context, t *Topo, bridge string) (map[string]FDBEntry, error) {
	out, err := t.DUT.Run(ctx, "bridge", "-j", "fdb", "show", "br", bridge)
	if err != nil {
		return nil, err
	}
	return parseBridgeFDB(out, bridge)
}

// parseBridgeFDB reads `bridge -j fdb show br BRIDGE`: the bridge's entries
// (master BRIDGE), not the ports' own (self) addresses.
func parseBridgeFDB(out, bridge string) (map[string]FDBEntry, error) {
	var rows []struct {
		MAC    string   `json:"mac"`
		Ifname string   `json:"ifname"`
		Master string   `json:"master"`
		State  string   `json:"state"`
		Flags  []string `json:"flags"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return nil, fmt.Errorf("bridge -j fdb show br %s: %w", bridge, err)
	}
	m := make(map[string]FDBEntry, len(rows))
	for _, r := range rows {
		if r.Master != bridge || r.Ifname == bridge {
			continue
		}
		m[strings.ToLower(r.MAC)] = FDBEntry{Port: r.Ifname, Static: r.State == "static"}
	}
	return m, nil
}

func (b *linuxBridge) AddStatic(ctx context.Context, t *Topo, _, port string, mac net.HardwareAddr) error {
	_, err := t.DUT.Run(ctx, "bridge", "fdb", "add", mac.String(), "dev", port, "master", "static")
	return err
}

// TableLimit sets fdb_max_learned through netlink (iproute2 before 6.8
// has no word for it) and reads it back.
func (b *linuxBridge) TableLimit(_ context.Context, t *Topo, bridge string, n int) (string, error) {
	if _, _, ok, err := bridgeLearned(t.DUT, bridge); err != nil || !ok {
		if err != nil {
			return "", err
		}
		return "none: this kernel has no fdb_max_learned (Linux 6.8): the table grows with every source", nil
	}
	err := t.DUT.Do(func() error {
		l, err := netlink.LinkByName(bridge)
		if err != nil {
			return err
		}
		req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_ACK)
		msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
		msg.Index = int32(l.Attrs().Index)
		req.AddData(msg)
		info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
		info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("bridge"))
		data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
		data.AddRtAttr(unix.IFLA_BR_FDB_MAX_LEARNED, nl.Uint32Attr(uint32(n)))
		req.AddData(info)
		_, err = req.Execute(unix.NETLINK_ROUTE, 0)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("set fdb_max_learned %d on %s: %w", n, bridge, err)
	}
	_, got, _, err := bridgeLearned(t.DUT, bridge)
	if err != nil {
		return "", err
	}
	if got != uint32(n) {
		return "", fmt.Errorf("set fdb_max_learned %d on %s: it reads back %d", n, bridge, got)
	}
	return fmt.Sprintf("fdb_max_learned = %d (set through netlink; a new source beyond it is forwarded, not learned)", n), nil
}

// Open vSwitch: ovs-appctl to the lab's own ovs-vswitchd.

func (o *ovsDUT) daemon() (int, string) {
	if o.vswitchd == nil || o.vswitchd.Cmd.Process == nil {
		return 0, "ovs-vswitchd"
	}
	return o.vswitchd.Cmd.Process.Pid, "ovs-vswitchd"
}

func (o *ovsDUT) appctl(ctx context.Context, args ...string) (string, error) {
	return o.t.DUT.RunEnv(ctx, o.env(), "ovs-appctl", append([]string{"-t", filepath.Join(o.dir, "vswitchd.ctl")}, args...)...)
}

func (o *ovsDUT) ReadTable(ctx context.Context, _ *Topo, bridge string) (TableReading, error) {
	out, err := o.appctl(ctx, "fdb/stats-show", bridge)
	if err != nil {
		return TableReading{Learned: -1}, err
	}
	return parseOVSStats(out)
}

// parseOVSStats reads `ovs-appctl fdb/stats-show BRIDGE`.
func parseOVSStats(out string) (TableReading, error) {
	tr := TableReading{Learned: -1}
	var cur, static int
	var found int
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case strings.HasPrefix(k, "Current/maximum MAC entries"):
			n, _, _ := strings.Cut(v, "/")
			if c, err := strconv.Atoi(strings.TrimSpace(n)); err == nil {
				cur, found = c, found+1
			}
		case strings.HasPrefix(k, "Current static MAC entries"):
			if c, err := strconv.Atoi(v); err == nil {
				static = c
			}
		case strings.HasPrefix(k, "Total number of evicted MAC entries"):
			if c, err := strconv.ParseInt(v, 10, 64); err == nil {
				tr.Evicted = c
			}
		}
	}
	if found == 0 {
		return tr, fmt.Errorf("ovs-appctl fdb/stats-show: no table size in %q", strings.TrimSpace(out))
	}
	tr.Learned, tr.Entries = cur-static, cur
	return tr, nil
}

func (o *ovsDUT) FDBEntries(ctx context.Context, t *Topo, bridge string) (map[string]FDBEntry, error) {
	out, err := o.appctl(ctx, "fdb/show", bridge)
	if err != nil {
		return nil, err
	}
	// The table names ports by OpenFlow number, which is the bridge's own.
	names, err := o.vsctl(ctx, t, "--format=csv", "--no-headings", "--columns=ofport,name", "list", "interface")
	if err != nil {
		return nil, err
	}
	var ports []string
	for _, b := range t.Bridges {
		if b.Name == bridge {
			ports = b.Ports
		}
	}
	return parseOVSFDB(out, names, ports), nil
}

// parseOVSFDB reads `ovs-appctl fdb/show` (" port  VLAN  MAC  Age", the age
// "static" for a static entry) with `ovs-vsctl list interface`'s ofport,name
// rows to name the ports, those of ports: the bridge's.
func parseOVSFDB(out, names string, ports []string) map[string]FDBEntry {
	byNum := ovsPortNames(names, ports)
	m := map[string]FDBEntry{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] == "port" {
			continue
		}
		mac, err := net.ParseMAC(f[2])
		if err != nil {
			continue
		}
		port := f[0]
		if name, ok := byNum[port]; ok {
			port = name
		}
		m[mac.String()] = FDBEntry{Port: port, Static: f[3] == "static"}
	}
	return m
}

// ovsPortNames are the names of ports by their OpenFlow numbers, from
// `ovs-vsctl --format=csv list interface`'s ofport,name rows: those of
// ports, a bridge's (the numbers are each bridge's own).
func ovsPortNames(names string, ports []string) map[string]string {
	byNum := map[string]string{}
	for _, line := range strings.Split(names, "\n") {
		if num, name, ok := strings.Cut(strings.TrimSpace(line), ","); ok && slices.Contains(ports, strings.Trim(name, `"`)) {
			byNum[num] = strings.Trim(name, `"`)
		}
	}
	return byNum
}

func (o *ovsDUT) AddStatic(ctx context.Context, _ *Topo, bridge, port string, mac net.HardwareAddr) error {
	_, err := o.appctl(ctx, "fdb/add", bridge, port, "0", mac.String())
	return err
}

func (o *ovsDUT) TableLimit(ctx context.Context, _ *Topo, bridge string, n int) (string, error) {
	out, err := o.appctl(ctx, "fdb/stats-show", bridge)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.Contains(k, "Current/maximum") {
			_, most, _ := strings.Cut(v, "/")
			if m, err := strconv.Atoi(strings.TrimSpace(most)); err == nil {
				if n > 0 && m != n {
					return "", fmt.Errorf("Open vSwitch: bridge %s holds %d addresses, the test asked for %d", bridge, m, n)
				}
				return fmt.Sprintf("other_config:mac-table-size = %d (when full, a new source evicts an older entry: its count of evicted entries is read)", m), nil
			}
		}
	}
	return "", fmt.Errorf("ovs-appctl fdb/stats-show %s: no maximum in %q", bridge, strings.TrimSpace(out))
}

// CPUOthers is the CPU time, in clock ticks, that the machine's processes
// outside this one and its children (the DUT's daemons) have used, kernel
// threads apart: on a shared machine, what someone else's work took from
// the CPUs a measurement ran on. A process's time counts its children
// that ended (cutime and cstime, added to the parent that waited for them):
// a build's compilers start and end between two readings, and without
// them a machine busy compiling read as idle. A process that ends without
// a parent that waits (a daemon's orphans, which go to init) still takes
// its time with it, so the difference of two readings is a floor.
func CPUOthers() (uint64, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	type proc struct {
		ppid  int
		ticks uint64
	}
	procs := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		p, kernel, ok := ParseProcStat(string(b))
		if ok && !kernel {
			procs[pid] = proc{p.ppid, p.Ticks}
		}
	}
	self := os.Getpid()
	ours := func(pid int) bool {
		for n := 0; pid > 1 && n < 64; n++ {
			if pid == self {
				return true
			}
			pid = procs[pid].ppid
		}
		return false
	}
	var sum uint64
	for pid, p := range procs {
		if !ours(pid) {
			sum += p.ticks
		}
	}
	return sum, nil
}

// procStat is what cpuOthers needs of /proc/PID/stat.
type ProcStat struct {
	ppid  int
	Ticks uint64 // utime + stime + cutime + cstime
}

// parseProcStat reads a /proc/PID/stat line: the parent, the user and
// system time with its waited-for children's, and whether it is a kernel
// thread (PF_KTHREAD).
func ParseProcStat(s string) (ProcStat, bool, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ProcStat{}, false, false
	}
	f := strings.Fields(s[i+1:])
	// After the command: state(0) ppid(1) ... flags(6) ... utime(11)
	// stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return ProcStat{}, false, false
	}
	ppid, _ := strconv.Atoi(f[1])
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	cut, _ := strconv.ParseUint(f[13], 10, 64)
	cst, _ := strconv.ParseUint(f[14], 10, 64)
	return ProcStat{ppid: ppid, Ticks: ut + st + cut + cst}, flags&0x00200000 != 0, true
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times.
const ClockTicks = 100
