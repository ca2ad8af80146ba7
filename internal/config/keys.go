package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// The table of keys: every table of the file, and every key of each, with
// its kind, range, default and a line of help. The checker takes a key's
// type, range and values from here (walk, leaf), docs/configuration.md is
// made from it (TestKeyReference), and a test holds the defaults written
// here to what Parse fills in. What relates keys to each other (a trunk's
// native VLAN in its trunk, a patch's peer bridge, a mirror's ports) is
// code, in the file of each table.

// Kind is what a key's value is.
type Kind int

const (
	// Checked by leaf, from Min, Max and Values alone.
	KindBool     Kind = iota + 1
	KindInt           // an integer Min..Max
	KindDuration      // a Go duration in a string, Min..Max nanoseconds
	KindEnum          // a string, one of Values

	// Checked by the code of the key's table, Form saying what it takes.
	KindString // a string
	KindName   // a string, one of Values, or an integer Min..Max
	KindPorts  // a port, or a range of them in a string
	KindList   // an array of strings
	KindVLANs  // an array of VLAN IDs 1..4094 and ranges "A-B"
	KindTable  // an inline table, whose keys are the table Key.Name under this one
	KindTables // an array of tables ([[...]]), the table Key.Name under this one
)

// Key is one key of a table of the file.
type Key struct {
	Name     string
	Kind     Kind
	Min, Max int64   // KindInt, KindName; KindDuration in nanoseconds
	Values   []Value // KindEnum, KindName
	Form     string  // the other kinds: what the value is, for the reference
	Default  string  // the value when the key is left out, as the file writes it; "" for none
	Required bool
	Example  string // a value Parse takes, as the file writes it
	Help     string // one line
	// Flag: a boolean key of the datapath, the flag of enum tr_port_flags
	// (bpf/types.h, generated in internal/bpf) that the key sets in the
	// port's Policy when its value is not Default; the checker needs no
	// code for it, and the datapath writes it as it is.
	Flag tbpf.PortFlag
	// check, for a key with a Flag, says why the port cannot have the
	// flag ("" when it can), from the other keys the port sets.
	check func(portKeys) string
	// own: the table's code checks the value itself, after checks of its
	// own that come first (a patch port has no mode; a bridge that is not
	// VLAN-aware has no VLAN to match), calling leaf where the kind is one
	// leaf knows.
	own bool
	// why ends the message about a value not among Values.
	why string
	// fileOnly: a key of the file that a port added at run time does not
	// take (PortArgsHelp leaves it out).
	fileOnly bool
}

// Value is one of the values an enum takes, with what it means.
type Value struct {
	Name, Help string
}

// Table is one table of the file.
type Table struct {
	Path   string // the TOML path with no indices: "bridge.port"
	Array  bool   // written [[Path]], once per element
	Inline bool   // written as the value of its key: storm = { ... }
	Help   string
	Keys   []Key
}

// Key returns the key of t named name, or nil.
func (t *Table) Key(name string) *Key {
	for i := range t.Keys {
		if t.Keys[i].Name == name {
			return &t.Keys[i]
		}
	}
	return nil
}

// Header is the table as the file opens it: [daemon], [[bridge.port]],
// or storm = { ... } for an inline table.
func (t *Table) Header() string {
	switch {
	case t.Inline:
		return t.Path[strings.LastIndexByte(t.Path, '.')+1:] + " = { ... }"
	case t.Array:
		return "[[" + t.Path + "]]"
	}
	return "[" + t.Path + "]"
}

// Tables is every table of the file, in the order the reference lists them.
// Each is defined in the file of its table (daemon.go, bridge.go, ...).
var Tables = []*Table{&daemonTable, &bridgeTable, &portTable, &stormTable, &staticTable, &mirrorTable, &ruleTable}

// TableOf returns the table at path ("bridge.port"), or nil.
func TableOf(path string) *Table {
	for _, t := range Tables {
		if t.Path == path {
			return t
		}
	}
	return nil
}

// leaf is a value leaf has checked: b for KindBool, n for KindInt, s for
// KindEnum, d for KindDuration.
type leaf struct {
	b bool
	n int64
	s string
	d time.Duration
}

// walk checks the keys of table t, in file order, against tab: a key tab
// lacks is reported; the value of a key leaf knows is checked, unless the
// key is own; then use gets each key with the value checked (x) and
// whether it passed (ok). Keys of other kinds and own keys reach use with
// ok true, for the table's code to check.
func (c *checker) walk(t *value, field string, tab *Table, use func(k *Key, v *value, f string, x leaf, ok bool)) {
	for _, name := range t.keys {
		f, v := field+"."+keyName(name), t.vals[name]
		k := tab.Key(name)
		if k == nil {
			c.unknown(v, f)
			continue
		}
		x, ok := leaf{}, true
		if !k.own && k.Kind <= KindEnum {
			x, ok = c.leaf(k, v, f)
		}
		use(k, v, f, x, ok)
	}
}

// required reports each required key of tab that table t lacks, at the
// table's header.
func (c *checker) required(t *value, field string, tab *Table) {
	for _, k := range tab.Keys {
		if _, ok := t.vals[k.Name]; k.Required && !ok {
			c.errorf(t.line, field+"."+keyName(k.Name), "is required")
		}
	}
}

// leaf checks a value of one of the kinds that need nothing but their key:
// its type, its range, its values.
func (c *checker) leaf(k *Key, v *value, f string) (x leaf, ok bool) {
	switch k.Kind {
	case KindBool:
		x.b, ok = c.boolean(v, f)
	case KindInt:
		x.n, ok = c.integer(v, f, k.Min, k.Max)
	case KindDuration:
		if x.s, ok = c.str(v, f); !ok {
			break
		}
		d, err := time.ParseDuration(x.s)
		switch {
		case err != nil:
			c.errorf(v.line, f, "%q is not a duration such as \"300s\" or \"5m\"", x.s)
		case d < time.Duration(k.Min) || d > time.Duration(k.Max):
			c.errorf(v.line, f, "%q is out of range %s", x.s, k.Range())
		default:
			return leaf{d: d}, true
		}
		return leaf{}, false
	case KindEnum:
		if x.s, ok = c.str(v, f); ok && k.value(x.s) == nil {
			c.errorf(v.line, f, "%q is not %s%s", x.s, k.Choices(), k.why)
			return leaf{}, false
		}
	default:
		panic("config: leaf of key " + k.Name + " of a kind it does not check")
	}
	return x, ok
}

func (k *Key) value(s string) *Value {
	for i := range k.Values {
		if k.Values[i].Name == s {
			return &k.Values[i]
		}
	}
	return nil
}

// Choices writes Values as messages do: "in" (what the ports receive),
// "out" (...) or "both".
func (k *Key) Choices() string {
	var b strings.Builder
	for i, v := range k.Values {
		switch {
		case i == 0:
		case i == len(k.Values)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(v.Name))
		if v.Help != "" {
			fmt.Fprintf(&b, " (%s)", v.Help)
		}
	}
	return b.String()
}

// Range writes Min..Max as messages do: 1..4094, 1s..24h.
func (k *Key) Range() string {
	if k.Kind == KindDuration {
		return shortDuration(time.Duration(k.Min)) + ".." + shortDuration(time.Duration(k.Max))
	}
	return fmt.Sprintf("%d..%d", k.Min, k.Max)
}

// shortDuration writes d as a file would: 24h rather than 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Type says what the key takes, for the reference: the kind with its
// range or values.
func (k *Key) Type() string {
	// names writes Values quoted, then more, joined as a list is.
	names := func(more ...string) string {
		q := make([]string, 0, len(k.Values)+len(more))
		for _, v := range k.Values {
			q = append(q, strconv.Quote(v.Name))
		}
		q = append(q, more...)
		if len(q) == 1 {
			return q[0]
		}
		return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
	}
	switch k.Kind {
	case KindBool:
		return "true or false"
	case KindInt:
		return "integer " + k.Range()
	case KindDuration:
		return "duration " + k.Range() + ` ("300s", "5m")`
	case KindEnum:
		return names()
	case KindName:
		return names("an integer " + k.Range())
	}
	return k.Form
}
