// Package netnsutil finds network namespaces and runs code inside them on a
// locked, throwaway thread, never moving a long-lived goroutine.
package netnsutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// found is where FindByID last found each id. A look reads every named
// namespace and every process's, and a daemon with a thousand veths whose
// peers share one namespace looked a thousand times (a third of its start
// with 1024 ports); a path found is now used again while it still has the
// id, as seen from the caller's namespace.
var found sync.Map // nsid -> path

// FindByID finds a namespace by its id as seen from this namespace: first
// among named namespaces (ip netns), then among those of running processes.
func FindByID(nsid int) (string, error) {
	if v, ok := found.Load(nsid); ok {
		if path := v.(string); hasID(path, nsid) {
			return path, nil
		}
		found.Delete(nsid)
	}
	path, err := findByID(nsid)
	if err == nil {
		found.Store(nsid, path)
	}
	return path, err
}

// hasID says whether the namespace at path has id nsid here.
func hasID(path string, nsid int) bool {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return false
	}
	defer h.Close()
	id, err := netlink.GetNetNsIdByFd(int(h))
	return err == nil && id == nsid
}

func findByID(nsid int) (string, error) {
	var candidates []string
	named, _ := filepath.Glob("/run/netns/*")
	candidates = append(candidates, named...)
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	candidates = append(candidates, procs...)
	seen := map[string]bool{}
	for _, path := range candidates {
		h, err := netns.GetFromPath(path)
		if err != nil {
			continue
		}
		var st, id = "", -1
		if s, err := os.Stat(path); err == nil {
			st = fmt.Sprint(s.Sys())
		}
		if !seen[st] {
			id, err = netlink.GetNetNsIdByFd(int(h))
		}
		h.Close()
		seen[st] = true
		if err == nil && id == nsid {
			return path, nil
		}
	}
	return "", errors.New("no named namespace or process namespace has it; start the daemon where it can see the peer, or use mode = \"tc\"")
}

// Do runs f in the namespace at path ("" for the current one) on a
// locked, throwaway thread state.
func Do(path string, f func() error) error {
	if path == "" {
		return f()
	}
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer target.Close()
	return DoHandle(target, f)
}

// DoHandle runs f in the namespace that h holds open. A handle names one
// namespace for as long as it is open, whatever happens to the path or the
// process it was opened from.
func DoHandle(h netns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is not unlocked: if restoring the namespace fails, it
		// dies with the goroutine instead of serving others in the wrong one.
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", h, err)
			return
		}
		ferr := f()
		if err := netns.Set(orig); err == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// Inode identifies a namespace: its device and inode numbers.
func Inode(h netns.NsHandle) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(h), &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// PeerMAC returns the hardware address of a veth's peer, wherever it lives.
func PeerMAC(l netlink.Link) (net.HardwareAddr, error) {
	v, ok := l.(*netlink.Veth)
	if !ok {
		return nil, fmt.Errorf("%q is a %s, not a veth", l.Attrs().Name, l.Type())
	}
	idx := l.Attrs().ParentIndex
	if idx == 0 {
		var err error
		if idx, err = netlink.VethPeerIndex(v); err != nil {
			return nil, err
		}
	}
	path := ""
	if nsid := l.Attrs().NetNsID; nsid >= 0 {
		p, err := FindByID(nsid)
		if err != nil {
			return nil, fmt.Errorf("peer of %q: %w", l.Attrs().Name, err)
		}
		path = p
	}
	var mac net.HardwareAddr
	err := Do(path, func() error {
		peer, err := netlink.LinkByIndex(idx)
		if err != nil {
			return err
		}
		mac = peer.Attrs().HardwareAddr
		return nil
	})
	return mac, err
}
