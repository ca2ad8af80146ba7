package config

import (
	"bytes"
	"fmt"
	"net"
)

// Static is an FDB entry that is never learned over nor aged out.
type Static struct {
	MAC  net.HardwareAddr // 6-byte unicast, non-zero
	Port string           // PortName of a port of the same bridge
	// The entry's VLAN. On a VLAN-aware bridge 1..4094, one its port
	// carries, and the port's PVID when the file has none; elsewhere 0 =
	// untagged.
	VLAN uint16
	Line int // line of the [[bridge.static]] header
}

// staticTable is [[bridge.static]].
var staticTable = Table{
	Path:  "bridge.static",
	Array: true,
	Help:  "A static FDB entry of the bridge above it: never learned over, never aged out.",
	Keys: []Key{
		{Name: "mac", Kind: KindString, Form: "a unicast MAC address, not zero, such as \"02:00:00:00:00:01\"", Required: true, Example: `"02:00:00:00:00:09"`,
			Help: "The station's address; one entry for it in a VLAN."},
		{Name: "port", Kind: KindString, Form: "a port of the bridge: its interface, or a patch port's name", Required: true, Example: `"veth-a"`,
			Help: "Where the station is; not a mirror's span port."},
		{Name: "vlan", Kind: KindInt, Min: 0, Max: maxVLAN, Default: "0; the port's untagged VLAN on a VLAN-aware bridge", Example: "0",
			Help: "The entry's VLAN: on a VLAN-aware bridge 1..4094, one its port carries; elsewhere 0, untagged."},
	},
}

// stationMAC parses a station's address: 6 bytes, unicast (else the
// message ends with unicast, which says why), not zero. why is "" when it is one.
func stationMAC(s, unicast string) (mac net.HardwareAddr, why string) {
	// ParseMAC also takes 02-00-… and 0200.0000.0001, which is
	// harmless; the length check drops its EUI-64 and InfiniBand forms.
	mac, err := net.ParseMAC(s)
	switch {
	case err != nil || len(mac) != 6:
		return nil, fmt.Sprintf("%q is not a MAC address such as 02:00:00:00:00:01", s)
	case mac[0]&1 != 0:
		return nil, fmt.Sprintf("%q is a multicast address; %s", s, unicast)
	case bytes.Equal(mac, make([]byte, 6)):
		return nil, fmt.Sprintf("%q is the zero address", s)
	}
	return mac, ""
}

// static checks one static entry against the ports of its bridge; seen maps
// "mac/vlan" of earlier entries to their lines.
func (c *checker) static(t *value, field string, bp *bridgePorts, seen map[string]int) Static {
	s := Static{Line: t.line}
	macOK, vlanOK := false, true
	c.walk(t, field, &staticTable, func(k *Key, v *value, f string, x leaf, ok bool) {
		switch k.Name {
		case "mac":
			str, ok := c.str(v, f)
			if !ok {
				break
			}
			if mac, why := stationMAC(str, "static entries must be unicast"); why != "" {
				c.errorf(v.line, f, "%s", why)
			} else {
				s.MAC, macOK = mac, true
			}
		case "port":
			str, ok := c.str(v, f)
			if !ok {
				break
			}
			if _, ok := bp.index[str]; !ok {
				c.errorf(v.line, f, "%q is not a port of %s", str, bp.label)
			}
			s.Port = str
		case "vlan":
			s.VLAN, vlanOK = uint16(x.n), ok
		}
	})
	c.required(t, field, &staticTable)
	if bp.aware && vlanOK {
		vlanOK = c.staticVLAN(t, field, bp, &s)
	}
	if macOK && vlanOK {
		key := fmt.Sprintf("%s/%d", s.MAC, s.VLAN)
		line := t.vals["mac"].line
		if prev, dup := seen[key]; dup {
			c.errorf(line, field+".mac", "%s vlan %d is already a static entry at line %d", s.MAC, s.VLAN, prev)
		} else {
			seen[key] = line
		}
	}
	return s
}

// staticVLAN checks the VLAN of static entry s on a VLAN-aware bridge, and
// fills in its port's PVID when the file has none. It returns false when the
// VLAN is wrong or cannot be known.
func (c *checker) staticVLAN(t *value, field string, bp *bridgePorts, s *Static) bool {
	v, hasVLAN := t.vals["vlan"]
	if hasVLAN && s.VLAN == 0 {
		c.errorf(v.line, field+".vlan", "0 (untagged) is not a VLAN of VLAN-aware %s: use 1..%d, or leave vlan out for the port's untagged VLAN", bp.label, maxVLAN)
		return false
	}
	i, known := bp.index[s.Port]
	if !known || !bp.vlans[i].ok {
		return false // the port is missing or wrong, which is reported already
	}
	p := &bp.ports[i]
	switch {
	case hasVLAN && !p.Carries(s.VLAN):
		c.errorf(v.line, field+".vlan", "VLAN %d is not carried by port %q (%s)", s.VLAN, p.PortName(), describe(p))
		return false
	case hasVLAN:
		return true
	case p.PVID() == 0:
		c.errorf(t.line, field+".vlan", "port %q is a trunk with no native VLAN: set vlan", p.PortName())
		return false
	}
	s.VLAN = p.PVID()
	return true
}
