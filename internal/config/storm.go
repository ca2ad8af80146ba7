package config

import (
	"github.com/pelletier/go-toml/v2/unstable"
)

// Storm is a port's storm control: frames a second of broadcast,
// multicast and unknown unicast (keys broadcast, multicast,
// unknown_unicast of the inline table); 0 is no limit.
type Storm struct {
	Broadcast, Multicast, UnknownUnicast int
}

// Any says whether any kind is limited.
func (s Storm) Any() bool { return s != Storm{} }

// maxStormRate bounds a storm control rate: far above what one port can
// flood, and its interval (a second / rate) is still whole nanoseconds.
const maxStormRate = 100_000_000

// storm checks a port's storm control: an inline table of rates.
func (c *checker) storm(v *value, field string) Storm {
	var s Storm
	if v.kind != unstable.Table {
		c.errorf(v.line, field, "must be a table such as { broadcast = 1000, multicast = 5000, unknown_unicast = 1000 } (frames a second)")
		return s
	}
	if len(v.keys) == 0 {
		c.errorf(v.line, field, "is empty: give broadcast, multicast or unknown_unicast, in frames a second")
	}
	for _, k := range v.keys {
		f, kv := field+"."+keyName(k), v.vals[k]
		var dst *int
		switch k {
		case "broadcast":
			dst = &s.Broadcast
		case "multicast":
			dst = &s.Multicast
		case "unknown_unicast":
			dst = &s.UnknownUnicast
		default:
			c.unknown(kv, f)
			continue
		}
		if n, ok := c.integer(kv, f, 1, maxStormRate); ok {
			*dst = int(n)
		}
	}
	return s
}
