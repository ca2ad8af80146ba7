package daemon

import (
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
)

// A capture request names what it cannot capture (fake dataplane: the
// capture itself is tested in internal/datapath and cmd/trestle).
func TestCaptureRefusals(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"h1", "h2", "h3", "h4"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=h1,h2,@br1", "br1=@br0,h3,h4"))
	cases := []struct {
		req  ctl.Request
		want string
	}{
		{ctl.Request{Port: "nosuch"}, `no bridge has a port "nosuch"`},
		{ctl.Request{Port: "h1", Bridge: "br9"}, `no bridge "br9"`},
		{ctl.Request{Port: "h1", Bridge: "br1"}, `bridge "br1" has no port "h1"`},
		{ctl.Request{Port: "patch-br1"}, `port "patch-br1" of bridge "br0" is a patch port`},
		{ctl.Request{Port: "h1", Direction: "sideways"}, `direction "sideways"`},
		{ctl.Request{Port: "h1"}, "this dataplane cannot capture"},
	}
	for _, c := range cases {
		_, _, err := w.d.startCapture(c.req)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("capture %+v: %v, want an error with %q", c.req, err, c.want)
		}
	}
}
