package lab_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/trestle/trestle/internal/lab"
	_ "github.com/trestle/trestle/internal/lab/kinds/all"
)

func TestVLANOverheadScenario(t *testing.T) {
	checkVariantScenario(t, "vlan-overhead", "vlan", []string{"trestle:xdp", "trestle", "ovs", "linux-bridge"}, 30*time.Minute,
		"VLAN 10", "trunk", "tagged/untagged", "at least 0.95x trestle:xdp", "trestle:xdp@vlan at least 0.98x floor@vlan", "at least 5x ovs@vlan")
}

// runVLAN runs duts for a very short trial each and checks every unit:
// measured, its VLAN check passed and recorded, or skipped as unavailable
// for the reason allowed[dut]. Nothing may be left behind.
func runVLAN(t *testing.T, bin string, duts []string, allowed map[string]string) {
	t.Helper()
	runUnits(t, bin, tinyScenario(duts), allowed, func(d string, u UnitRecord, _ map[string]float64) {
		if strings.HasSuffix(d, "@vlan") {
			if !strings.HasPrefix(u.Settings["vlan check"], "passed") || !strings.Contains(u.Settings["variant: vlan"], "trunk carrying 10, 20") {
				t.Errorf("%s: vlan settings %q, check %q", d, u.Settings["variant: vlan"], u.Settings["vlan check"])
			}
		}
	})
}

// TestExecuteVLAN runs the Linux bridge with VLANs for a very short
// trial: the VLAN check passes, h2's sink counts the tagged frames, h2's
// TCP goes through its tagging. It runs where the kernel has bridge VLAN
// filtering, and is said to be unavailable where not.
func TestExecuteVLAN(t *testing.T) {
	RequireRoot(t)
	runVLAN(t, "", []string{"linux-bridge@vlan"}, map[string]string{"linux-bridge@vlan": "no bridge VLAN filtering"})
}

// TestExecuteVLANOVS is TestExecuteVLAN for ovs and ovs@vlan, in make
// test's timed phase (TEST_TIMED, as TestExecuteOVS).
func TestExecuteVLANOVS(t *testing.T) {
	RequireRoot(t)
	if err := OVSAvailable(); err != nil {
		t.Skip(err)
	}
	runVLAN(t, "", []string{"ovs", "ovs@vlan"}, nil)
}

// TestExecuteVLANTrestle is TestExecuteVLAN for trestle in both modes,
// once trestle takes VLAN ports.
func TestExecuteVLANTrestle(t *testing.T) {
	RequireRoot(t)
	bin := TrestleBinary(t)
	RequireTrestleVLANs(t, bin)
	runVLAN(t, bin, []string{"trestle:xdp", "trestle:xdp@vlan", "trestle", "trestle@vlan"}, nil)
}
