// Package lab is `trestle lab`: it builds test topologies out of network
// namespaces and veth pairs, puts a device under test (DUT) between hosts,
// drives it with trestle's generator and sink, iperf3 and the methods of RFC
// 2544 and RFC 2889, and records every trial.
//
// Contract:
//
//   - Everything a run creates lives in namespaces it created itself, named
//     with one prefix that holds the PID of the process (Prefix). It never
//     creates, moves or changes a link in the namespace it started in, and
//     sends traffic only between its own namespaces.
//   - Net.Close stops every process the run started (by its PID, SIGTERM then
//     SIGKILL) and deletes every namespace, and any datapath a trestle daemon
//     with persist pinned in one (under /sys/fs/bpf/trestle, named after the
//     namespace), whatever state the run is in; it is safe to call twice. Namespaces of runs that were killed before they
//     could clean up are found by their prefix and removed by Sweep, which
//     only touches prefixes whose process is gone.
package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/safchain/ethtool"

	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/netnsutil"
)

const netnsDir = netnsutil.NetnsDir

// prefixRE matches the namespaces of lab runs: "tl" PID [tag] "-" name,
// where a tag (NewNet) starts with a letter so that it cannot run into the PID.
var prefixRE = regexp.MustCompile(`^tl([0-9]+)(?:[a-z][a-z0-9]*)?-`)

// Net is the set of namespaces and processes of one run.
type Net struct {
	Prefix string

	mu    sync.Mutex
	nss   []*NS
	procs []*Proc
	// closers are what the set holds open in its namespaces (the tc
	// links of a host's VLAN tagging): closed after the processes stop.
	closers []io.Closer
	closed  bool
}

// hold makes c part of the set: Close closes it before it deletes the
// namespaces.
func (n *Net) hold(c io.Closer) {
	n.mu.Lock()
	n.closers = append(n.closers, c)
	n.mu.Unlock()
}

// NewNet starts an empty set whose namespaces are named Prefix+"-"+name.
// tag tells several sets of one process apart ("" for the first).
func NewNet(tag string) *Net {
	return &Net{Prefix: fmt.Sprintf("tl%d%s", os.Getpid(), tag)}
}

// NS is a network namespace of a Net, known to `ip netns`: the shared
// harness's (netnsutil.NS: Do, Sysctl, LinkUp, MAC, AddrAdd, ...), which
// the tests use too.
type NS struct {
	netnsutil.NS
	net *Net
	// cookie is the kernel's cookie of the namespace: what a trestle
	// daemon with persist names its pinned datapath after (Close removes
	// any such datapath left behind).
	cookie uint64
}

// NS creates the namespace Prefix-name, brings up its loopback, turns IPv6
// off (its router and listener solicitations would be frames no test sent)
// and netfilter on bridged frames off (new namespaces start with it on, which
// costs the Linux bridge a third of its speed: a fair baseline has it off).
func (n *Net) NS(name string) (*NS, error) {
	full := n.Prefix + "-" + name
	made, err := netnsutil.Add(full)
	if err != nil {
		return nil, err
	}
	ns := &NS{NS: *made, net: n}
	n.mu.Lock()
	n.nss = append(n.nss, ns)
	n.mu.Unlock()
	if err := ns.Do(func() (err error) { ns.cookie, err = instance.NetnsCookie(); return err }); err != nil {
		return nil, fmt.Errorf("namespace %s: %w", full, err)
	}
	if err := ns.NoIPv6(); err != nil {
		return nil, err
	}
	return ns, nil
}

// BridgeNetfilter sets net.bridge.bridge-nf-call-{ip,ip6,arp}tables, if the
// br_netfilter module is loaded (the keys exist only then).
func (ns *NS) BridgeNetfilter(on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	for _, k := range []string{"iptables", "ip6tables", "arptables"} {
		key := "net/bridge/bridge-nf-call-" + k
		if _, err := os.Stat(filepath.Join("/proc/sys", key)); err != nil {
			continue
		}
		if err := ns.Sysctl(key, v); err != nil {
			return err
		}
	}
	return nil
}

// Run runs a command inside the namespace and returns its combined output;
// the error holds the output.
func (ns *NS) Run(ctx context.Context, name string, args ...string) (string, error) {
	return ns.RunEnv(ctx, nil, name, args...)
}

// RunEnv is Run with variables added to the environment.
func (ns *NS) RunEnv(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := ns.Command(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s (in %s): %w: %s", name, strings.Join(args, " "), ns.Name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Proc is a long-running process a run started: the one kind the tests
// and the lab share (netnsutil.Proc). The run's Net stops it on Close.
type Proc = netnsutil.Proc

// Start starts a long-running command inside the namespace. Close stops it.
func (ns *NS) Start(name string, args ...string) (*Proc, error) {
	return ns.StartEnv(nil, name, args...)
}

// StartEnv is Start with variables added to the environment.
func (ns *NS) StartEnv(env []string, name string, args ...string) (*Proc, error) {
	cmd := ns.Command(context.Background(), name, args...)
	cmd.Env = append(os.Environ(), env...)
	return ns.start(name, cmd)
}

// StartNetOnly is Start with only the network namespace joined (nsenter
// --net): the command keeps the lab's mount namespace. `ip netns exec`
// mounts a /sys of its own, which hides the host's BPF filesystem, and a
// trestle daemon with persist pins its datapath there.
func (ns *NS) StartNetOnly(name string, args ...string) (*Proc, error) {
	return ns.start(name, ns.NetOnly(context.Background(), name, args...))
}

// RunNetOnly is Run with only the network namespace joined (see
// StartNetOnly).
func (ns *NS) RunNetOnly(ctx context.Context, name string, args ...string) (string, error) {
	out, err := ns.NetOnly(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s (in %s, network namespace only): %w: %s", name, strings.Join(args, " "), ns.Name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func (ns *NS) start(name string, cmd *exec.Cmd) (*Proc, error) {
	// If this process dies without cleaning up, its children go too
	// (netnsutil.Start).
	p, err := netnsutil.StartProc(name, cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, ns.Name, err)
	}
	ns.net.mu.Lock()
	ns.net.procs = append(ns.net.procs, p)
	ns.net.mu.Unlock()
	return p, nil
}

// VethOpts shapes a veth pair (netnsutil.VethOpts). The lab's have one
// queue each unless Queues says more: the kernel's default is one per CPU,
// a sender's CPU then picks the queue, and a DUT that polls queue 0 only,
// Open vSwitch's AF_XDP port, misses what the other CPUs send.
type VethOpts = netnsutil.VethOpts

// Veth creates a veth pair, a in na and b in nb, and sets both up
// (netnsutil.Veth: made inside na with its peer placed directly in nb, so
// it never exists in the caller's namespace).
func (n *Net) Veth(na *NS, a string, nb *NS, b string, o VethOpts) error {
	o.Queues = max(o.Queues, 1)
	return netnsutil.Veth(&na.NS, a, &nb.NS, b, o)
}

// Counters are an interface's packet counters.
type Counters struct{ RxPackets, TxPackets, RxDropped, TxDropped uint64 }

// Counters reads an interface's counters.
func (ns *NS) Counters(name string) (Counters, error) {
	var c Counters
	l, err := ns.Link(name)
	if err != nil {
		return c, err
	}
	if s := l.Attrs().Statistics; s != nil {
		c = Counters{s.RxPackets, s.TxPackets, s.RxDropped, s.TxDropped}
	}
	return c, nil
}

// Features sets ethtool features ("rx-gro", "tx-checksum-ip-generic", ...)
// of an interface of the namespace.
func (ns *NS) Features(name string, want map[string]bool) error {
	return ns.Do(func() error {
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		if err := et.Change(name, want); err != nil {
			return fmt.Errorf("ethtool %s in %s: %v: %w", name, ns.Name, want, err)
		}
		return nil
	})
}

// FeatureState reads the named ethtool features of an interface.
func (ns *NS) FeatureState(name string, keys ...string) (map[string]bool, error) {
	out := map[string]bool{}
	err := ns.Do(func() error {
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		all, err := et.Features(name)
		if err != nil {
			return fmt.Errorf("ethtool %s in %s: %w", name, ns.Name, err)
		}
		for _, k := range keys {
			if v, ok := all[k]; ok {
				out[k] = v
			}
		}
		return nil
	})
	return out, err
}

// ThreadNAPI switches an interface's NAPI instances to kernel threads and
// pins those threads to cpu; it returns the threads' names. sysfs shows a
// namespace's devices only to a mount made inside it, so the switch goes
// through `ip netns exec`; the new threads are told apart from others by
// their names, which start with "napi/" and the interface name, and by not
// having existed before.
func (ns *NS) ThreadNAPI(ctx context.Context, name string, cpu int) ([]string, error) {
	before := napiThreads()
	if _, err := ns.Run(ctx, "sh", "-c", "echo 1 > /sys/class/net/"+name+"/threaded"); err != nil {
		return nil, fmt.Errorf("threaded NAPI on %s: %w", name, err)
	}
	var names []string
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for pid, comm := range napiThreads() {
			if _, old := before[pid]; old || !strings.HasPrefix(comm, "napi/"+name+"-") {
				continue
			}
			if err := pin(pid, cpu); err != nil {
				return nil, fmt.Errorf("pin %s (pid %d) to CPU %d: %w", comm, pid, cpu, err)
			}
			names = append(names, comm)
		}
		if len(names) > 0 {
			sort.Strings(names)
			return names, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("threaded NAPI on %s: no napi/%s-* thread appeared (does it have NAPI? a veth needs GRO or XDP)", name, name)
}

func napiThreads() map[int]string {
	out := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !bytes.HasPrefix(b, []byte("napi/")) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(d, "/")[2])
		out[pid] = strings.TrimSpace(string(b))
	}
	return out
}

func pin(pid, cpu int) error {
	out, err := exec.Command("taskset", "-pc", strconv.Itoa(cpu), strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Namespaces lists the names of the namespaces of this set.
func (n *Net) Namespaces() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, ns := range n.nss {
		out = append(out, ns.Name)
	}
	return out
}

// EnsureBPFFS mounts the BPF filesystem at /sys/fs/bpf if it is not there
// (instance.MountBPFFS), and reports whether it did. The lab runs in the
// host's mount namespace, so the mount is the host's, where the daemons it
// starts with StartNetOnly see it.
func EnsureBPFFS() (bool, error) { return instance.MountBPFFS() }

// Close stops the set's processes, newest first, closes what it holds
// (hold), and deletes its namespaces, which removes every link in them. It returns every error, and
// goes on after one.
func (n *Net) Close() error {
	n.mu.Lock()
	procs, nss, closers := n.procs, n.nss, n.closers
	n.procs, n.nss, n.closers = nil, nil, nil
	n.closed = true
	n.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		_ = procs[i].Stop()
	}
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(nss) - 1; i >= 0; i-- {
		if err := nss[i].Delete(); err != nil {
			errs = append(errs, err)
		}
		// A DUT's teardown removes its persisted datapath (trestle down);
		// this is for one that could not, or never got to.
		if _, err := sweepPins(nss[i].cookie); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", nss[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

// sweepPins removes what trestle daemons with persist left of a namespace
// that is gone: their pinned datapaths (its links went with its
// interfaces, its maps stay pinned until removed) and their state
// directories (instance.DownNetns, which `trestle down` uses too). It
// returns the pin directories it removed.
func sweepPins(cookie uint64) ([]string, error) { return instance.DownNetns(cookie, true) }

// Sweep deletes the namespaces of lab runs whose process no longer exists:
// what a run killed with SIGKILL left behind, with any datapath a trestle
// daemon with persist pinned in them. It returns the namespaces' names and
// the pin and state directories it removed.
func Sweep() ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var gone []string
	var errs []error
	for _, e := range ents {
		m := prefixRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue // a live run's
		}
		removed, err := netnsutil.RemoveGone(e.Name())
		gone = append(gone, removed...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return gone, errors.Join(errs...)
}

// NamespacesOf lists the namespaces under /run/netns whose names start
// with prefix: a test's count of its runs' namespaces, before and after.
// A prefix that ends in a PID's digit is that process's alone: tl12 is
// not tl123's.
func NamespacesOf(prefix string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if ok && !(prefix != "" && isDigit(prefix[len(prefix)-1]) && rest != "" && isDigit(rest[0])) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
