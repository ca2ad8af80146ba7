package instance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/link"
)

// PinRoot is the directory of trestle's persisted datapaths, one directory
// each (named by Name), and StateRoot the directory of what each daemon must
// remember on disk: the veth peers it changed and how they were (tmpfs: it
// goes at reboot, as the pinned datapath does).
const (
	PinRoot   = BPFFS + "/trestle"
	StateRoot = "/run/trestle"
)

// LinksDir is the subdirectory of a pin directory that holds the pinned link
// of each attached port, one file each (LinkFile).
const LinksDir = "links"

// Name names the directories of one daemon: its network namespace (by
// cookie, which the kernel never reuses while it runs) and its control
// socket, so that two daemons in two namespaces, or two in one namespace
// with two sockets, never share one, and a daemon restarted in the same
// namespace with the same socket finds its own.
func Name(netnsCookie uint64, socket string) string {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(socket); i++ {
		h ^= uint32(socket[i])
		h *= 16777619
	}
	return fmt.Sprintf("ns%d-%08x", netnsCookie, h)
}

// LinkFile names a pinned link: port-<ifindex>-<mode>, the mode being the
// attach mode's name ("xdp" or "tc").
func LinkFile(ifindex int, mode string) string { return fmt.Sprintf("port-%d-%s", ifindex, mode) }

// attachModes are the modes a link is pinned with (internal/mode's XDP and
// TC, named here so that this package imports nothing of trestle's).
var attachModes = map[string]bool{"xdp": true, "tc": true}

// ParseLinkFile reads a name LinkFile made; ok is false for any other.
func ParseLinkFile(name string) (ifindex int, mode string, ok bool) {
	rest, ok := strings.CutPrefix(name, "port-")
	if !ok {
		return 0, "", false
	}
	num, mode, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, "", false
	}
	idx, err := strconv.Atoi(num)
	if err != nil || !attachModes[mode] {
		return 0, "", false
	}
	return idx, mode, true
}

// PinnedLink is a link pinned in a pin directory that still holds its
// interface.
type PinnedLink struct {
	Ifindex int
	Mode    string
	Path    string // the pin
	Link    link.Link
}

// String says which program on which interface, as `trestle down` reports it.
func (l PinnedLink) String() string { return fmt.Sprintf("%s on ifindex %d", l.Mode, l.Ifindex) }

// OpenLinks opens the pinned links of a pin directory (dir/links), in the
// order of their interfaces. A link whose interface was deleted is detached
// by the kernel and reports no interface: its pin is removed and it is not
// returned. Files not named by LinkFile are left alone. A directory that
// does not exist holds no links.
func OpenLinks(dir string) ([]PinnedLink, error) {
	dir = filepath.Join(dir, LinksDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pinned links: %w", err)
	}
	var out []PinnedLink
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		idx, m, ok := ParseLinkFile(e.Name())
		if !ok {
			continue
		}
		l, err := link.LoadPinnedLink(path, nil)
		if err != nil {
			for _, o := range out {
				o.Link.Close()
			}
			return nil, fmt.Errorf("open pinned link %s: %w", path, err)
		}
		if info, err := l.Info(); err != nil || linkIfindex(info) != idx {
			l.Close()
			_ = os.Remove(path)
			continue
		}
		out = append(out, PinnedLink{Ifindex: idx, Mode: m, Path: path, Link: l})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ifindex < out[j].Ifindex })
	return out, nil
}

func linkIfindex(info *link.Info) int {
	if x := info.XDP(); x != nil {
		return int(x.Ifindex)
	}
	if t := info.TCX(); t != nil {
		return int(t.Ifindex)
	}
	return 0
}

// Holding says how many of a pin directory's links still hold an
// interface (a link whose interface is gone, with its namespace, holds
// none). It closes what it opens and removes nothing but dead link pins.
func Holding(dir string) (int, error) {
	links, err := OpenLinks(dir)
	for _, l := range links {
		_ = l.Link.Close()
	}
	return len(links), err
}

// Down removes a persisted datapath: every pinned link (which detaches its
// program), then every pinned map, then the directory. It reports what it
// detached. A directory that does not exist is not an error.
func Down(dir string) ([]string, error) {
	var did []string
	links, err := OpenLinks(dir)
	if err != nil {
		return nil, err
	}
	for i, l := range links {
		if err := detach(l); err != nil {
			for _, rest := range links[i+1:] {
				rest.Link.Close()
			}
			return did, err
		}
		did = append(did, "detached "+l.String())
	}
	// Pins of dead links were removed by OpenLinks; anything else left in
	// links/ is not ours to judge, but it is in our directory.
	for _, sub := range []string{filepath.Join(dir, LinksDir), dir} {
		ents, err := os.ReadDir(sub)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return did, err
		}
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			if err := os.Remove(filepath.Join(sub, e.Name())); err != nil {
				return did, fmt.Errorf("unpin %s: %w", e.Name(), err)
			}
		}
		if err := os.Remove(sub); err != nil && !errors.Is(err, os.ErrNotExist) {
			return did, fmt.Errorf("remove %s: %w", sub, err)
		}
	}
	return did, nil
}

// detach unpins a link and closes it, which takes its program off the
// interface.
func detach(l PinnedLink) error {
	var errs []error
	if err := l.Link.Unpin(); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("unpin %s: %w", l.Path, err))
	}
	if err := l.Link.Close(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("detach %s: %w", l, errors.Join(errs...))
	}
	return nil
}

// DownNetns removes the persisted datapaths and the state directories of
// the daemons of a network namespace that is gone, named by its cookie
// (Name), and returns their pin directories. Unless deleted says the
// caller deleted the namespace itself (whose interfaces then go a moment
// later), a datapath whose links still hold an interface is left: its
// namespace lives on (one kept by a bind mount outside /run/netns is not
// found by a walk of /run/netns and /proc).
func DownNetns(cookie uint64, deleted bool) ([]string, error) {
	if cookie == 0 {
		return nil, nil
	}
	prefix := fmt.Sprintf("ns%d-", cookie)
	names := map[string]bool{}
	for _, root := range []string{PinRoot, StateRoot} {
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				names[e.Name()] = true
			}
		}
	}
	var removed []string
	for name := range names {
		pins := filepath.Join(PinRoot, name)
		if n, err := Holding(pins); !deleted && (err != nil || n > 0) {
			continue
		}
		if _, err := Down(pins); err != nil {
			return removed, fmt.Errorf("instance %s: %w", name, err)
		}
		if err := os.RemoveAll(filepath.Join(StateRoot, name)); err != nil {
			return removed, fmt.Errorf("instance %s: %w", name, err)
		}
		removed = append(removed, pins)
	}
	return removed, nil
}

// Cookies are the network namespaces (by cookie) that have a pinned
// datapath or a state directory.
func Cookies() map[uint64]bool {
	out := map[uint64]bool{}
	for _, root := range []string{PinRoot, StateRoot} {
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			var cookie uint64
			var hash string
			if n, _ := fmt.Sscanf(e.Name(), "ns%d-%s", &cookie, &hash); e.IsDir() && n == 2 {
				out[cookie] = true
			}
		}
	}
	return out
}
