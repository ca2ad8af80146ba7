package daemon

import (
	"fmt"
	"sort"
	"strings"
)

// Offload features the daemon changes on veth peers.
const (
	featGRO    = "rx-gro"                 // on: XDP redirects into the veth are delivered
	featTxCsum = "tx-checksum-ip-generic" // off: the peer's TCP survives an XDP redirect
	// off: the peer's VLAN tags travel in the frame's bytes, where XDP
	// sees them, not beside it in the skb, where an XDP redirect drops them
	// and the frame would reach another VLAN untagged.
	featTxVLAN     = "tx-vlan-hw-insert"
	featTxVLANSTag = "tx-vlan-stag-hw-insert"
)

// peerFix is what the daemon changed on one veth peer, and the settings it
// found there, so that it can give them back. It is kept per port
// interface, recorded on disk (state.go) so that a restarted daemon, or
// `trestle down` after a crash, restores them.
type peerFix struct {
	peer Peer
	// orig holds the value each changed feature had before the daemon
	// changed it; a feature is in it while the daemon holds it changed.
	orig map[string]bool
}

// ensure makes the peer's features what want says, remembering the values
// it finds the first time it changes each; features the daemon changed
// before and no longer wants go back to what they were.
func (f *peerFix) ensure(want map[string]bool) error {
	names := make([]string, 0, len(want)+len(f.orig))
	for n := range want {
		names = append(names, n)
	}
	for n := range f.orig {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	cur, err := f.peer.Features(names)
	if err != nil {
		return fmt.Errorf("peer %s: %w", f.peer, err)
	}
	change := map[string]bool{}
	orig := map[string]bool{}
	for n, v := range f.orig {
		orig[n] = v
	}
	for n, v := range want {
		c, ok := cur[n]
		if !ok || c == v {
			continue
		}
		change[n] = v
		if _, held := orig[n]; !held {
			orig[n] = c
		}
	}
	for n, was := range f.orig {
		if _, ok := want[n]; ok {
			continue
		}
		if c, ok := cur[n]; ok && c != was {
			change[n] = was
		}
		delete(orig, n)
	}
	if len(change) > 0 {
		if err := f.peer.SetFeatures(change); err != nil {
			return fmt.Errorf("peer %s: %w", f.peer, err)
		}
	}
	f.orig = orig
	return nil
}

// restore gives the peer back every setting the daemon changed.
func (f *peerFix) restore() error {
	if f == nil {
		return nil
	}
	return f.ensure(nil)
}

// changed says what the daemon holds changed, for `trestle show`.
func (f *peerFix) String() string {
	if f == nil || len(f.orig) == 0 {
		return ""
	}
	var parts []string
	for n, was := range f.orig {
		parts = append(parts, fmt.Sprintf("%s %s (was %s)", n, onOff(!was), onOff(was)))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s: %s", f.peer, strings.Join(parts, ", "))
}

// peerWant is what a port's peer needs: GRO on for a veth that must take XDP
// redirects, and TX checksum and VLAN tag offload off too for one attached
// at XDP.
func peerWant(fix, csumOff bool) map[string]bool {
	if !fix {
		return nil
	}
	w := map[string]bool{featGRO: true}
	if csumOff {
		w[featTxCsum] = false
		w[featTxVLAN] = false
		w[featTxVLANSTag] = false
	}
	return w
}
