package overlay

// Sticky MACs (docs/overlay.md, "Sticky MACs"): an address bound by the
// operator (a static entry, a locked port's allowed_macs) is advertised
// with the sticky bit of the MAC Mobility extended community (RFC 7432
// section 7.7), so that no VTEP of the fabric takes it when a frame with
// it shows up there.
//
// What FRR 8.4 reads and writes (zebra/rt_netlink.c):
//
//   - a local MAC is sticky when its bridge entry has NTF_STICKY
//     (netlink_macfdb_change); nothing else says so (NUD_NOARP does not,
//     and extern-learned or not does not matter). The kernel ignores
//     NTF_STICKY on an extern-learned write, so a static address is
//     written as a static sticky entry of the advertise port
//     (NTF_MASTER|NTF_STICKY, NUD_NOARP: `bridge fdb replace MAC dev tadN
//     master static sticky`), any other as an extern-learned one. Such an
//     entry keeps its sticky flag when an extern-learned write replaces
//     it, so one that is static no more is deleted first (a withdrawal and
//     a new route, rare: a static removed);
//   - bgpd advertises a sticky MAC with the sticky bit, and a VTEP that
//     receives one installs it (netlink_macfdb_update_ctx) as a static
//     sticky entry (NTF_MASTER|NTF_SELF|NTF_STICKY, NUD_NOARP), not an
//     extern-learned one: the bridge's entry on the vxlan port with
//     NTF_STICKY, which Manager.entry takes as zebra's as it takes an
//     extern-learned one. zebra ignores a local learn of a remote sticky
//     MAC ("already learnt as remote sticky MAC"), and the Linux bridge
//     does not move a sticky entry.
//
// Remote.Sticky and Change.Sticky carry it to the daemon, which holds a
// sticky remote MAC as a static entry of the overlay port.
