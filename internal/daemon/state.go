package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/trestle/trestle/internal/instance"
)

// StateRoot holds, per daemon, what it must remember on disk (instance.StateRoot).
const StateRoot = instance.StateRoot

// Instance is where one daemon keeps its pinned datapath and its state.
type Instance struct {
	Name     string
	PinDir   string
	StateDir string
}

// InstanceOf is the instance of the daemon that listens on socket in the
// calling thread's network namespace (instance.Name).
func InstanceOf(socket string) (Instance, error) {
	cookie, err := instance.NetnsCookie()
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
	name := instance.Name(cookie, abs)
	return Instance{Name: name, PinDir: filepath.Join(instance.PinRoot, name), StateDir: filepath.Join(StateRoot, name)}, nil
}

// stateDir is a daemon's directory under StateRoot.
type stateDir struct {
	dir string
	// saved is what peers.json holds as this daemon last wrote it (nil:
	// unknown), so that an apply that changes no peer writes nothing.
	saved []byte
}

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
	// VNIs: the overlay VNIs whose kernel objects the daemon made
	// (docs/overlay.md), taken over by the next daemon and removed by
	// `trestle down`.
	VNIs []uint32 `json:"vnis,omitempty"`
}

// openState makes the state directory, and refuses one that another user
// owns or may write (itself or its parent): what it holds is taken back at
// start (veth peers' settings, run-time ports), so no other user may put
// it there.
func openState(dir string) (*stateDir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := instance.SafeDir(d, d == dir); err != nil {
			return nil, fmt.Errorf("state directory %s: %w", d, err)
		}
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

// save writes the file whole or not at all (a new file renamed over it),
// unless it says so already: every apply saves (writeBytesAtomic).
func (s *stateDir) save(st stateFile) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if s.saved != nil && bytes.Equal(b, s.saved) {
		return nil
	}
	if err := writeBytesAtomic(s.file(), b); err != nil {
		s.saved = nil
		return err
	}
	s.saved = b
	return nil
}

// removePeers removes the record of veth peers only (the daemon restored
// them), keeping the run-time ports for the next daemon.
func (s *stateDir) removePeers() error {
	s.saved = nil
	if err := os.Remove(s.file()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.file(), err)
	}
	return nil
}

func (s *stateDir) remove() error {
	s.saved = nil
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
	st := stateFile{Persist: d.persist && d.pins.Pinned(), VNIs: d.ovl.mgr.Held()}
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

// writeAtomic writes v as JSON whole or not at all: a new file renamed
// over the old one.
func writeAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeBytesAtomic(path, b)
}

// writeBytesAtomic writes b whole or not at all. It is not synced: the
// records of the state directory (under /run) describe interfaces and
// namespaces that a reboot takes away with them, and the rename is whole
// to the next daemon after this one dies, which is what they are for. A
// sync cost each port.add and port.del 1.5 ms on an ext4 /run, on a CNI
// ADD's and DEL's way; after a crash of the machine a record that did not
// reach the disk whole is set aside as unreadable (loadRun), with nothing
// left to take back.
func writeBytesAtomic(path string, b []byte) error {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
