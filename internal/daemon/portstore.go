package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/trestle/trestle/internal/config"
)

// runPort is a port added at run time, as recorded.
type runPort struct {
	Bridge    string `json:"bridge"`
	Interface string `json:"interface"`
	// Ifindex is the interface's when it was added: a name that comes
	// back as another interface is not this port.
	Ifindex int      `json:"ifindex"`
	Owner   string   `json:"owner,omitempty"`
	Args    []string `json:"args,omitempty"` // the port keys, as given
	port    config.Port
}

// runFile is ports.json.
type runFile struct {
	Ports []*runPort `json:"ports"`
}

const runPortsFile = "ports.json"

// runPortOf is the run-time port of a bridge on an interface, or nil.
func (d *Daemon) runPortOf(bridge, iface string) *runPort {
	for _, rp := range d.run {
		if rp.Bridge == bridge && rp.Interface == iface {
			return rp
		}
	}
	return nil
}

// settleRun records the run-time ports an apply kept, and says which went.
func (d *Daemon) settleRun(kept []*runPort, gone []dropped) {
	for _, g := range gone {
		d.log.Info("run-time port removed", "bridge", g.rp.Bridge, "port", g.rp.Interface, "owner", g.rp.Owner, "why", g.why)
	}
	changed := len(gone) > 0 || len(kept) != len(d.run)
	d.run = kept
	if changed {
		d.saveRun()
	}
}

// saveRun writes the store (nothing without a state directory: unit tests).
func (d *Daemon) saveRun() {
	if d.state == nil {
		return
	}
	if err := d.state.saveRun(runFile{Ports: d.run}); err != nil {
		d.log.Error("record the run-time ports", "err", err)
	}
}

// loadRun reads the store an earlier daemon left; entries that no longer
// parse are dropped with a warning (the apply drops those whose bridge or
// interface is gone).
func (d *Daemon) loadRun() {
	if d.state == nil {
		return
	}
	rf, err := d.state.loadRun()
	if err != nil {
		// Kept aside, not left where the next port.add writes over it:
		// what it held can still be read, and added again, by hand.
		kept := d.state.runFile() + ".unreadable"
		if rerr := os.Rename(d.state.runFile(), kept); rerr != nil {
			kept = ""
		}
		d.log.Warn("the run-time ports recorded are unreadable; none is taken back", "err", err, "kept_as", kept)
		return
	}
	taken := map[string]string{} // interface -> bridge
	for _, rp := range rf.Ports {
		if rp == nil {
			continue
		}
		// What port.add refuses is refused here too: the merge takes
		// these as they are, and an interface twice would be two ports
		// (two slots) on one ifindex.
		if b, ok := taken[rp.Interface]; ok {
			d.log.Warn("a recorded run-time port names an interface recorded before it; dropped", "bridge", rp.Bridge, "port", rp.Interface, "first", b)
			continue
		}
		if err := checkOwner(rp.Owner); err != nil {
			d.log.Warn("a recorded run-time port has an owner port.add refuses; dropped", "bridge", rp.Bridge, "port", rp.Interface, "err", err)
			continue
		}
		p, err := parseRunPort(rp.Bridge, rp.Interface, rp.Args)
		if err != nil {
			d.log.Warn("a recorded run-time port no longer parses; dropped", "bridge", rp.Bridge, "port", rp.Interface, "err", err)
			continue
		}
		taken[rp.Interface] = rp.Bridge
		rp.port = p
		d.run = append(d.run, rp)
	}
	if len(d.run) > 0 {
		d.log.Info("run-time ports taken back", "count", len(d.run))
	}
}

func (s *stateDir) runFile() string { return filepath.Join(s.dir, runPortsFile) }

func (s *stateDir) loadRun() (runFile, error) {
	var rf runFile
	b, err := os.ReadFile(s.runFile())
	if errors.Is(err, os.ErrNotExist) {
		return rf, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &rf)
	}
	if err != nil {
		return rf, fmt.Errorf("read %s: %w", s.runFile(), err)
	}
	return rf, nil
}

func (s *stateDir) saveRun(rf runFile) error {
	if rf.Ports == nil {
		rf.Ports = []*runPort{}
	}
	return writeAtomic(s.runFile(), rf)
}
