package lab

import "testing"

// TestCapsOf: every DUT ParseDUT knows declares its kind's capabilities,
// and a name with a mode and knobs has its kind's.
func TestCapsOf(t *testing.T) {
	for _, n := range DUTNames {
		v, err := ParseSpec(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := dutCaps[v.Kind]; !ok {
			t.Errorf("%s: its kind %s declares no capabilities (dutCaps)", n, v.Kind)
		}
	}
	if c := CapsOf("trestle:xdp@vlan,bin=/tmp/x"); !c.Subject || !c.Build || !c.Daemon {
		t.Errorf("trestle:xdp@vlan: %+v", c)
	}
	if c := CapsOf("linux-bridge:nft@rules=10"); c.Subject || c.Build || c.Daemon {
		t.Errorf("linux-bridge:nft@rules=10: %+v", c)
	}
	if c := CapsOf("ovs@veth"); c.Subject || !c.Daemon {
		t.Errorf("ovs@veth: %+v", c)
	}
}
