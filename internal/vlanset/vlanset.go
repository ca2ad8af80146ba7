// Package vlanset writes a set of VLAN IDs in the compact form a trunk's
// VLANs take in messages, listings and JSON: "10,20,100-199". A leaf
// package shared by the configuration (internal/config), the control
// socket's wire format (internal/ctl) and the CNI plugin.
package vlanset

import (
	"fmt"
	"slices"
	"strings"
)

// Ranges writes VIDs in the compact form of messages and listings, runs
// of consecutive VIDs as ranges: "10,20,100-199"; "" for none. The input
// need not be sorted or unique.
func Ranges(vids []uint16) string {
	vids = slices.Clone(vids)
	slices.Sort(vids)
	vids = slices.Compact(vids)
	var b strings.Builder
	for i := 0; i < len(vids); {
		j := i
		for j+1 < len(vids) && vids[j+1] == vids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", vids[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", vids[i], vids[j])
		}
		i = j + 1
	}
	return b.String()
}
