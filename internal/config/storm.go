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

// stormTable is a port's storm = { ... }.
var stormTable = Table{
	Path:   "bridge.port.storm",
	Inline: true,
	Help:   "Storm control: the floods a second the port's host may send into the bridge, by kind; the excess is dropped. A kind left out has no limit.",
	Keys: []Key{
		{Name: "broadcast", Kind: KindInt, Min: 1, Max: maxStormRate, Example: "1000", Help: "Broadcast frames a second."},
		{Name: "multicast", Kind: KindInt, Min: 1, Max: maxStormRate, Example: "5000", Help: "Multicast frames a second."},
		{Name: "unknown_unicast", Kind: KindInt, Min: 1, Max: maxStormRate, Example: "1000", Help: "Unicast frames a second to stations the bridge has not learned (it floods them)."},
	},
}

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
	rate := map[string]*int{"broadcast": &s.Broadcast, "multicast": &s.Multicast, "unknown_unicast": &s.UnknownUnicast}
	c.walk(v, field, &stormTable, func(k *Key, _ *value, _ string, x leaf, ok bool) {
		if ok {
			*rate[k.Name] = int(x.n)
		}
	})
	return s
}
