package datapath

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/mode"
)

// BPFFS is where the BPF filesystem is mounted, and PinRoot the directory
// of trestle's persisted datapaths, one directory each (see InstanceDir).
const (
	BPFFS   = "/sys/fs/bpf"
	PinRoot = BPFFS + "/trestle"
)

// A pin directory holds:
//
//	layouts                 the layout of every map pinned here, by hash
//	<map>-<layout hash>     each map of the switch (".bss" as "bss")
//	links/port-<ifindex>-<mode>   the link of each attached port
//
// A map's file name carries its layout, so a map and the record of what it
// holds can never disagree, even after a crash halfway through an upgrade.
// (No dots: the BPF filesystem refuses names with one, EPERM.)
const (
	layoutsFile     = "layouts"
	layoutsValueLen = 16384
	linksDir        = "links"
)

// ErrNoBPFFS: there is no BPF filesystem to pin to.
var ErrNoBPFFS = errors.New("no BPF filesystem")

// CheckBPFFS says whether dir's parent is on the BPF filesystem, with what
// to do when it is not.
func CheckBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFS, &st); err != nil {
		return fmt.Errorf("%s: %w: %v", BPFFS, ErrNoBPFFS, err)
	}
	if uint32(st.Type) != unix.BPF_FS_MAGIC {
		return fmt.Errorf("%s is not a BPF filesystem (%w): mount it on the host with `mount -t bpf bpf %s` "+
			"(systemd does at boot); and start the daemon with `nsenter --net=/run/netns/NAME trestle run ...`, "+
			"not `ip netns exec`, which mounts a /sys of its own that hides the host's %s", BPFFS, ErrNoBPFFS, BPFFS, BPFFS)
	}
	return nil
}

// pinName is the name a map is pinned under, without its layout hash.
func pinName(mapName string) string { return strings.TrimPrefix(mapName, ".") }

// derived maps hold nothing that cannot be made again: the daemon rewrites
// the devmaps and flood sets from its config, and an empty memo is a miss.
// A derived map of a changed layout starts empty rather than being copied.
var derived = map[string]bool{
	tbpf.TrestleMapTxPorts:  true,
	tbpf.TrestleMapFloods:   true,
	tbpf.TrestleMapCpuCache: true,
}

// pinState is a pin directory while a Load adopts it.
type pinState struct {
	dir  string
	log  func(msg string, args ...any)
	ncpu int
	// what Load passes to the loader, and what it must pin after.
	replacements map[string]*ebpf.Map
	layouts      map[string]*Layout // by map name, as this build has them
	adopted      map[string]bool    // maps used as they were pinned
	stale        []string           // pinned files replaced by new maps
	migrations   []*migration
	layoutsMap   *ebpf.Map
}

// path is where map name is pinned once the load is committed.
func (p *pinState) path(name string) string {
	return filepath.Join(p.dir, pinName(name)+"-"+p.layouts[name].Hash())
}

// openPins reads dir, decides for each map of spec whether it adopts the
// pinned one, copies it into one of its own layout, or creates it, and
// prepares the replacements for the loader. It may raise the FDB's size in
// spec to what is pinned.
func openPins(dir string, spec *ebpf.CollectionSpec, ncpu int, log func(string, ...any)) (*pinState, error) {
	if err := CheckBPFFS(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, linksDir), 0o700); err != nil {
		return nil, fmt.Errorf("create pin directory: %w", err)
	}
	p := &pinState{dir: dir, log: log, ncpu: ncpu, replacements: map[string]*ebpf.Map{}, layouts: map[string]*Layout{}, adopted: map[string]bool{}}
	ok := false
	defer func() {
		if !ok {
			p.abort()
		}
	}()
	files, err := p.pinnedMaps()
	if err != nil {
		return nil, err
	}
	known, err := p.openLayouts(len(files) > 0)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(spec.Maps))
	for name := range spec.Maps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ms := spec.Maps[name]
		if strings.HasPrefix(name, ".rodata") {
			continue // load-time settings: each program has its own
		}
		flags := ms.Flags
		if name == ".bss" {
			flags |= unix.BPF_F_MMAPABLE
		}
		want, err := layoutOf(ms, flags)
		if err != nil {
			return nil, fmt.Errorf("describe map %s: %w", name, err)
		}
		p.layouts[name] = want
		if err := p.adopt(ms, flags, want, files[pinName(name)], known); err != nil {
			return nil, err
		}
	}
	ok = true
	return p, nil
}

// pinnedMaps lists the map pins of the directory by map name: hash -> path.
func (p *pinState) pinnedMaps() (map[string]map[string]string, error) {
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("read pin directory: %w", err)
	}
	out := map[string]map[string]string{}
	for _, e := range ents {
		i := strings.LastIndexByte(e.Name(), '-')
		if e.IsDir() || i < 0 || len(e.Name())-i-1 != 16 {
			continue
		}
		name, hash := e.Name()[:i], e.Name()[i+1:]
		if name == "" {
			continue
		}
		if out[name] == nil {
			out[name] = map[string]string{}
		}
		out[name][hash] = filepath.Join(p.dir, e.Name())
	}
	return out, nil
}

// openLayouts opens (or creates) the pinned record of layouts.
func (p *pinState) openLayouts(havePins bool) (map[string]*Layout, error) {
	path := filepath.Join(p.dir, layoutsFile)
	m, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		if havePins {
			return nil, fmt.Errorf("%s holds pinned maps but no record of their layout: not a trestle datapath, or a damaged one; remove it with `trestle down`", p.dir)
		}
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "tr_layouts", Type: ebpf.Hash, KeySize: 8, ValueSize: layoutsValueLen, MaxEntries: 256})
		if err == nil {
			err = m.Pin(path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open layouts of %s: %w", p.dir, err)
	}
	p.layoutsMap = m
	known := map[string]*Layout{}
	var k [8]byte
	v := make([]byte, layoutsValueLen)
	it := m.Iterate()
	for it.Next(&k, &v) {
		var l Layout
		if err := json.Unmarshal([]byte(strings.TrimRight(string(v), "\x00")), &l); err != nil {
			return nil, fmt.Errorf("read layouts of %s: %w", p.dir, err)
		}
		known[hex.EncodeToString(k[:])] = &l
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read layouts of %s: %w", p.dir, err)
	}
	return known, nil
}

func (p *pinState) recordLayout(l *Layout) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if len(b) >= layoutsValueLen {
		return fmt.Errorf("layout record of %d bytes does not fit", len(b))
	}
	key, _ := hex.DecodeString(l.Hash())
	v := make([]byte, layoutsValueLen)
	copy(v, b)
	return p.layoutsMap.Put(key, v)
}

// adopt decides what to do with one map.
func (p *pinState) adopt(ms *ebpf.MapSpec, flags uint32, want *Layout, pinned map[string]string, known map[string]*Layout) error {
	hash := want.Hash()
	if len(pinned) == 0 {
		return nil // created by the loader, pinned by commit
	}
	if path, ok := pinned[hash]; ok {
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err != nil {
			return fmt.Errorf("open pinned map %s: %w", path, err)
		}
		for h, other := range pinned {
			if h != hash {
				p.stale = append(p.stale, other) // left by an upgrade that stopped halfway
			}
		}
		switch {
		case m.MaxEntries() == ms.MaxEntries:
		case ms.Name == tbpf.TrestleMapFdb && m.MaxEntries() > ms.MaxEntries:
			ms.MaxEntries = m.MaxEntries() // a larger table than needed: keep it
		default:
			// A table that must grow: copy it into a larger one.
			return p.migrate(ms, flags, m, path, want, want)
		}
		p.replacements[ms.Name] = m
		p.adopted[ms.Name] = true
		p.log("adopted pinned map", "map", ms.Name, "entries", m.MaxEntries())
		return nil
	}
	if len(pinned) > 1 {
		return fmt.Errorf("map %s is pinned %d times in %s, none of this build's layout: remove the datapath with `trestle down` and start again", ms.Name, len(pinned), p.dir)
	}
	var path, oldHash string
	for oldHash, path = range pinned {
	}
	old, ok := known[oldHash]
	if !ok {
		return fmt.Errorf("pinned map %s has a layout (%s) this datapath has no record of: remove it with `trestle down` and start again", path, oldHash)
	}
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		return fmt.Errorf("open pinned map %s: %w", path, err)
	}
	return p.migrate(ms, flags, m, path, old, want)
}

// commit pins what the loader created, the copies of migrated maps, and the
// layouts, and removes the pins the copies replace. The old program, still
// attached until the daemon upgrades its links, keeps its own old maps.
func (p *pinState) commit(maps map[string]*ebpf.Map) error {
	for name, l := range p.layouts {
		if err := p.recordLayout(l); err != nil {
			return fmt.Errorf("record the layout of map %s: %w", name, err)
		}
	}
	for name, m := range maps {
		if p.layouts[name] == nil || p.adopted[name] {
			continue
		}
		// Pin a clone: the loader's map object stays unpinned, so that
		// closing it never unpins.
		c, err := m.Clone()
		if err != nil {
			return fmt.Errorf("pin map %s: %w", name, err)
		}
		err = c.Pin(p.path(name))
		c.Close()
		if err != nil {
			return fmt.Errorf("pin map %s: %w", name, err)
		}
	}
	for _, s := range p.stale {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove replaced pin %s: %w", s, err)
		}
	}
	p.stale = nil
	p.release()
	return nil
}

// release closes the handles the loader has cloned.
func (p *pinState) release() {
	for _, m := range p.replacements {
		m.Close()
	}
	p.replacements = map[string]*ebpf.Map{}
	for _, mg := range p.migrations {
		mg.old.Close()
	}
	p.migrations = nil
}

// abort closes what openPins opened when the load fails; pins stay.
func (p *pinState) abort() {
	if p == nil {
		return
	}
	p.release()
	if p.layoutsMap != nil {
		p.layoutsMap.Close()
		p.layoutsMap = nil
	}
}

func (p *pinState) close() {
	if p == nil {
		return
	}
	p.abort()
}

func (p *pinState) linkPath(ifindex int, m mode.Mode) string {
	return filepath.Join(p.dir, linksDir, linkFile(ifindex, m))
}

func (p *pinState) links() ([]*Attachment, error) {
	return loadLinks(filepath.Join(p.dir, linksDir))
}

// unpinAll removes the pins of maps and layouts, and the directory if
// nothing else is left in it (links are unpinned by their Attachment).
func (p *pinState) unpinAll() error {
	var errs []error
	for name := range p.layouts {
		if err := os.Remove(p.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpin map %s: %w", name, err))
		}
	}
	if err := os.Remove(filepath.Join(p.dir, layoutsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	_ = os.Remove(filepath.Join(p.dir, linksDir))
	_ = os.Remove(p.dir)
	return errors.Join(errs...)
}

// Down removes a persisted datapath: every pinned link (which detaches its
// program), then every pinned map, then the directory. It reports what it
// detached. A directory that does not exist is not an error.
func Down(dir string) ([]string, error) {
	var did []string
	links, err := loadLinks(filepath.Join(dir, linksDir))
	if err != nil {
		return nil, err
	}
	for _, a := range links {
		if err := a.Detach(); err != nil {
			return did, err
		}
		did = append(did, "detached "+a.String())
	}
	// Pins of dead links were removed by loadLinks; anything else left in
	// links/ is not ours to judge, but it is in our directory.
	for _, sub := range []string{filepath.Join(dir, linksDir), dir} {
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

// Instance names the directory of one daemon: its network namespace (by
// cookie, which the kernel never reuses while it runs) and its control
// socket, so that two daemons in two namespaces, or two in one namespace
// with two sockets, never share one, and a daemon restarted in the same
// namespace with the same socket finds its own.
func Instance(netnsCookie uint64, socket string) string {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(socket); i++ {
		h ^= uint32(socket[i])
		h *= 16777619
	}
	return fmt.Sprintf("ns%d-%08x", netnsCookie, h)
}

// NetnsCookie is the cookie of the calling thread's network namespace.
func NetnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("netns cookie: %w", err)
	}
	defer unix.Close(fd)
	const soNetnsCookie = 71 // SO_NETNS_COOKIE, Linux 5.14
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, soNetnsCookie)
	if err != nil {
		return 0, fmt.Errorf("netns cookie (Linux 5.14 or later): %w", err)
	}
	return c, nil
}

// Holding says how many of a pin directory's links still hold an
// interface (a link whose interface is gone, with its namespace, holds
// none). It closes what it opens and removes nothing but dead link pins.
func Holding(dir string) (int, error) {
	links, err := loadLinks(filepath.Join(dir, linksDir))
	for _, a := range links {
		_ = a.Release()
	}
	return len(links), err
}
