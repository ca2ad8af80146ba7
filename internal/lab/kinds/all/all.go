// Package all registers every kind of the lab that is a package of its
// own (internal/lab/kinds/<kind>): cmd/trestle and the tests import it,
// for its kinds' init to run; the core imports none of them. Adding a kind
// is its folder and its line here.
package all

import (
	_ "github.com/trestle/trestle/internal/lab/kinds/b2b"
	_ "github.com/trestle/trestle/internal/lab/kinds/cache"
	_ "github.com/trestle/trestle/internal/lab/kinds/cores"
	_ "github.com/trestle/trestle/internal/lab/kinds/flood"
	_ "github.com/trestle/trestle/internal/lab/kinds/idle"
	_ "github.com/trestle/trestle/internal/lab/kinds/latency"
	_ "github.com/trestle/trestle/internal/lab/kinds/learn"
	_ "github.com/trestle/trestle/internal/lab/kinds/loadlatency"
	_ "github.com/trestle/trestle/internal/lab/kinds/loop"
	_ "github.com/trestle/trestle/internal/lab/kinds/loss"
	_ "github.com/trestle/trestle/internal/lab/kinds/macflood"
	_ "github.com/trestle/trestle/internal/lab/kinds/multicast"
	_ "github.com/trestle/trestle/internal/lab/kinds/overlay"
	_ "github.com/trestle/trestle/internal/lab/kinds/podchurn"
	_ "github.com/trestle/trestle/internal/lab/kinds/portscale"
	_ "github.com/trestle/trestle/internal/lab/kinds/restart"
	_ "github.com/trestle/trestle/internal/lab/kinds/soak"
	_ "github.com/trestle/trestle/internal/lab/kinds/table"
	_ "github.com/trestle/trestle/internal/lab/kinds/tcp"
	_ "github.com/trestle/trestle/internal/lab/kinds/throughput"
	_ "github.com/trestle/trestle/internal/lab/kinds/udp"
)
