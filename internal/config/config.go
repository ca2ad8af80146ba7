// Package config reads and validates the TOML file given to `trestle run
// --config FILE`.
//
// The contract: Load and Parse either return a complete *Config, with every
// default filled in and every rule checked, or a nil *Config and an Errors
// value listing every problem found, sorted by line. Each problem reads
// "FILE:LINE: FIELD: MSG", where FIELD is the TOML path with array indices
// (bridge[0].port[1].mode) and LINE is the line of that key, or of its table
// header when the key is missing. Nothing partial is ever returned, so the
// daemon can check a new file completely before it applies any of it, and
// keep its running state when the file is rejected. A file that cannot be
// read is an Errors too, of one entry without a line: "FILE: MSG".
//
// The file's tables and keys are in one table of keys (keys.go, and a var
// ...Table in the file of each TOML table: daemon.go, bridge.go, port.go,
// storm.go, static.go, mirror.go, rule.go), from which the checker takes each
// value's type, range and values, and docs/configuration.md its reference
// of every key; the code of each table's file checks what relates its keys
// to each other and to other tables. Unknown keys and tables are errors, so
// a typo is never silently ignored.
//
// A bridge is VLAN-aware when any of its ports sets vlan or trunk. Its other
// ports are then access ports of VLAN 1, and each static entry belongs to a
// VLAN its port carries: vlan when set, else the port's untagged VLAN (its
// access VLAN, or the native VLAN of a trunk; a trunk without one needs vlan).
// A port sets vlan or trunk, not both, and no VLAN is listed twice in a
// trunk. In a bridge that is not VLAN-aware, frames pass whatever their tags
// and a static entry's vlan is 0 (untagged, the default) .. 4094. The VLANs
// of all bridges together, counted once per bridge, are at most MaxVLANs.
//
// Patch ports join bridges in one datapath, and trestle runs no spanning
// tree, so the patches must form a forest: each peer is another bridge that
// declares one patch back, two bridges are joined by one patch at most, no
// patches close a cycle, and no chain of bridges joined by patches is longer
// than MaxPatchChain. A port's name (its interface, or a patch port's name)
// is unique in its bridge. A patch port follows the VLAN rules of any port.
//
// The filter's rules ([[bridge.rule]], default) are checked and kept
// whether filter is on or not (rule.go).
package config

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Defaults and limits.
const (
	DefaultSocket = "/run/trestle/trestle.sock"
	// DefaultFRRVtyDir is where FRR's packages put the daemons' vty
	// sockets.
	DefaultFRRVtyDir = "/var/run/frr"
	DefaultAging     = 300 * time.Second
	DefaultLoopRetry = 60 * time.Second
	// DefaultQueryInterval is RFC 3376's and RFC 3810's query interval;
	// MinQueryInterval leaves the 1 s response interval room below half
	// of it, and MaxQueryInterval is the longest a query's QQIC can say
	// (RFC 3376 4.1.7: 31744 s).
	DefaultQueryInterval = 125 * time.Second
	MinQueryInterval     = 2 * time.Second
	MaxQueryInterval     = 31744 * time.Second
	// An address frozen after more moves than these in this window (as
	// FRR's duplicate-address detection: 5 moves in 180 s).
	DefaultMACMoveLimit  = 5
	DefaultMACMoveWindow = 180 * time.Second
	// A neigh_suppress bridge's learned neighbours: how long one lives
	// without a frame that claims it (the FDB's aging), and how many one
	// port may hold (a host's IPv4, IPv6 and link-local addresses, and
	// some more: a tenant's share, not the table).
	DefaultNeighAging       = 300 * time.Second
	DefaultMaxNeighsPerPort = 32
	MaxNeighsPerPort        = 4096
	DefaultMaxEntries       = 65536
	// The datapath's limits, from bpf/types.h through its bindings.
	MaxBridges        = tbpf.MaxBridges     // bridge ids 1..64
	MaxPortsPerBridge = tbpf.MaxBridgePorts // ports of one bridge
	MaxPorts          = tbpf.MaxPortsAll    // all bridges together: slot 0 is no port
	MaxVLANs          = tbpf.MaxVLANs       // distinct (bridge, VLAN) pairs of all bridges together
	// The filter's established connections (docs/filter.md, "Keep
	// state"): a bridge's and one port's by default, and all filtering
	// bridges' together (the datapath's table).
	DefaultMaxStates     = 16384
	DefaultMaxPortStates = 4096
	MaxStatesAll         = tbpf.FilterStates
	// A port's mac_limit_action.
	LimitDrop    = "drop"
	LimitForward = "forward"

	// Bridges a frame may cross through patch ports in one program run
	// (issue 12): the longest chain of bridges joined by patches.
	MaxPatchChain = 16
)

// Limits of single values.
const (
	minAging      = time.Second
	maxAging      = 24 * time.Hour
	maxTableSize  = 1 << 24 // max_entries and max_macs
	maxVLAN       = 4094
	maxNameLen    = tbpf.NameLen - 1 // IFNAMSIZ-1; bridge names follow interface names, and are kept in the datapath
	maxSocketPath = 107              // sizeof(sun_path)-1: longer paths cannot be bound
)

// Config is a validated configuration file.
type Config struct {
	File    string // path as given
	Daemon  Daemon
	Bridges []Bridge // in file order
}

// Load reads and parses the file at path. A file it cannot read is
// refused as one with errors is, with an Errors of one line-less entry:
// "FILE: cannot read it: no such file or directory".
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		why := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error()
		}
		return nil, Errors{{File: path, Msg: "cannot read it: " + why, Cause: err}}
	}
	return Parse(path, data)
}

// Parse parses and validates data; file is used only in messages and as
// Config.File. On failure the error is an Errors.
func Parse(file string, data []byte) (*Config, error) {
	root, serr := parseTOML(data)
	if serr != nil {
		return nil, Errors{{File: file, Line: serr.line, Msg: "invalid TOML: " + serr.msg}}
	}
	c := &checker{file: file, ifaces: map[string]portRef{}}
	cfg := &Config{File: file, Daemon: Daemon{Socket: DefaultSocket, FRRVtyDir: DefaultFRRVtyDir}}
	var bridges *value
	for _, k := range root.keys {
		switch v := root.vals[k]; k {
		case "daemon":
			c.daemon(v, &cfg.Daemon)
		case "bridge":
			bridges = v
		default:
			c.unknown(v, keyName(k))
		}
	}
	cfg.Bridges = c.bridges(bridges)
	c.needVTEP(&cfg.Daemon)
	c.overlayObjects()
	if len(c.errs) > 0 {
		slices.SortStableFunc(c.errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, c.errs
	}
	return cfg, nil
}

// checker validates the tree and collects every error instead of stopping
// at the first, so one run of the daemon shows everything to fix.
type checker struct {
	file       string
	errs       Errors
	ifaces     map[string]portRef // interface -> the port that has it
	totalPorts int
	totalVLANs int                // (bridge, VLAN) pairs of the bridges so far
	patches    []*patchPort       // of named bridges, in file order
	vnis       map[uint32]portRef // VNI -> the overlay port that has it
	overlay    *portRef           // the first overlay port, which needs [daemon] vtep
	vtepLine   int                // line of [daemon] vtep, 0 when absent
}

// portRef remembers where an interface was first used, for duplicate errors:
// bridge is how messages name its bridge ("bridge br0" or "bridge[2]").
type portRef struct {
	bridge string
	line   int
	field  string // the interface key's field, for a port's interface
}
