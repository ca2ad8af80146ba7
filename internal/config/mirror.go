package config

import (
	"fmt"
	"slices"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Mirror is one [[bridge.mirror]]: copies of what Ports receive (In)
// and what the bridge sends out of them (Out) go to the span port To, a
// port of the same bridge that receives the copies and nothing else.
type Mirror struct {
	Name    string
	Ports   []string // port names, in file order
	In, Out bool     // key direction: "in", "out" or "both" (the default)
	To      string
	VLANs   []uint16 // key vlans: only frames of these VLANs (VLAN-aware bridges); nil: all
	Line    int      // line of the [[bridge.mirror]] header
}

// Direction is the mirror's direction as the file writes it.
func (m *Mirror) Direction() string {
	switch {
	case m.In && m.Out:
		return "both"
	case m.In:
		return "in"
	default:
		return "out"
	}
}

// mirrorTable is [[bridge.mirror]].
var mirrorTable = Table{
	Path:  "bridge.mirror",
	Array: true,
	Help:  "A mirror of the bridge above it: copies of what its ports receive or send go to a span port, which receives the copies and nothing else.",
	Keys: []Key{
		{Name: "name", Kind: KindString, Form: "1 to 15 of A-Z a-z 0-9 _ . -, unique in the bridge", Required: true, Example: `"tap0"`,
			Help: "The mirror's name in show."},
		{Name: "ports", Kind: KindList, Form: `a non-empty array of port names, such as ["p1", "p2"]`, Required: true, Example: `["veth-a"]`,
			Help: "The mirrored ports: ports of the bridge with an interface, each in one mirror, none a span port."},
		{Name: "direction", Kind: KindEnum, Default: `"both"`, Example: `"in"`,
			Values: []Value{{"in", "what the ports receive"}, {"out", "what the bridge sends out of them"}, {"both", ""}},
			Help:   "Which frames are copied: what the ports receive from their hosts, what the bridge sends out of them, or both."},
		{Name: "to", Kind: KindString, Form: "a port of the bridge with an interface, not mirrored, with no vlan, trunk or native", Required: true, Example: `"veth-b"`,
			Help: "The span port, which receives the copies, each with its VLAN's tag on a VLAN-aware bridge."},
		{Name: "vlans", Kind: KindVLANs, Form: `an array of VLAN IDs 1..4094 and ranges, such as [10, "20-29"]`, Example: `[10]`,
			Help: "VLAN-aware bridges only: copy only frames of these VLANs; all when left out."},
	},
}

// mirror checks one [[bridge.mirror]] against the bridge's ports and the
// mirrors before it.
func (c *checker) mirror(t *value, field string, bp *bridgePorts, before []Mirror, sites []portSite) Mirror {
	m := Mirror{In: true, Out: true, Line: t.line}
	// port names a port of this bridge with an interface, or reports why not.
	port := func(v *value, f, what string) (string, int, bool) {
		name, ok := c.str(v, f)
		if !ok {
			return "", 0, false
		}
		i, found := bp.index[name]
		switch {
		case !found:
			c.errorf(v.line, f, "%q is not a port of %s: %s", name, bp.label, what)
			return name, 0, false
		case bp.ports[i].IsPatch():
			c.errorf(v.line, f, "%q is a patch port: mirrors copy frames of ports with an interface", name)
			return name, i, false
		}
		return name, i, true
	}
	var toLine int
	c.walk(t, field, &mirrorTable, func(k *Key, v *value, f string, x leaf, ok bool) {
		switch k.Name {
		case "name":
			if s, ok := c.str(v, f); ok {
				m.Name = s
				if !validBridgeName(s) {
					c.errorf(v.line, f, "%q is not a valid mirror name: use 1 to %d of A-Z a-z 0-9 _ . -", s, maxNameLen)
				}
				for _, o := range before {
					if o.Name == s {
						c.errorf(v.line, f, "%q is already the name of the mirror at line %d", s, o.Line)
					}
				}
			}
		case "ports":
			if v.kind != unstable.Array || len(v.elems) == 0 {
				c.errorf(v.line, f, `must be a non-empty array of port names, such as ["p1", "p2"]`)
				break
			}
			for i, e := range v.elems {
				ef := fmt.Sprintf("%s[%d]", f, i)
				name, _, ok := port(e, ef, "a mirror copies frames of its own bridge's ports")
				if !ok {
					continue
				}
				if slices.Contains(m.Ports, name) {
					c.errorf(e.line, ef, "%q is listed twice", name)
					continue
				}
				taken := false
				for _, o := range before {
					if slices.Contains(o.Ports, name) {
						c.errorf(e.line, ef, "%q is already mirrored by mirror %q at line %d: a port has one mirror", name, o.Name, o.Line)
						taken = true
					}
					if o.To == name {
						c.errorf(e.line, ef, "%q is the span port of mirror %q at line %d: a span port is not mirrored", name, o.Name, o.Line)
						taken = true
					}
				}
				if !taken {
					m.Ports = append(m.Ports, name)
				}
			}
		case "direction":
			if ok {
				m.In, m.Out = x.s != "out", x.s != "in"
			}
		case "to":
			name, i, ok := port(v, f, "the span port is a [[bridge.port]] of the mirror's bridge")
			m.To, toLine = name, v.line
			if !ok {
				break
			}
			for _, o := range before {
				if slices.Contains(o.Ports, name) {
					c.errorf(v.line, f, "%q is mirrored by mirror %q at line %d: a span port receives copies and nothing else", name, o.Name, o.Line)
				}
			}
			for _, k := range []string{"vlan", "trunk", "native", "qinq"} {
				if kv, set := sites[i].t.vals[k]; set && (k != "qinq" || bp.ports[i].Has(flagQinQ)) {
					c.errorf(kv.line, sites[i].field+"."+keyName(k), "port %q is the span port of mirror %q: it takes every VLAN tagged, and has no %s", name, m.Name, k)
				}
			}
		case "vlans":
			if !bp.aware {
				c.errorf(v.line, f, "%s is not VLAN-aware: no port has vlan or trunk", bp.label)
				break
			}
			if vids, ok := c.trunk(v, f); ok {
				m.VLANs = vids
			}
		}
	})
	c.required(t, field, &mirrorTable)
	if m.To != "" && slices.Contains(m.Ports, m.To) {
		c.errorf(toLine, field+".to", "%q is also one of the mirror's ports: the span port receives the copies and nothing else", m.To)
	}
	return m
}

// spanStatics reports static entries on span ports, which send nothing but
// copies.
func (c *checker) spanStatics(b *Bridge, statics *value, field string) {
	if statics == nil {
		return
	}
	for i, st := range b.Static {
		if mi := b.SpanPort(st.Port); mi != nil {
			line := st.Line
			if i < len(statics.elems) {
				if pv, ok := statics.elems[i].vals["port"]; ok {
					line = pv.line
				}
			}
			c.errorf(line, fmt.Sprintf("%s.static[%d].port", field, i), "%q is the span port of mirror %q: no station lives there", st.Port, mi.Name)
		}
	}
}
