package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/trestle/trestle/internal/vlanset"
)

// VLANRanges writes VIDs in the compact form of messages and listings
// (vlanset.Ranges): "10,20,100-199".
func VLANRanges(vids []uint16) string { return vlanset.Ranges(vids) }

// trunk checks the VLAN list of a trunk port and returns its VIDs, sorted,
// or nil and false when any element is wrong, so that later checks against
// the list do not report a part of it.
func (c *checker) trunk(v *value, field string) (vids []uint16, ok bool) {
	if v.kind != unstable.Array {
		c.errorf(v.line, field, `must be an array of VLAN IDs and ranges such as [10, 20, "100-199"]`)
		return nil, false
	}
	if len(v.elems) == 0 {
		c.errorf(v.line, field, "is empty: list the VLANs the trunk carries")
		return nil, false
	}
	ok = true
	var owner [maxVLAN + 1]int // VID -> 1 + index of the element that lists it
	bounds := make([][2]int, len(v.elems))
	for i, e := range v.elems {
		ef := fmt.Sprintf("%s[%d]", field, i)
		lo, hi, eok := c.vlanRange(e, ef)
		if !eok {
			ok = false
			continue
		}
		bounds[i] = [2]int{lo, hi}
		// Report the first element this one overlaps, and take the VIDs
		// no element had yet, so later overlaps with it are named too.
		reported := false
		for vid := lo; vid <= hi; vid++ {
			if j := owner[vid] - 1; j < 0 {
				owner[vid] = i + 1
				vids = append(vids, uint16(vid))
			} else if !reported {
				verb := "overlaps"
				if bounds[j] == bounds[i] {
					verb = "repeats"
				}
				c.errorf(e.line, ef, "%s %s %s", spell(e), verb, spell(v.elems[j]))
				reported, ok = true, false
			}
		}
	}
	if !ok {
		return nil, false
	}
	slices.Sort(vids)
	return vids, true
}

// vlanRange checks one trunk element: a VID, or a string "A-B" or "A".
func (c *checker) vlanRange(e *value, field string) (lo, hi int, ok bool) {
	switch e.kind {
	case unstable.Integer:
		n, ok := c.integer(e, field, 1, maxVLAN)
		return int(n), int(n), ok
	case unstable.String:
		a, b, isRange := strings.Cut(e.data, "-")
		if !isRange {
			b = a
		}
		if !allDigits(a) || !allDigits(b) {
			c.errorf(e.line, field, "%q is not a VLAN ID or range such as \"100-199\"", e.data)
			return 0, 0, false
		}
		for _, end := range []string{a, b} {
			if n, err := strconv.Atoi(end); err != nil || n < 1 || n > maxVLAN {
				c.errorf(e.line, field, "%q: %s is out of range 1..%d", e.data, end, maxVLAN)
				return 0, 0, false
			}
		}
		lo, _ = strconv.Atoi(a)
		hi, _ = strconv.Atoi(b)
		if lo > hi {
			c.errorf(e.line, field, "%q is backwards: write \"%d-%d\"", e.data, hi, lo)
			return 0, 0, false
		}
		return lo, hi, true
	}
	c.errorf(e.line, field, `must be a VLAN ID or a range such as "100-199"`)
	return 0, 0, false
}

// spell writes a trunk element as the file does: 20 or "10-29".
func spell(e *value) string {
	if e.kind == unstable.String {
		return strconv.Quote(e.data)
	}
	return e.data
}

// describe names what a port of a VLAN-aware bridge carries.
func describe(p *Port) string {
	if !p.IsTrunk() {
		return fmt.Sprintf("access VLAN %d", p.VLAN)
	}
	s := "trunk VLANs " + VLANRanges(p.Trunk)
	if p.Native != 0 {
		s += fmt.Sprintf(", native %d", p.Native)
	}
	return s
}
