package config

import (
	"net/netip"
	"path/filepath"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Daemon holds settings of the daemon process.
type Daemon struct {
	Socket string // DefaultSocket when the file has none
	// Persist pins the datapath, so that it keeps forwarding when the
	// daemon exits, and a new daemon adopts it.
	Persist bool
	// Metrics is the address (host:port) of the Prometheus endpoint;
	// "" for none.
	Metrics string
	// VTEP is this host's VXLAN tunnel end point, an address of the
	// daemon's namespace (the daemon checks that at apply); invalid
	// (the zero Addr) when not set. Required once a port is an overlay
	// port.
	VTEP     netip.Addr
	VTEPLine int // its line, for the daemon's message when it is no address of the namespace
	// FRRVtyDir is the directory of FRR's vty sockets (vtysh's
	// --vty_socket), where the daemon asks bgpd about its EVPN sessions
	// (docs/overlay.md, "FRR restarts"); DefaultFRRVtyDir when the file
	// has none.
	FRRVtyDir string
}

// daemonTable is [daemon].
var daemonTable = Table{
	Path: "daemon",
	Help: "The daemon process: its control socket, persistence and metrics.",
	Keys: []Key{
		{Name: "socket", Kind: KindString, Form: "an absolute path, at most 107 bytes", Default: `"` + DefaultSocket + `"`, Example: `"/run/trestle/test.sock"`,
			Help: "The control socket the CLI talks to; --socket and TRESTLE_SOCKET override it."},
		{Name: "persist", Kind: KindBool, Default: "false", Example: "true",
			Help: "Pin the datapath under /sys/fs/bpf/trestle/: it forwards on when the daemon exits, and the next daemon adopts it; `trestle down` removes it."},
		{Name: "metrics", Kind: KindString, Form: `host:port, such as "127.0.0.1:9470" or "[::1]:9470"`, Example: `"127.0.0.1:9470"`,
			Help: "Serve Prometheus metrics at http://ADDR/metrics (docs/operations.md); off unless set. With no host (\":9470\") it listens on 127.0.0.1 only; every interface only when named (\"0.0.0.0:9470\")."},
		{Name: "vtep", Kind: KindString, Form: "an IPv4 or IPv6 address of the daemon's namespace", Example: `"192.0.2.1"`,
			Help: "This host's VXLAN tunnel end point: the source of its overlay ports' VXLAN packets, and the next hop FRR advertises for their VNIs (docs/overlay.md); required once a port is an overlay port (vxlan)."},
		{Name: "frr_vty_dir", Kind: KindString, Form: "an absolute path", Default: `"` + DefaultFRRVtyDir + `"`, Example: `"/run/frr/site1"`,
			Help: "The directory of FRR's vty sockets (vtysh --vty_socket). With an overlay port, the daemon asks bgpd there (vtysh) which BGP session carried each remote VTEP, so that the addresses of a peer whose session went (its FRR restarting) are kept, stale, until the session is back, and those a peer withdraws over a live session go after 1.5s (docs/overlay.md, \"FRR restarts\"). When bgpd never answers there, every withdrawn address goes after 1.5s, said once in the log."},
	},
}

func (c *checker) daemon(v *value, d *Daemon) {
	if v.kind != unstable.Table {
		c.errorf(v.line, "daemon", "must be a table")
		return
	}
	c.walk(v, "daemon", &daemonTable, func(k *Key, kv *value, f string, x leaf, ok bool) {
		switch k.Name {
		case "persist":
			if ok {
				d.Persist = x.b
			}
		case "metrics":
			if s, ok := c.str(kv, f); ok {
				if err := CheckListenAddr(s); err != nil {
					c.errorf(kv.line, f, "%v", err)
				} else {
					d.Metrics = s
				}
			}
		case "vtep":
			if s, ok := c.str(kv, f); ok {
				c.vtepLine = kv.line
				a, err := netip.ParseAddr(s)
				switch {
				case err != nil || a.Zone() != "":
					c.errorf(kv.line, f, "%q is not an IPv4 or IPv6 address", s)
				case !a.IsGlobalUnicast() && !a.IsLoopback():
					c.errorf(kv.line, f, "%q is not a unicast address a VTEP can have", s)
				default:
					d.VTEP, d.VTEPLine = a.Unmap(), kv.line
				}
			}
		case "frr_vty_dir":
			if s, ok := c.str(kv, f); ok {
				if !filepath.IsAbs(s) {
					c.errorf(kv.line, f, "%q is not an absolute path", s)
				} else {
					d.FRRVtyDir = filepath.Clean(s)
				}
			}
		case "socket":
			s, ok := c.str(kv, f)
			switch {
			case !ok:
			case !filepath.IsAbs(s):
				c.errorf(kv.line, f, "%q is not an absolute path", s)
			case len(s) > maxSocketPath:
				c.errorf(kv.line, f, "%q is longer than %d bytes, the limit for a unix socket path", s, maxSocketPath)
			default:
				d.Socket = s
			}
		}
	})
}
