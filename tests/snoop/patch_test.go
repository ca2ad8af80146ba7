package snoop

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestSnoopPatch, both modes: two snooping bridges joined by patch ports,
// br0 [h1, h2, patch-br1] and br1 [h3, h4, patch-br0]. A host's report
// crosses the patch (no querier anywhere: reports flood), so each bridge
// learns the group: on the host's port in its own bridge, on the patch
// port in the other. A group's frames then reach its member only, across
// the patch or not, and a group nobody joined reaches every host of both.
func TestSnoopPatch(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 4)
		var b strings.Builder
		fmt.Fprintf(&b, "[daemon]\nsocket = %q\n", l.Sock)
		for _, br := range []struct {
			name, peer string
			hosts      []int
		}{{"br0", "br1", []int{1, 2}}, {"br1", "br0", []int{3, 4}}} {
			fmt.Fprintf(&b, "\n[[bridge]]\nname = %q\nmulticast_snooping = true\n", br.name)
			for _, h := range br.hosts {
				fmt.Fprintf(&b, "\n[[bridge.port]]\ninterface = %q\nmode = %q\n", harness.PortName(h), mode)
			}
			fmt.Fprintf(&b, "\n[[bridge.port]]\npatch = %q\n", br.peer)
		}
		l.WriteConfig(b.String())
		l.Start()
		join(t, l.Host(3), "239.1.1.1", true)
		join(t, l.Host(2), "239.1.1.2", true)
		waitMDBOf(t, l, "br1", "h3's report in its bridge", func(ms []ctl.MDBEntry) bool {
			return member(ms, "239.1.1.1", harness.PortName(3)) && !member(ms, "239.1.1.1", "patch-br0") && member(ms, "239.1.1.2", "patch-br0")
		})
		waitMDBOf(t, l, "br0", "h3's report across the patch", func(ms []ctl.MDBEntry) bool {
			return member(ms, "239.1.1.1", "patch-br1") && member(ms, "239.1.1.2", harness.PortName(2)) && !member(ms, "239.1.1.2", "patch-br1")
		})

		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 4; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		send(t, l, 1, harness.HostIP(1), "239.1.1.1", "across-to-h3")
		send(t, l, 4, harness.HostIP(4), "239.1.1.2", "across-to-h2")
		send(t, l, 3, harness.HostIP(3), "239.1.1.2", "from-member-side")
		send(t, l, 1, harness.HostIP(1), "239.9.9.9", "to-nobody")
		delivered(t, others(caps, 1), "across-to-h3", 3)
		delivered(t, others(caps, 4), "across-to-h2", 2)
		delivered(t, others(caps, 3), "from-member-side", 2)
		delivered(t, others(caps, 1), "to-nobody", 2, 3, 4)
		if g := l.Stats(harness.PortName(1)).Counters.Get("grouped"); g < 1 {
			t.Errorf("port-h1 grouped %d, want at least 1", g)
		}
	})
}

// others is caps without the sender's, which may see its own frame.
func others(caps map[int]*testutil.Capturer, sender int) map[int]*testutil.Capturer {
	out := map[int]*testutil.Capturer{}
	for i, c := range caps {
		if i != sender {
			out[i] = c
		}
	}
	return out
}
