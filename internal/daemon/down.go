package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/trestle/trestle/internal/clsact"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/netnsutil"
	"github.com/trestle/trestle/internal/overlay"
)

// DownResult is what `trestle down` did.
type DownResult struct {
	Instance      string           `json:"instance"`
	PinDir        string           `json:"pin_dir"`
	Detached      ctl.List[string] `json:"detached"`
	PeersRestored ctl.List[string] `json:"peers_restored"`
	// VNIsRemoved: the overlay VNIs whose kernel objects it removed
	// (docs/overlay.md), which withdraws their routes.
	VNIsRemoved ctl.List[uint32] `json:"vnis_removed"`
	Found       bool             `json:"found"`
	// Unreadable: records of the state directory that could not be read
	// (a power cut on a /run that is no tmpfs may leave one empty: they
	// are not synced), and what was not undone for it.
	Unreadable ctl.List[string] `json:"unreadable"`
}

// Down removes the persisted datapath of the daemon that listens (or
// listened) on socket in this network namespace: it detaches its programs,
// unpins its maps and gives the veth peers it changed their settings back.
// It refuses while a daemon holds the socket, whether it answers or not (a
// hung daemon still has its datapath), unless force.
func Down(socket string, force bool) (DownResult, error) {
	inst, err := InstanceOf(socket)
	if err != nil {
		return DownResult{}, err
	}
	if held, answers := socketHeld(socket); held && !force {
		what := "is running"
		if !answers {
			what = "holds it but did not answer in 2 s (hung?)"
		}
		return DownResult{Instance: inst.Name, PinDir: inst.PinDir}, fmt.Errorf("a daemon %s on %s: stop it first (with persist it leaves the datapath forwarding, which this then removes); --force takes its datapath down under it: detaches its programs, removes %s and restores its veth peers", what, socket, inst.PinDir)
	}
	res := DownResult{Instance: inst.Name, PinDir: inst.PinDir}
	st := &stateDir{dir: inst.StateDir}
	var recorded stateFile
	if _, err := os.Stat(inst.StateDir); err == nil {
		res.Found = true
		if recorded, err = st.load(); err != nil {
			res.Unreadable = append(res.Unreadable, fmt.Sprintf("%v: its veth peers' settings and overlay VNIs are left as they are", err))
		}
	}
	// The programs go first, then the peers they needed.
	if bpffsErr := datapath.CheckBPFFS(); bpffsErr == nil {
		if _, err := os.Stat(inst.PinDir); err == nil {
			res.Found = true
		}
		did, err := instance.Down(inst.PinDir)
		res.Detached = did
		if err != nil {
			return res, err
		}
	} else if recorded.Persist {
		return res, fmt.Errorf("the daemon pinned its datapath, and %w", bpffsErr)
	}
	sys := netlinkSystem{}
	if res.Found {
		did, err := downFilters(st, sys, clsact.PlaceOf(inst.Name), &res)
		res.Detached = append(res.Detached, did...)
		if err != nil {
			return res, err
		}
	}
	for _, r := range recorded.Peers {
		peer, err := sys.FindPeer(r.Port, r.Peer.Netns)
		if err != nil {
			continue // gone with its veth
		}
		f := &peerFix{peer: peer, orig: r.Original}
		err = f.restore()
		peer.Close()
		if err != nil {
			return res, err
		}
		res.PeersRestored = append(res.PeersRestored, peer.String())
	}
	// The overlay's objects last: their routes are withdrawn once
	// nothing forwards to them.
	for _, vni := range recorded.VNIs {
		if err := (overlay.Netlink{}).Remove(vni); err != nil {
			return res, fmt.Errorf("overlay VNI %d: %w", vni, err)
		}
		res.VNIsRemoved = append(res.VNIsRemoved, vni)
	}
	if err := st.remove(); err != nil {
		return res, err
	}
	return res, nil
}

// downFilters removes the tc filters (datapath.HookFilter) of the run-time
// ports a daemon recorded, which it attached with them; a filter is not
// pinned, and stays after a daemon with persist, or one killed, until it
// is removed. An interface that is not the one recorded is left alone.
func downFilters(st *stateDir, sys System, pl clsact.Place, res *DownResult) ([]string, error) {
	rf, err := st.loadRun()
	if err != nil {
		res.Unreadable = append(res.Unreadable, fmt.Sprintf("%v: the tc filters of its run-time ports are left (tc filter del dev IF ingress pref %d handle 0x%x bpf)", err, clsact.Prio, pl.Handle))
		return nil, nil
	}
	var did []string
	for _, rp := range rf.Ports {
		if rp == nil {
			continue
		}
		l, err := sys.LinkByName(rp.Interface)
		if err != nil || l.Index != rp.Ifindex {
			continue
		}
		_, ok, err := clsact.Program(l.Index, pl)
		if errors.Is(err, clsact.ErrGone) || err == nil && !ok {
			continue
		}
		if err == nil {
			err = clsact.Detach(l.Index, pl, true)
		}
		if err != nil {
			return did, fmt.Errorf("run-time port %s: %w", rp.Interface, err)
		}
		did = append(did, fmt.Sprintf("detached tc filter on ifindex %d", l.Index))
	}
	return did, nil
}

// DownStale removes the persisted datapaths whose network namespace no
// longer exists (their interfaces went with it, so they forward nothing;
// their maps would stay pinned until reboot), and the state directories of
// daemons of such namespaces. It returns the pin directories it removed.
func DownStale() ([]string, error) {
	live, err := liveNetnsCookies()
	if err != nil {
		return nil, err
	}
	var removed []string
	for cookie := range instance.Cookies() {
		if live[cookie] {
			continue
		}
		gone, err := instance.DownNetns(cookie, false)
		removed = append(removed, gone...)
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// liveNetnsCookies are the cookies of every network namespace reachable by
// name (ip netns) or through a process.
func liveNetnsCookies() (map[uint64]bool, error) {
	cookies := map[uint64]bool{}
	own, err := instance.NetnsCookie()
	if err != nil {
		return nil, err
	}
	cookies[own] = true
	named, _ := filepath.Glob("/run/netns/*")
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	seen := map[string]bool{}
	for _, path := range append(named, procs...) {
		h, err := netns.GetFromPath(path)
		if err != nil {
			continue
		}
		id, err := netnsutil.Inode(h)
		if err == nil && !seen[id] {
			seen[id] = true
			_ = netnsutil.DoHandle(h, func() error {
				c, err := instance.NetnsCookie()
				if err == nil {
					cookies[c] = true
				}
				return err
			})
		}
		h.Close()
	}
	return cookies, nil
}

// socketHeld says whether a process listens on the control socket (a
// connection is accepted into its backlog even when nothing reads it), and
// whether it answers a request within 2 s. A socket file with no listener
// (a daemon killed with -9) refuses the connection, and a missing one is
// not there: not held. Any other failure to connect is held: a hung
// daemon whose backlog is full answers EAGAIN (clients that gave up on it
// leave their connections queued), and its datapath is no less live.
func socketHeld(socket string) (held, answers bool) {
	c, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist), false
	}
	c.Close()
	return true, ctl.CallWithin(socket, ctl.Request{Cmd: ctl.CmdShow}, nil, 2*time.Second) == nil
}
