package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vishvananda/netns"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/netnsutil"
)

// DownResult is what `trestle down` did.
type DownResult struct {
	Instance      string   `json:"instance"`
	PinDir        string   `json:"pin_dir"`
	Detached      []string `json:"detached"`
	PeersRestored []string `json:"peers_restored"`
	Found         bool     `json:"found"`
}

// Down removes the persisted datapath of the daemon that listens (or
// listened) on socket in this network namespace: it detaches its programs,
// unpins its maps and gives the veth peers it changed their settings back.
// It refuses while that daemon runs.
func Down(socket string) (DownResult, error) {
	if err := ctl.Call(socket, ctl.Request{Cmd: ctl.CmdShow}, nil); err == nil {
		return DownResult{}, fmt.Errorf("a daemon is running on %s: stop it first (with persist it leaves the datapath forwarding, which this then removes)", socket)
	}
	inst, err := InstanceOf(socket)
	if err != nil {
		return DownResult{}, err
	}
	res := DownResult{Instance: inst.Name, PinDir: inst.PinDir}
	st := &stateDir{dir: inst.StateDir}
	var recorded stateFile
	if _, err := os.Stat(inst.StateDir); err == nil {
		res.Found = true
		if recorded, err = st.load(); err != nil {
			return res, err
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
	if err := st.remove(); err != nil {
		return res, err
	}
	return res, nil
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
