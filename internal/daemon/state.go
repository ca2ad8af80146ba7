package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/netnsutil"
)

// StateRoot holds, per daemon, what it must remember on disk: the veth
// peers it changed and how they were (tmpfs: it goes at reboot, as the
// pinned datapath does).
const StateRoot = "/run/trestle"

// Instance is where one daemon keeps its pinned datapath and its state.
type Instance struct {
	Name     string
	PinDir   string
	StateDir string
}

// InstanceOf is the instance of the daemon that listens on socket in the
// calling thread's network namespace (datapath.Instance).
func InstanceOf(socket string) (Instance, error) {
	cookie, err := datapath.NetnsCookie()
	if err != nil {
		return Instance{}, err
	}
	abs, err := filepath.Abs(socket)
	if err != nil {
		return Instance{}, fmt.Errorf("control socket %s: %w", socket, err)
	}
	// /var/run/trestle and /run/trestle are one daemon.
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}
	name := datapath.Instance(cookie, abs)
	return Instance{Name: name, PinDir: filepath.Join(datapath.PinRoot, name), StateDir: filepath.Join(StateRoot, name)}, nil
}

// stateDir is a daemon's directory under StateRoot.
type stateDir struct{ dir string }

// peerRecord is a changed peer as written to disk: found again by the port
// interface's ifindex, and accepted only in the namespace it was in.
type peerRecord struct {
	Port     int             `json:"port_ifindex"`
	Peer     PeerID          `json:"peer"`
	Original map[string]bool `json:"original"`
}

type stateFile struct {
	// Persist: the daemon pinned its datapath (so `trestle down` must be
	// able to see the BPF filesystem to remove it).
	Persist bool         `json:"persist"`
	Peers   []peerRecord `json:"peers"`
}

func openState(dir string) (*stateDir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return &stateDir{dir: dir}, nil
}

func (s *stateDir) file() string { return filepath.Join(s.dir, "peers.json") }

func (s *stateDir) load() (stateFile, error) {
	var st stateFile
	b, err := os.ReadFile(s.file())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read %s: %w", s.file(), err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("read %s: %w", s.file(), err)
	}
	return st, nil
}

// save writes the file whole or not at all (a new file renamed over it).
func (s *stateDir) save(st stateFile) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.file() + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, s.file()); err != nil {
		return fmt.Errorf("write %s: %w", s.file(), err)
	}
	return nil
}

func (s *stateDir) remove() error {
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("remove %s: %w", s.dir, err)
	}
	return nil
}

// saveState records the peers the daemon holds changed, with those of an
// apply under way (more, never fewer: a peer is forgotten only once it is
// restored).
func (d *Daemon) saveState(more ...map[int]*peerFix) {
	if d.state == nil {
		return
	}
	st := stateFile{Persist: d.persist && d.dp.Pinned()}
	all := map[int]*peerFix{}
	for _, m := range append([]map[int]*peerFix{d.peers}, more...) {
		for idx, f := range m {
			all[idx] = f
		}
	}
	for idx, f := range all {
		if len(f.orig) > 0 {
			st.Peers = append(st.Peers, peerRecord{Port: idx, Peer: f.peer.ID(), Original: maps.Clone(f.orig)})
		}
	}
	if err := d.state.save(st); err != nil {
		d.log.Error("record the veth peers changed", "err", err)
	}
}

// adopt builds the model from what a pinned datapath holds (bridges by
// their names in the maps, ports by ifindex, the links on them, static
// entries), and takes back the peers an earlier daemon recorded. The apply
// that follows diffs the config against it: what the config still has keeps
// forwarding untouched, with its learned entries, counters and timestamps.
func (d *Daemon) adopt() error {
	var recorded stateFile
	if d.state != nil {
		var err error
		if recorded, err = d.state.load(); err != nil {
			d.log.Warn("earlier daemon's state unreadable; its peers are not restored", "err", err)
		}
	}
	links, err := d.dp.AdoptedLinks()
	if err != nil {
		return err
	}
	bridges, err := d.dp.Bridges()
	if err != nil {
		return err
	}
	ports, err := d.dp.Ports()
	if err != nil {
		return err
	}
	byLink := map[int]Attachment{}
	for _, a := range links {
		if other := byLink[a.Ifindex()]; other != nil {
			// Two modes on one interface: a daemon died between an attach
			// in a new mode and the detach of the old. The apply attaches
			// what the config wants; neither may be left untracked.
			d.log.Warn("two programs were left on one interface; one is detached", "ifindex", a.Ifindex(), "kept", other.Mode(), "detached", a.Mode())
			if err := a.Detach(); err != nil {
				return fmt.Errorf("detach the second program on ifindex %d: %w", a.Ifindex(), err)
			}
			continue
		}
		byLink[a.Ifindex()] = a
		d.attached[a.Ifindex()] = a // detached by the apply unless a port keeps it
	}
	byID := map[uint16]*bridgeState{}
	for _, bi := range bridges {
		if bi.Name == "" || d.bridges[bi.Name] != nil {
			continue
		}
		info := bi
		b := &bridgeState{id: bi.ID, info: &info, cliStatics: map[string]config.Static{}, written: map[string]staticEntry{},
			cfg: config.Bridge{Name: bi.Name, MaxEntries: int(bi.MaxEntries), Aging: config.DefaultAging}}
		d.bridges[bi.Name] = b
		byID[bi.ID] = b
		d.alloc.idUsed[bi.ID] = true
	}
	forwarding := map[uint16]map[uint16]bool{}
	for _, b := range byID {
		forwarding[b.id] = map[uint16]bool{}
		for _, p := range b.info.Ports {
			forwarding[b.id][p.Slot] = true
		}
	}
	// Patch ports have no interface: each is named by the bridge of its
	// peer, which the plan matches to the config's patch to that bridge.
	patchBridge := map[uint16]*bridgeState{} // patch slot -> its bridge
	for _, pi := range ports {
		if datapath.IsPatchIfindex(pi.Ifindex) && byID[pi.Bridge] != nil {
			patchBridge[pi.Slot] = byID[pi.Bridge]
		}
	}
	for _, pi := range ports {
		b := byID[pi.Bridge]
		if datapath.IsPatchIfindex(pi.Ifindex) {
			if peer := patchBridge[pi.Peer]; b != nil && peer != nil && !d.alloc.slotUsed[pi.Slot] {
				w := pi
				b.ports = append(b.ports, &portState{bridge: b, slot: pi.Slot, ifindex: int(pi.Ifindex), written: &w,
					mode: modePatch, running: true, why: "adopted from the pinned datapath",
					cfg: config.Port{Patch: peer.cfg.Name, Name: "patch-" + peer.cfg.Name, MaxMACs: int(pi.MaxMACs)}})
				d.alloc.slotUsed[pi.Slot] = true
				continue
			}
		}
		l, lerr := d.sys.LinkByIndex(int(pi.Ifindex))
		if b == nil || lerr != nil || int(pi.Slot) >= len(d.alloc.slotUsed) || d.alloc.slotUsed[pi.Slot] {
			// Of no bridge, or its interface is gone: it goes, and its
			// slot waits for a sweep to flush it.
			slot := pi.Slot
			if int(slot) >= len(d.alloc.slotUsed) || d.alloc.slotUsed[slot] {
				slot = 0 // the slot is a live port's: its egress stays
			}
			if err := d.dp.DelPort(pi.Ifindex, slot); err != nil {
				return fmt.Errorf("remove stale port ifindex %d: %w", pi.Ifindex, err)
			}
			if int(pi.Slot) < len(d.alloc.slotDirty) {
				d.alloc.slotDirty[pi.Slot] = true
			}
			continue
		}
		w := pi
		p := &portState{bridge: b, slot: pi.Slot, ifindex: int(pi.Ifindex), written: &w,
			cfg: config.Port{Interface: l.Name, Mode: mode.Auto, MaxMACs: int(pi.MaxMACs)}}
		if a := byLink[int(pi.Ifindex)]; a != nil {
			p.mode, p.why = a.Mode(), "adopted from the pinned datapath"
			p.running = forwarding[b.id][pi.Slot]
		}
		d.alloc.slotUsed[pi.Slot] = true
		b.ports = append(b.ports, p)
	}
	nStatic, nOrphan := 0, 0
	if len(byID) > 0 {
		es, err := d.dp.FDB()
		if err != nil {
			return err
		}
		for _, e := range es {
			b := byID[e.Bridge]
			var p *portState
			if b != nil {
				p = b.portBySlot(e.Slot)
			}
			if p == nil {
				// An entry of no adopted port: it names nothing here.
				if _, err := d.dp.DelFDB(e.Bridge, e.VLAN, e.MAC); err == nil {
					nOrphan++
				}
				continue
			}
			if !e.Static {
				continue
			}
			s := config.Static{MAC: e.MAC, Port: p.name(), VLAN: e.VLAN}
			b.written[staticKey(s)] = staticEntry{Static: s, Ifindex: int(e.Ifindex), Slot: e.Slot, User: e.User}
			if e.User {
				b.cliStatics[staticKey(s)] = s
			}
			nStatic++
		}
	}
	// Peers: those of adopted links are held again; the others, of an
	// earlier daemon that stopped without restoring them, are restored.
	for _, r := range recorded.Peers {
		peer, err := d.sys.FindPeer(r.Port, r.Peer.Netns)
		if err != nil {
			d.log.Info("veth peer changed by an earlier daemon is gone with its veth; nothing to restore", "port_ifindex", r.Port, "peer", r.Peer.Name)
			continue
		}
		f := &peerFix{peer: peer, orig: r.Original}
		if d.attached[r.Port] != nil {
			d.peers[r.Port] = f
			continue
		}
		if err := f.restore(); err != nil {
			d.log.Warn("restore a veth peer changed by an earlier daemon", "peer", peer.String(), "err", err)
		} else {
			d.log.Info("restored a veth peer changed by an earlier daemon", "peer", peer.String())
		}
		peer.Close()
	}
	// Maps that started empty (new in this build, or of a changed layout
	// that is rebuilt, not copied) hold nothing of what the model says was
	// written: everything is written again.
	if fresh := d.dp.Fresh(); len(fresh) > 0 && len(byID) > 0 {
		for _, b := range d.bridges {
			b.info = nil
			for _, p := range b.ports {
				p.written = nil
			}
		}
		d.log.Info("maps started empty: every port and bridge is written again", "maps", fresh)
	}
	if len(byID) > 0 || len(links) > 0 {
		d.log.Info("adopted the pinned datapath", "bridges", len(byID), "ports", len(ports), "links", len(links), "static_entries", nStatic, "stale_entries_removed", nOrphan)
	}
	return nil
}

// unpin makes an adopted, persisted datapath one that stops with this
// daemon (it runs without persist).
func (d *Daemon) unpin() error {
	for _, a := range d.attached {
		if err := a.Unpin(); err != nil {
			return err
		}
	}
	if err := d.dp.Unpin(); err != nil {
		return err
	}
	d.log.Info("took over a persisted datapath without a break; persist is off, so it stops with this daemon")
	return nil
}

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
		did, err := datapath.Down(inst.PinDir)
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
	for cookie := range instanceCookies() {
		if live[cookie] {
			continue
		}
		gone, err := DownNetns(cookie, false)
		removed = append(removed, gone...)
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// instanceCookies are the network namespaces (by cookie) that have a pinned
// datapath or a state directory.
func instanceCookies() map[uint64]bool {
	out := map[uint64]bool{}
	for _, root := range []string{datapath.PinRoot, StateRoot} {
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

// DownNetns removes the persisted datapaths and the state directories of
// the daemons of a network namespace that is gone, named by its cookie
// (Instance), and returns their pin directories. Unless deleted says the
// caller deleted the namespace itself (whose interfaces then go a moment
// later), a datapath whose links still hold an interface is left: its
// namespace lives on (one kept by a bind mount outside /run/netns is not
// found by liveNetnsCookies).
func DownNetns(cookie uint64, deleted bool) ([]string, error) {
	if cookie == 0 {
		return nil, nil
	}
	prefix := fmt.Sprintf("ns%d-", cookie)
	names := map[string]bool{}
	for _, root := range []string{datapath.PinRoot, StateRoot} {
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				names[e.Name()] = true
			}
		}
	}
	var removed []string
	for name := range names {
		pins := filepath.Join(datapath.PinRoot, name)
		if n, err := datapath.Holding(pins); !deleted && (err != nil || n > 0) {
			continue
		}
		if _, err := datapath.Down(pins); err != nil {
			return removed, fmt.Errorf("instance %s: %w", name, err)
		}
		if err := os.RemoveAll(filepath.Join(StateRoot, name)); err != nil {
			return removed, fmt.Errorf("instance %s: %w", name, err)
		}
		removed = append(removed, pins)
	}
	return removed, nil
}

// liveNetnsCookies are the cookies of every network namespace reachable by
// name (ip netns) or through a process.
func liveNetnsCookies() (map[uint64]bool, error) {
	cookies := map[uint64]bool{}
	own, err := datapath.NetnsCookie()
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
				c, err := datapath.NetnsCookie()
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
