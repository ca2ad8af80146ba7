package vlan

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestVLANLearned: a tagged frame is learned under its VID in both modes (at
// tc the kernel has moved the tag into metadata; XDP sees it in the frame).
func TestVLANLearned(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewLab(t, 2)
			l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.Start()
			src := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 1}
			payload := make([]byte, 50)
			payload[0], payload[1] = 0x00, 0x0a // TCI: VID 10
			payload[2], payload[3] = 0x88, 0xb5
			capt := l.Host(2).Capture(t, "eth0")
			if err := l.Host(1).RawSend("eth0", testutil.Frame(harness.HostMAC(2), src, 0x8100, payload)); err != nil {
				t.Fatal(err)
			}
			isTagged := func(f []byte) bool {
				return len(f) > 16 && bytes.Equal(f[6:12], src) && f[12] == 0x81 && f[13] == 0 && f[15] == 10
			}
			if n := capt.WaitFor(isTagged, 1, 2*time.Second); n != 1 {
				t.Errorf("h2 got %d copies of the tagged frame, want 1 with its tag", n)
			}
			if e, ok := l.FDBEntry(src); !ok || e.VLAN != 10 || e.Port != "port-h1" {
				t.Errorf("tagged frame learned as %+v (found %v), want vlan 10 on port-h1", e, ok)
			}
			l.Stop()
		})
	}
}
