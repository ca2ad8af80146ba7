package config

import (
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
}

func (c *checker) daemon(v *value, d *Daemon) {
	if v.kind != unstable.Table {
		c.errorf(v.line, "daemon", "must be a table")
		return
	}
	for _, k := range v.keys {
		f, kv := "daemon."+keyName(k), v.vals[k]
		switch k {
		case "persist":
			if kv.kind != unstable.Bool {
				c.errorf(kv.line, f, "must be true or false")
			} else {
				d.Persist = kv.data == "true"
			}
		case "metrics":
			if s, ok := c.str(kv, f); ok {
				if err := CheckListenAddr(s); err != nil {
					c.errorf(kv.line, f, "%v", err)
				} else {
					d.Metrics = s
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
		default:
			c.unknown(kv, f)
		}
	}
}
