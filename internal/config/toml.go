package config

import (
	"errors"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// This file turns TOML text into a tree of values that remember the line
// they were defined on. go-toml's decoder does not report positions for
// values it decodes successfully, so validation errors could not name a
// line; its unstable parser does give byte ranges for keys, and this file
// walks that AST to assemble tables the way the TOML spec does.

// A value is one TOML value and the line an error about it should name: the
// line of its key, of its table header, or of the element in an array.
type value struct {
	kind  unstable.Kind // String, Integer, Bool, Float, a date/time, Array or Table
	line  int
	data  string            // scalars: the decoded string or the raw token ("0x10", "true")
	keys  []string          // Table: keys in the order they were defined
	vals  map[string]*value // Table
	elems []*value          // Array, including arrays of tables
}

func newTable(line int) *value {
	return &value{kind: unstable.Table, line: line, vals: map[string]*value{}}
}

// set adds key to table t, keeping definition order.
func (t *value) set(key string, v *value) {
	if _, ok := t.vals[key]; !ok {
		t.keys = append(t.keys, key)
	}
	t.vals[key] = v
}

// syntaxError is a TOML error with the line it was found on.
type syntaxError struct {
	line int
	msg  string
}

// parseTOML checks data against the whole TOML spec with go-toml's decoder
// first, because the unstable parser alone does not reject duplicate keys or
// redefined tables. Only a document that passes is walked into a tree, so
// the walk can assume it is well formed.
func parseTOML(data []byte) (*value, *syntaxError) {
	var generic map[string]any
	if err := toml.Unmarshal(data, &generic); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, _ := de.Position()
			return nil, &syntaxError{line: line, msg: strings.TrimPrefix(de.Error(), "toml: ")}
		}
		return nil, &syntaxError{msg: strings.TrimPrefix(err.Error(), "toml: ")}
	}

	b := &treeBuilder{root: newTable(0), lines: newLineIndex(data)}
	b.p.Reset(data)
	cur := b.root
	for b.p.NextExpression() {
		e := b.p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			keys, line := b.keyPath(e)
			cur = b.header(keys, line, e.Kind == unstable.ArrayTable)
		case unstable.KeyValue:
			b.keyValue(cur, e)
		}
	}
	if err := b.p.Error(); err != nil {
		// Not reached after the decoder accepted the document, but an
		// error must never be lost.
		se := &syntaxError{msg: err.Error()}
		var pe *unstable.ParserError
		if errors.As(err, &pe) {
			se.msg = pe.Message
			se.line = b.lineOfSlice(data, pe.Highlight)
		}
		return nil, se
	}
	return b.root, nil
}

type treeBuilder struct {
	p     unstable.Parser
	root  *value
	lines lineIndex
}

// keyPath returns the parts of a (possibly dotted) key of a table header or
// key/value expression, and the line of its last part.
func (b *treeBuilder) keyPath(n *unstable.Node) ([]string, int) {
	var keys []string
	line := 0
	it := n.Key()
	for it.Next() {
		k := it.Node()
		keys = append(keys, string(k.Data))
		line = b.lines.line(int(k.Raw.Offset))
	}
	return keys, line
}

// header opens the table named by a [a.b] or [[a.b]] header and returns it.
func (b *treeBuilder) header(keys []string, line int, arrayTable bool) *value {
	t := b.root
	for _, k := range keys[:len(keys)-1] {
		t = descend(t, k, line)
	}
	last := keys[len(keys)-1]
	if arrayTable {
		arr, ok := t.vals[last]
		if !ok || arr.kind != unstable.Array {
			arr = &value{kind: unstable.Array, line: line}
			t.set(last, arr)
		}
		elem := newTable(line)
		arr.elems = append(arr.elems, elem)
		return elem
	}
	tbl, ok := t.vals[last]
	if !ok || tbl.kind != unstable.Table {
		tbl = newTable(line)
		t.set(last, tbl)
	}
	// A table first created implicitly by [a.b.c] is defined here.
	tbl.line = line
	return tbl
}

// descend returns the table under key k of t, creating it if needed. A key
// naming an array of tables means its last element, as in the TOML spec.
func descend(t *value, k string, line int) *value {
	v, ok := t.vals[k]
	switch {
	case !ok:
		v = newTable(line)
		t.set(k, v)
	case v.kind == unstable.Array && len(v.elems) > 0 && v.elems[len(v.elems)-1].kind == unstable.Table:
		v = v.elems[len(v.elems)-1]
	case v.kind != unstable.Table:
		// The decoder has rejected this already; keep going harmlessly.
		v = newTable(line)
	}
	return v
}

// keyValue stores `a.b = value` into table t.
func (b *treeBuilder) keyValue(t *value, kv *unstable.Node) {
	keys, line := b.keyPath(kv)
	for _, k := range keys[:len(keys)-1] {
		t = descend(t, k, line)
	}
	t.set(keys[len(keys)-1], b.value(kv.Value(), line))
}

// value converts one AST value. line is where errors about it point: its
// key for a key/value, its own line for an array element.
func (b *treeBuilder) value(n *unstable.Node, line int) *value {
	switch n.Kind {
	case unstable.Array:
		arr := &value{kind: unstable.Array, line: line}
		it := n.Children()
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			arr.elems = append(arr.elems, b.value(c, b.elemLine(c, line)))
		}
		return arr
	case unstable.InlineTable:
		tbl := newTable(line)
		it := n.Children()
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				b.keyValue(tbl, c)
			}
		}
		return tbl
	default:
		return &value{kind: n.Kind, line: line, data: string(n.Data)}
	}
}

// elemLine is the line of an array element. Arrays carry no range of their
// own (only scalars, keys and the '{' of inline tables do), so a nested
// array borrows the line of its first element, or of its parent.
func (b *treeBuilder) elemLine(n *unstable.Node, parent int) int {
	if n.Kind == unstable.Array {
		if c := n.Child(); c != nil {
			return b.elemLine(c, parent)
		}
		return parent
	}
	return b.lines.line(int(n.Raw.Offset))
}

// lineOfSlice finds the line of a sub-slice of data (a parser error's
// highlight) without the panics of Parser.Range on an empty highlight.
func (b *treeBuilder) lineOfSlice(data, sub []byte) int {
	off := cap(data) - cap(sub)
	if sub == nil || off < 0 || off > len(data) {
		return 0
	}
	return b.lines.line(off)
}

// lineIndex maps byte offsets to 1-based lines. Parser.Shape would do, but
// it rescans the document from the start on every call.
type lineIndex []int // offsets of every '\n'

func newLineIndex(data []byte) lineIndex {
	var idx lineIndex
	for i, c := range data {
		if c == '\n' {
			idx = append(idx, i)
		}
	}
	return idx
}

func (idx lineIndex) line(offset int) int {
	// Newlines strictly before offset, plus one.
	return sort.SearchInts(idx, offset) + 1
}
