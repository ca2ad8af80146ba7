package datapath

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/mode"
)

// BPFFS is where the BPF filesystem is mounted, and PinRoot the directory
// of trestle's persisted datapaths, one directory each (instance.Name).
const (
	BPFFS   = instance.BPFFS
	PinRoot = instance.PinRoot
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
	linksDir        = instance.LinksDir
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
		return fmt.Errorf("%s is not a BPF filesystem (%w): mount it on the host with `mount -t bpf -o mode=0700 bpf %s` "+
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
	// The capture's (capture.go): written when a capture starts.
	tbpf.TrestleMapCaptureRing: true,
	tbpf.TrestleMapCaptureConf: true,
	tbpf.TrestleMapCaptureLost: true,
	tbpf.TrestleMapCaptureBuf:  true,
	// Events not yet read: a ring is not copied (it cannot be read but
	// by its one consumer); a larger or smaller one starts empty.
	tbpf.TrestleMapEventRing: true,
	tbpf.TrestleMapEdgeRing:  true,
	// The overlay's outer headers: the control plane writes them again.
	tbpf.TrestleMapEncaps: true,
	// The neighbour table's static entries: the apply writes them again;
	// its learned ones, the stations' next ARP and ND (a layout of the
	// same entries is adopted as it is, learned ones too: neighlearn.go).
	tbpf.TrestleMapNeigh: true,
	// The group table: the daemon empties it at start (ClearGroups), and
	// its members report again; the snoop ring as the event ring.
	tbpf.TrestleMapGroups:    true,
	tbpf.TrestleMapGroupCur:  true,
	tbpf.TrestleMapSnoopRing: true,
	// The ports' reserves at the mark (fair.go): the daemon gives them
	// again at its next look (an empty one gives none: for a second, no
	// port at its share learns at the mark).
	tbpf.TrestleMapPortHold: true,
}

// scratch maps hold nothing the daemon writes again after an upgrade: a
// new or emptied one is not fresh.
var scratch = map[string]bool{
	tbpf.TrestleMapCpuCache:    true,
	tbpf.TrestleMapCaptureRing: true,
	tbpf.TrestleMapCaptureConf: true,
	tbpf.TrestleMapCaptureLost: true,
	tbpf.TrestleMapCaptureBuf:  true,
	tbpf.TrestleMapEventRing:   true,
	tbpf.TrestleMapEdgeRing:    true,
	tbpf.TrestleMapEventLost:   true,
	tbpf.TrestleMapGroupCur:    true,
	tbpf.TrestleMapSnoopRing:   true,
	tbpf.TrestleMapSnoopLost:   true,
	// The overlay's outer headers: the overlay's comparison writes them,
	// not the apply (a new one is no reason to rewrite every port).
	tbpf.TrestleMapEncaps: true,
	// Written at each look of the daemon's, not by the apply.
	tbpf.TrestleMapPortHold: true,
}

// groups are maps that hold one state between them: they are adopted
// together or copied together, never one copied and the others shared. The
// old program, attached until the daemon moves its links, writes the maps it
// has: were the table copied and its counts shared, what it learns in that
// window would be counted forever and found nowhere.
var groups = [][]string{
	fdbGroup,
	{tbpf.TrestleMapBridges, tbpf.TrestleMapBridgeLive, tbpf.TrestleMapFloods},
	{tbpf.TrestleMapPortIndex, tbpf.TrestleMapPorts, tbpf.TrestleMapTxPorts},
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
	fresh        []string           // maps that start empty while others were adopted
	stale        []string           // pinned files to remove once the new ones are pinned
	migrations   []*migration
	layoutsMap   *ebpf.Map
}

// path is where map name is pinned once the load is committed.
func (p *pinState) path(name string) string {
	return filepath.Join(p.dir, pinName(name)+"-"+p.layouts[name].Hash())
}

// pinned is a map of this build and what the directory holds of it.
type pinned struct {
	name  string
	spec  *ebpf.MapSpec
	flags uint32
	want  *Layout
	path  string // the pin this build adopts or copies, "" for none
	from  *Layout
	m     *ebpf.Map
	// what is done: adopt it as it is, or copy it into a map of this
	// build (a derived map starts empty instead).
	copy bool
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
	// What is pinned here is adopted (maps the switch reads, programs it
	// runs): the directory and its parent must be no other user's.
	for _, d := range []string{filepath.Dir(dir), dir, filepath.Join(dir, linksDir)} {
		if err := instance.SafeDir(d, d != filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("pin directory %s: %w", d, err)
		}
	}
	p := &pinState{dir: dir, log: log, ncpu: ncpu, replacements: map[string]*ebpf.Map{}, layouts: map[string]*Layout{}, adopted: map[string]bool{}}
	ok := false
	var maps []*pinned
	defer func() {
		if !ok {
			for _, pm := range maps {
				if pm.m != nil {
					pm.m.Close()
				}
			}
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
	byName := map[string]*pinned{}
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
		pm := &pinned{name: name, spec: ms, flags: flags, want: want}
		maps = append(maps, pm)
		byName[name] = pm
		if err := p.decide(pm, files[pinName(name)], known); err != nil {
			return nil, err
		}
		delete(files, pinName(name))
	}
	// Pins of maps this build no longer has.
	for _, hashes := range files {
		for _, path := range hashes {
			p.stale = append(p.stale, path)
		}
	}
	// A group is adopted whole or copied whole.
	for _, g := range groups {
		copyAll := false
		for _, n := range g {
			if pm := byName[n]; pm != nil && pm.copy {
				copyAll = true
			}
		}
		for _, n := range g {
			if pm := byName[n]; copyAll && pm != nil && pm.m != nil && !pm.copy {
				pm.copy, pm.from = true, pm.want
			}
		}
	}
	anyAdopted := false
	for _, pm := range maps {
		anyAdopted = anyAdopted || pm.m != nil
	}
	for _, pm := range maps {
		switch {
		case pm.m == nil:
			if anyAdopted && !scratch[pm.name] {
				p.fresh = append(p.fresh, pm.name)
			}
		case pm.copy:
			m := pm.m
			pm.m = nil // migrate takes it
			empty, err := p.migrate(pm.spec, pm.flags, m, pm.path, pm.from, pm.want)
			if err != nil {
				return nil, err
			}
			if empty && !scratch[pm.name] {
				p.fresh = append(p.fresh, pm.name)
			}
		default:
			p.replacements[pm.name] = pm.m
			p.adopted[pm.name] = true
			pm.m = nil
			p.log("adopted pinned map", "map", pm.name, "entries", pm.spec.MaxEntries)
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
		if strings.HasSuffix(e.Name(), "_new") {
			p.stale = append(p.stale, filepath.Join(p.dir, e.Name())) // a pin that was never renamed into place
			continue
		}
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
	key, _ := hex.DecodeString(l.Hash())
	if v, err := p.layoutsMap.LookupBytes(key); err == nil && v != nil {
		return nil // a hash names one layout: recorded once
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if len(b) >= layoutsValueLen {
		return fmt.Errorf("layout record of %d bytes does not fit", len(b))
	}
	v := make([]byte, layoutsValueLen)
	copy(v, b)
	return p.layoutsMap.Put(key, v)
}

// decide opens what is pinned of one map and says whether it can be
// adopted as it is or must be copied; it refuses what it cannot copy.
func (p *pinState) decide(pm *pinned, files map[string]string, known map[string]*Layout) error {
	if len(files) == 0 {
		return nil // created by the loader, pinned by commit
	}
	hash := pm.want.Hash()
	path, ok := files[hash]
	pm.from = pm.want
	if ok {
		for h, other := range files {
			if h != hash {
				p.stale = append(p.stale, other) // left by an upgrade that stopped halfway
			}
		}
	} else {
		if len(files) > 1 {
			return fmt.Errorf("map %s is pinned %d times in %s, none of this build's layout: remove the datapath with `trestle down` and start again", pm.name, len(files), p.dir)
		}
		var oldHash string
		for oldHash, path = range files {
		}
		if pm.from, ok = known[oldHash]; !ok {
			return fmt.Errorf("pinned map %s has a layout (%s) this datapath has no record of: remove it with `trestle down` and start again", path, oldHash)
		}
		pm.copy = true
	}
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		return fmt.Errorf("open pinned map %s: %w", path, err)
	}
	pm.m, pm.path = m, path
	switch {
	case m.MaxEntries() == pm.spec.MaxEntries:
	case pm.name == tbpf.TrestleMapFdb && m.MaxEntries() > pm.spec.MaxEntries:
		pm.spec.MaxEntries = m.MaxEntries() // a larger table than needed: keep it
	default:
		pm.copy = true // a table that must grow: copied into a larger one
	}
	return nil
}

// commit pins what the loader created and the copies of migrated maps, and
// removes the pins they replace. A copy is pinned under a temporary name and
// renamed over its final one, which may be the old pin's (a table that grew
// keeps its layout, so its name): a crash leaves the old pin or the new,
// never neither. The old program, still attached until the daemon moves its
// links, keeps its own old maps. Layout records no pin names any more go.
func (p *pinState) commit(maps map[string]*ebpf.Map) error {
	for name, l := range p.layouts {
		if err := p.recordLayout(l); err != nil {
			return fmt.Errorf("record the layout of map %s in %s: %w", name, p.dir, err)
		}
	}
	final := map[string]bool{}
	for name, m := range maps {
		if p.layouts[name] == nil {
			continue
		}
		path := p.path(name)
		final[path] = true
		if p.adopted[name] {
			continue
		}
		if err := pinAt(m, path); err != nil {
			return fmt.Errorf("pin map %s at %s: %w", name, path, err)
		}
	}
	for _, s := range p.stale {
		if final[s] {
			continue
		}
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove replaced pin %s: %w", s, err)
		}
	}
	p.stale = nil
	p.pruneLayouts(final)
	p.release()
	return nil
}

// pinAt pins m at path, under a temporary name renamed over it: a crash
// leaves the pin that was there or the new one, never neither. It pins a
// clone: the caller's map object stays unpinned, so that closing it never
// unpins.
func pinAt(m *ebpf.Map, path string) error {
	c, err := m.Clone()
	if err != nil {
		return err
	}
	tmp := path + "_new"
	_ = os.Remove(tmp)
	err = c.Pin(tmp)
	c.Close()
	if err == nil {
		err = os.Rename(tmp, path)
	}
	return err
}

// pinMaps pins maps in place of the pins of their names (a resize's table,
// of the same layouts: their files keep their names), in the order of their
// names.
func (p *pinState) pinMaps(ms map[string]*ebpf.Map) error {
	for _, name := range slices.Sorted(maps.Keys(ms)) {
		if err := pinAt(ms[name], p.path(name)); err != nil {
			return fmt.Errorf("pin map %s in %s: %w", name, p.dir, err)
		}
	}
	return nil
}

// pruneLayouts deletes the records of layouts no pin has any more.
func (p *pinState) pruneLayouts(final map[string]bool) {
	keep := map[string]bool{}
	for path := range final {
		keep[path[len(path)-16:]] = true
	}
	var k [8]byte
	var gone [][8]byte
	it := p.layoutsMap.Iterate()
	v := make([]byte, layoutsValueLen)
	for it.Next(&k, &v) {
		if !keep[hex.EncodeToString(k[:])] {
			gone = append(gone, k)
		}
	}
	for _, k := range gone {
		_ = p.layoutsMap.Delete(k)
	}
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

func (p *pinState) linkPath(ifindex int, m mode.Mode) string {
	return filepath.Join(p.dir, linksDir, linkFile(ifindex, m))
}

func (p *pinState) links() ([]*Attachment, error) {
	return loadLinks(p.dir)
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
