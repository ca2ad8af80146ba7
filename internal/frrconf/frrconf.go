// Package frrconf is the FRR configuration trestle's overlay is run with in
// its tests (tests/overlay) and its lab (internal/lab's overlay scenario):
// zebra's, and bgpd's for EVPN with every other site a neighbour, with
// timers that bring a session up in seconds; and the arguments that give
// each daemon its own files in a directory, so that several sites run on
// one machine. docs/overlay.md shows the configuration a host would use.
package frrconf

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Peer is a BGP neighbour: its address and AS.
type Peer struct {
	Addr string
	ASN  uint32
}

// Site is one FRR instance: its name (in the hostnames), AS, router id
// (the VTEP) and neighbours.
type Site struct {
	Name     string
	ASN      uint32
	RouterID string
	Peers    []Peer
}

// Zebra is zebra's configuration.
func Zebra(s Site) string { return fmt.Sprintf("hostname zebra-%s\n", s.Name) }

// BGPd is bgpd's configuration: EVPN (advertise-all-vni) with each peer,
// iBGP or eBGP by the peers' AS. With an eBGP peer, no policy is asked of
// the sessions (FRR asks one of eBGP sessions by default), and the route
// targets are RFC 8365's, which leave the AS out (docs/overlay.md).
//
// Graceful restart (RFC 4724) with the forwarding state preserved: a
// bgpd that stops says no Cease to its graceful peers, which keep its
// routes (stale) until it is back and has sent End-of-RIB, so that the
// other hosts keep forwarding to this one across its FRR restart; this
// host's own entries are kept by trestle meanwhile (docs/overlay.md, "FRR
// restarts").
func BGPd(s Site) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hostname bgpd-%s\nrouter bgp %d\n bgp router-id %s\n no bgp default ipv4-unicast\n", s.Name, s.ASN, s.RouterID)
	b.WriteString(" bgp graceful-restart\n bgp graceful-restart preserve-fw-state\n")
	ebgp := slices.ContainsFunc(s.Peers, func(p Peer) bool { return p.ASN != s.ASN })
	if ebgp {
		b.WriteString(" no bgp ebgp-requires-policy\n")
	}
	for _, p := range s.Peers {
		fmt.Fprintf(&b, " neighbor %[1]s remote-as %[2]d\n neighbor %[1]s timers 3 9\n neighbor %[1]s timers connect 1\n neighbor %[1]s advertisement-interval 0\n", p.Addr, p.ASN)
	}
	b.WriteString(" address-family l2vpn evpn\n")
	for _, p := range s.Peers {
		fmt.Fprintf(&b, "  neighbor %s activate\n", p.Addr)
	}
	b.WriteString("  advertise-all-vni\n")
	if ebgp {
		b.WriteString("  autort rfc8365-compatible\n")
	}
	b.WriteString(" exit-address-family\n")
	return b.String()
}

// ZebraSocket is zebra's API socket in dir, which bgpd connects to.
func ZebraSocket(dir string) string { return filepath.Join(dir, "zserv.api") }

// Args are the arguments zebra and bgpd share, for a site whose files are
// in dir: zebra's socket and the vty sockets there, frr's user and group,
// no vty port, the log on stdout. Each daemon is given its config (-f) and
// pid file (-i) besides.
func Args(dir string) []string {
	return []string{"-z", ZebraSocket(dir), "--vty_socket", dir, "-u", "frr", "-g", "frr", "-P", "0", "--log", "stdout"}
}
