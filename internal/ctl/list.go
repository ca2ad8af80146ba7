package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/trestle/trestle/internal/vlanset"
)

// List is a list of the JSON contract: always an array, [] when empty,
// never null or left out, so that a script reads .ports[] or
// .allowed_macs | length without asking first whether it is there.
type List[T any] []T

func (l List[T]) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]T(l))
}

// VLANList is a set of VLANs (a trunk's, a mirror's), kept as its VLAN IDs
// in order. In JSON it is written as the config file writes it, an array
// of IDs and "A-B" ranges: [10, "20-29"]; [] when empty. It reads that
// form, and the string "10,20-29" that daemons of earlier releases sent.
type VLANList []uint16

// String is the list as messages and tables write it: "10,20-29".
func (v VLANList) String() string { return vlanset.Ranges(v) }

func (v VLANList) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, r := range strings.Split(v.String(), ",") {
		if r == "" {
			continue
		}
		if i > 0 {
			b.WriteByte(',')
		}
		if strings.Contains(r, "-") {
			b.WriteString(strconv.Quote(r))
		} else {
			b.WriteString(r)
		}
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

func (v *VLANList) UnmarshalJSON(data []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		var s string
		if json.Unmarshal(data, &s) != nil {
			return fmt.Errorf("a VLAN list: want an array of VLAN IDs and \"A-B\" ranges, got %s", data)
		}
		items = nil
		for r := range strings.SplitSeq(s, ",") {
			if r = strings.TrimSpace(r); r != "" {
				items = append(items, json.RawMessage(strconv.Quote(r)))
			}
		}
	}
	out := VLANList{}
	for _, it := range items {
		var n uint16
		if json.Unmarshal(it, &n) == nil {
			if n < 1 || n > 4094 {
				return fmt.Errorf("a VLAN list: %d is not a VLAN (1-4094)", n)
			}
			out = append(out, n)
			continue
		}
		var r string
		if err := json.Unmarshal(it, &r); err != nil {
			return fmt.Errorf("a VLAN list: %s is neither a VLAN ID nor a range \"A-B\"", it)
		}
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 12)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.ParseUint(strings.TrimSpace(hi), 10, 12)
		}
		if err1 != nil || err2 != nil || a < 1 || a > b || b > 4094 {
			return fmt.Errorf("a VLAN list: %q is neither a VLAN ID nor a range \"A-B\"", r)
		}
		for id := a; id <= b; id++ {
			out = append(out, uint16(id))
		}
	}
	slices.Sort(out)
	*v = slices.Compact(out)
	return nil
}
