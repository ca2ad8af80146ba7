package datapath

import (
	"strings"
	"testing"
)

// The tick rate the memos expire by (bpf/lib/fdb.h), from the kernel config.
func TestKernelHZ(t *testing.T) {
	if hz, err := parseHZ(strings.NewReader("# CONFIG_HZ_1000 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n")); err != nil || hz != 250 {
		t.Errorf("parseHZ: %d %v", hz, err)
	}
	for _, bad := range []string{"CONFIG_HZ_250=y\n", "CONFIG_HZ=x\n", "CONFIG_HZ=0\n"} {
		if hz, err := parseHZ(strings.NewReader(bad)); err == nil {
			t.Errorf("parseHZ(%q) = %d, want an error", bad, hz)
		}
	}
	t.Logf("this kernel: HZ %d", kernelHZ())
}
