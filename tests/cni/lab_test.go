package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// lab is a switch namespace running the daemon with the bridges of the
// test; the plugin and cnitool run in that namespace, as on a node, and
// each container is a namespace of its own.
type lab struct {
	*harness.Lab
	netdir string // NETCONFPATH: a .conflist per network
	ipam   string // host-local's dataDir
}

// labs numbers the labs of this process, for their sockets' names.
var labs atomic.Int32

// newLab starts the daemon with bridges (TOML tables after [daemon]).
func newLab(t *testing.T, bridges string) *lab {
	l := prepareLab(t)
	l.WriteConfig(fmt.Sprintf("[daemon]\nsocket = %q\n\n%s", l.Sock, bridges))
	l.Start()
	return l
}

// prepareLab is newLab without its daemon. The daemon's socket is under
// its run directory, /run/trestle/, where the plugin takes a socket a
// network names (any other it refuses unless the node lists it).
func prepareLab(t *testing.T) *lab {
	l := &lab{Lab: harness.NewLab(t, 0)}
	l.Sock = fmt.Sprintf("/run/trestle/test-%s-%d.sock", testutil.Prefix(), labs.Add(1))
	t.Cleanup(func() { _ = os.Remove(l.Sock) })
	if _, err := os.Stat(filepath.Join(toolsDir, "cnitool")); err != nil {
		t.Fatalf("cnitool is not in %s: run scripts/deps.sh tools (make test does): %v", toolsDir, err)
	}
	l.netdir = filepath.Join(l.Dir, "net.d")
	l.ipam = filepath.Join(l.Dir, "ipam")
	if err := os.MkdirAll(l.netdir, 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

// hostLocal is an ipam section: host-local over ranges (one range set a
// family), its state in the lab.
func (l *lab) hostLocal(subnets ...string) map[string]any {
	var ranges [][]map[string]any
	for _, s := range subnets {
		ranges = append(ranges, []map[string]any{{"subnet": s}})
	}
	return map[string]any{"type": "host-local", "dataDir": l.ipam, "ranges": ranges}
}

// network writes a network of the trestle plugin with the keys given
// (bridge and socket are the lab's unless given), after the plugins
// before (a chain), and returns its name.
func (l *lab) network(name string, keys map[string]any, before ...map[string]any) string {
	l.T.Helper()
	return l.networkOf("1.1.0", name, keys, before...)
}

// networkOf is network in another version of the spec.
func (l *lab) networkOf(version, name string, keys map[string]any, before ...map[string]any) string {
	l.T.Helper()
	p := map[string]any{"type": "trestle", "socket": l.Sock}
	for k, v := range keys {
		p[k] = v
	}
	plugins := append(append([]map[string]any{}, before...), p)
	b, err := json.MarshalIndent(map[string]any{"cniVersion": version, "name": name, "plugins": plugins}, "", "  ")
	if err != nil {
		l.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.netdir, name+".conflist"), b, 0o644); err != nil {
		l.T.Fatal(err)
	}
	return name
}

// cnitool runs cnitool VERB NETWORK NETNS in the switch namespace, with
// env added to the environment (CNI_ARGS=..., CAP_ARGS=..., CNI_IFNAME=...).
func (l *lab) cnitool(verb, network string, c *testutil.NS, env ...string) (string, error) {
	cmd := exec.Command("nsenter", "--net="+l.SW.Path, "--", filepath.Join(toolsDir, "cnitool"), verb, network, c.Path)
	cmd.Env = append(os.Environ(), "CNI_PATH="+pluginDir+":"+toolsDir, "NETCONFPATH="+l.netdir)
	cmd.Env = append(cmd.Env, env...)
	if verb == "add" {
		// libcni's cache of the result (a DEL removes it; a test that
		// fails before its DEL must not leave it).
		ifname := "eth0"
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "CNI_IFNAME="); ok {
				ifname = v
			}
		}
		l.T.Cleanup(func() {
			_ = os.Remove(filepath.Join("/var/lib/cni/results", network+"-"+containerID(c.Path)+"-"+ifname))
		})
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("cnitool %s %s %s: %w: %s", verb, network, c.Name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// add runs cnitool add and returns the result.
func (l *lab) add(network string, c *testutil.NS, env ...string) *current.Result {
	l.T.Helper()
	out, err := l.cnitool("add", network, c, env...)
	if err != nil {
		l.T.Fatal(err)
	}
	var r current.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		l.T.Fatalf("cnitool add: %v\n%s", err, out)
	}
	return &r
}

func (l *lab) must(verb, network string, c *testutil.NS, env ...string) {
	l.T.Helper()
	if _, err := l.cnitool(verb, network, c, env...); err != nil {
		l.T.Fatal(err)
	}
}

// plugin runs the plugin itself in the switch namespace, as a runtime
// does: CNI_COMMAND and the other variables in env, stdin the network's
// plugin configuration. It returns stdout and the spec's error, if any.
func (l *lab) plugin(stdin map[string]any, env ...string) (string, *types.Error) {
	l.T.Helper()
	conf := map[string]any{"cniVersion": "1.1.0", "name": "pods", "type": "trestle", "socket": l.Sock}
	for k, v := range stdin {
		conf[k] = v
	}
	b, err := json.Marshal(conf)
	if err != nil {
		l.T.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net="+l.SW.Path, "--", filepath.Join(pluginDir, "trestle"))
	cmd.Env = append(os.Environ(), "CNI_PATH="+pluginDir+":"+toolsDir)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = bytes.NewReader(b)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		var e types.Error
		if jerr := json.Unmarshal(out.Bytes(), &e); jerr != nil || e.Code == 0 {
			l.T.Fatalf("plugin %v: %v, and stdout is not the spec's error: %q", env, err, out.String())
		}
		return out.String(), &e
	}
	return out.String(), nil
}

// ports lists the daemon's ports (trestle port list --json).
func (l *lab) ports() []ctl.PortEntry {
	var ps []ctl.PortEntry
	l.CLIJSON(&ps, "port", "list")
	return ps
}

// port finds the run-time port of an owner.
func (l *lab) port(owner string) (ctl.PortEntry, bool) {
	for _, p := range l.ports() {
		if p.Owner == owner {
			return p, true
		}
	}
	return ctl.PortEntry{}, false
}

// owner is the plugin's owner of an attachment made by cnitool in c
// (cnitool's container id: "cnitool-" and the hex of the first 10 bytes
// of a SHA-512 of the netns path).
func owner(network string, r *current.Result) string {
	for _, i := range r.Interfaces {
		if i.Sandbox != "" {
			return network + " " + containerID(i.Sandbox) + " " + i.Name
		}
	}
	return ""
}

// links lists the interface names of a namespace.
func links(t *testing.T, n *testutil.NS) []string {
	t.Helper()
	out := n.MustExec(t, "ip", "-o", "link", "show")
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			names = append(names, name)
		}
	}
	return names
}

// hostVeths are the switch namespace's interfaces the plugin made (its
// host ends are "tr" and 13 hex digits).
func hostVeths(t *testing.T, sw *testutil.NS) []string {
	var out []string
	for _, n := range links(t, sw) {
		if len(n) == 15 && strings.HasPrefix(n, "tr") {
			out = append(out, n)
		}
	}
	return out
}

// addrs is the addresses of an interface in a namespace, "10.1.0.2/24".
func addrs(t *testing.T, n *testutil.NS, ifname string) []string {
	t.Helper()
	var out []string
	var as []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			Prefixlen int    `json:"prefixlen"`
			Scope     string `json:"scope"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(n.MustExec(t, "ip", "-j", "addr", "show", "dev", ifname)), &as); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		for _, ai := range a.AddrInfo {
			if ai.Scope == "global" {
				out = append(out, fmt.Sprintf("%s/%d", ai.Local, ai.Prefixlen))
			}
		}
	}
	return out
}

// ips are a result's addresses without their prefix length.
func ips(r *current.Result) []string {
	var out []string
	for _, c := range r.IPs {
		out = append(out, c.Address.IP.String())
	}
	return out
}

func mustResult(t *testing.T, out string) *current.Result {
	t.Helper()
	var r current.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("result: %v\n%s", err, out)
	}
	return &r
}

// openTAP makes a TAP in the namespace and holds it open (so that it has
// a carrier, as a VM's QEMU holds its TAP), up; the test reads and writes
// its frames through the file, closed at the end.
func openTAP(t *testing.T, n *testutil.NS, name string) *os.File {
	t.Helper()
	var f *os.File
	err := n.Do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", name, err)
		}
		f = os.NewFile(uintptr(fd), name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	n.MustExec(t, "ip", "link", "set", name, "up")
	return f
}
