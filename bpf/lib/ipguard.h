/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ip_guard: a port bound to its IP addresses (issue 29; docs/security.md,
 * "IP guard"), as libvirt's clean-traffic, OVN's port security with
 * addresses and Cisco's dynamic ARP inspection and IP source guard bind
 * theirs. The addresses are in guard_ips, keyed by (slot, address), written
 * by the daemon. A frame from a port with TR_PORT_IP_GUARD passes only if:
 *
 *   - ARP (IPv4 over Ethernet, 6-byte and 4-byte addresses): its sender
 *     address is one of the port's (requests and replies alike; the target
 *     may be anyone), or it is 0.0.0.0 in an RFC 5227 probe: a request
 *     whose target is one of the port's;
 *   - IPv4: its source is one of the port's, or 0.0.0.0 in a DHCP client's
 *     frame (RFC 2131 4.1: UDP from port 68 to 67, not a later fragment);
 *   - IPv6: its source is one of the port's (a link-local one too: the
 *     daemon binds the EUI-64 link-local of a port's allowed_macs), or ::
 *     in duplicate address detection (RFC 4862 5.4.2: a neighbour
 *     solicitation whose target is one of the port's) or an MLD report of
 *     a host that has no address yet (RFC 3810 5.2.13: MLDv1 or v2 report);
 *     and a neighbour advertisement's target is one of the port's. The
 *     transport header is found past up to TR_GUARD_EXTHDRS extension
 *     headers (an MLD report comes behind hop-by-hop options); a frame with
 *     more is dropped, for it could hide an advertisement. A later fragment
 *     has no transport header: its source was checked.
 *
 * Other frames (neither ARP nor IP) pass: they carry no IP source; but a
 * frame with more VLAN tags than the parser reads (two in the frame's
 * bytes) is dropped, for what they hide is not read.
 *
 * The guards of the network's services (docs/security.md, "RA guard and
 * DHCP guard"), as Cisco's RA guard (RFC 6105) and DHCP snooping guard an
 * access port, and neither the Linux bridge nor Open vSwitch does: on a
 * port with TR_PORT_RA_GUARD, an ICMPv6 router advertisement (134) or
 * redirect (137) is dropped, and so is ICMPv6 hidden past more extension
 * headers than are read (RFC 7113's evasion); on one with
 * TR_PORT_DHCP_GUARD, a DHCP server's message (UDP 67 -> 68, RFC 2131 4.1;
 * a first fragment or a whole one) and a DHCPv6 server's or relay's reply
 * (UDP from 547, of type ADVERTISE, REPLY, RECONFIGURE or RELAY-REPL, RFC
 * 8415 7.3) are dropped, while a client's (from 68, from 546) passes. They
 * read the headers ip_guard reads, in the same walk, whichever of the
 * three flags the port has.
 *
 * One global function, verified once per mode, read with the context's
 * load helper (the headers may lie past what tc pulled, or in an XDP
 * frame's fragments); the pipeline calls it only for ports with one of
 * TR_PORT_GUARDS, so that the others pay one flag test on a value already
 * loaded (architecture.md rule 6).
 */
#ifndef TRESTLE_IPGUARD_H
#define TRESTLE_IPGUARD_H

#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include "maps.h"
#include "ctx.h"

#define TR_GUARD_EXTHDRS 4

/* What tr_ipguard returns: 0 (pass) or the drop's reason itself, which the
 * pipeline masks and bounds for the verifier (fewer instructions than a
 * mapping of small codes to reasons there). */
#define TR_GUARD_ARP TR_DROP_IPGUARD_ARP
#define TR_GUARD_ND TR_DROP_IPGUARD_ND
#define TR_GUARD_IP TR_DROP_IPGUARD_IP
#define TR_GUARD_RA TR_DROP_RA_GUARD
#define TR_GUARD_DHCP TR_DROP_DHCP_GUARD

/* The port flags that call tr_ipguard. */
#define TR_PORT_GUARDS (TR_PORT_IP_GUARD | TR_PORT_RA_GUARD | TR_PORT_DHCP_GUARD)

/* tr_ipguard's port: its slot in the low 16 bits, its flags above them,
 * one argument, so that the call keeps the four it had. (The entry's frame
 * is 16 bytes more when the pipeline tests three flags here instead of
 * one, whatever the argument's form: docs/performance.md, "The stack".) */
#define TR_GUARD_WHO(slot, flags) ((__u64)(slot) | (__u64)(flags) << 16)

static __always_inline int tr_guard_known(const struct tr_guard_key *k)
{
	return bpf_map_lookup_elem(&guard_ips, k) != NULL;
}

/* The IPv4 address at off into k, IPv4-mapped; 0: read. */
static __always_inline int tr_guard_load4(void *ctx, const int xdp, __u32 off, struct tr_guard_key *k)
{
	__builtin_memset(k->addr, 0, 10);
	k->addr[10] = 0xff;
	k->addr[11] = 0xff;
	return tr_load_bytes(ctx, xdp, off, &k->addr[12], 4) ? -1 : 0;
}

static __always_inline int tr_guard_zero4(const struct tr_guard_key *k)
{
	return !(k->addr[12] | k->addr[13] | k->addr[14] | k->addr[15]);
}

static __always_inline int tr_guard_zero6(const struct tr_guard_key *k)
{
	const __u32 *a = (const __u32 *)k->addr;

	return !(a[0] | a[1] | a[2] | a[3]);
}

/* An IPv6 address of the port: never an IPv4-mapped one, which is how the
 * map holds IPv4 addresses (and no IPv6 frame carries, RFC 4291 2.5.5.2). */
static __always_inline int tr_guard_known6(const struct tr_guard_key *k)
{
	const __u32 *a = (const __u32 *)k->addr;

	if (!(a[0] | a[1]) && a[2] == bpf_htonl(0xffff))
		return 0;
	return tr_guard_known(k);
}

static __always_inline int tr_guard_exthdr(__u8 nh)
{
	return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60;
}

#define TR_ARP_REQUEST 1
#define TR_IPPROTO_UDP 17
#define TR_IPPROTO_ICMPV6 58
#define TR_ICMP6_MLD_REPORT 131
#define TR_ICMP6_NS 135
#define TR_ICMP6_NA 136
#define TR_ICMP6_MLD2_REPORT 143
#define TR_ICMP6_RA 134
#define TR_ICMP6_REDIRECT 137
#define TR_DHCP6_ADVERTISE 2
#define TR_DHCP6_REPLY 7
#define TR_DHCP6_RECONFIGURE 10
#define TR_DHCP6_RELAY_REPL 13

static __always_inline int tr_guard_arp(void *ctx, const int xdp, __u32 off, struct tr_guard_key *k)
{
	__u8 h[8];

	/* htype, ptype 0x0800, hlen 6, plen 4, oper; then sha, spa (14), tha, tpa (24)
	 * (another hlen moves the addresses: Linux drops it, arp_rcv) */
	if (tr_load_bytes(ctx, xdp, off, h, 8) || h[2] != 0x08 || h[3] != 0 || h[4] != 6 || h[5] != 4 ||
	    tr_guard_load4(ctx, xdp, off + 14, k))
		return TR_GUARD_ARP;
	if (tr_guard_zero4(k) &&
	    (h[6] != 0 || h[7] != TR_ARP_REQUEST || tr_guard_load4(ctx, xdp, off + 24, k)))
		return TR_GUARD_ARP;
	return tr_guard_known(k) ? 0 : TR_GUARD_ARP;
}

static __always_inline int tr_guard_ip4(void *ctx, const int xdp, __u32 off, struct tr_guard_key *k, __u32 flags)
{
	const int ipg = flags & TR_PORT_IP_GUARD;
	__u8 h[8];
	__u32 ihl, frag;
	__u8 l4;

	if (tr_load_bytes(ctx, xdp, off, h, 8) || (h[0] >> 4) != 4 || (h[0] & 15) < 5)
		return ipg ? TR_GUARD_IP : 0; /* not IPv4 to a host: no server's message either */
	ihl = (h[0] & 15) * 4;
	frag = (__u32)(h[6] & 0x1f) << 8 | h[7];
	if (tr_load_bytes(ctx, xdp, off + 8, h, 4))
		return ipg ? TR_GUARD_IP : 0;
	l4 = h[1];
	if (ipg) {
		if (tr_guard_load4(ctx, xdp, off + 12, k))
			return TR_GUARD_IP;
		if (tr_guard_zero4(k)) {
			/* 0.0.0.0: a DHCP client's (RFC 2131 4.1), UDP 68 -> 67 */
			if (l4 != TR_IPPROTO_UDP || frag || tr_load_bytes(ctx, xdp, off + ihl, h, 4) || h[0] ||
			    h[1] != 68 || h[2] || h[3] != 67)
				return TR_GUARD_IP;
			return 0;
		}
		if (!tr_guard_known(k))
			return TR_GUARD_IP;
	}
	/* A server's message, 67 -> 68; a later fragment has no UDP header,
	 * and without its first one no host takes it. */
	if (!(flags & TR_PORT_DHCP_GUARD) || l4 != TR_IPPROTO_UDP || frag ||
	    tr_load_bytes(ctx, xdp, off + ihl, h, 4))
		return 0;
	return !h[0] && h[1] == 67 && !h[2] && h[3] == 68 ? TR_GUARD_DHCP : 0;
}

static __always_inline int tr_guard_ip6(void *ctx, const int xdp, __u32 off, struct tr_guard_key *k, __u32 flags)
{
	const int ipg = flags & TR_PORT_IP_GUARD;
	/* ICMPv6 or UDP past more extension headers than are read. */
	const int hidden = ipg ? TR_GUARD_ND : (flags & TR_PORT_RA_GUARD) ? TR_GUARD_RA : TR_GUARD_DHCP;
	__u8 h[8];
	__u32 x = off + 40;
	int unspec = 0;
	__u8 nh;

	if (tr_load_bytes(ctx, xdp, off, h, 8) || (h[0] >> 4) != 6)
		return ipg ? TR_GUARD_IP : 0;
	nh = h[6];
	if (ipg) {
		if (tr_load_bytes(ctx, xdp, off + 8, k->addr, 16))
			return TR_GUARD_IP;
		unspec = tr_guard_zero6(k);
		if (!unspec && !tr_guard_known6(k))
			return TR_GUARD_IP;
	}
	/* The transport header, past the extension headers. */
	for (int i = 0; i < TR_GUARD_EXTHDRS; i++) {
		__u8 was = nh;

		if (!tr_guard_exthdr(was))
			break;
		if (tr_load_bytes(ctx, xdp, x, h, 4))
			return hidden;
		nh = h[0];
		if (was == 44) {
			if ((h[2] << 8 | h[3]) & 0xfff8) /* a later fragment: no transport header */
				return unspec ? TR_GUARD_IP : 0;
			x += 8;
		} else if (was == 51) {
			x += ((__u32)h[1] + 2) * 4;
		} else {
			x += ((__u32)h[1] + 1) * 8;
		}
	}
	if (tr_guard_exthdr(nh))
		return hidden;
	if (nh == TR_IPPROTO_UDP && (flags & TR_PORT_DHCP_GUARD)) {
		/* source port 547, and the message type after the 8-byte header */
		if (!tr_load_bytes(ctx, xdp, x, h, 2) && h[0] == 0x02 && h[1] == 0x23 &&
		    !tr_load_bytes(ctx, xdp, x + 8, h, 1) &&
		    (h[0] == TR_DHCP6_ADVERTISE || h[0] == TR_DHCP6_REPLY || h[0] == TR_DHCP6_RECONFIGURE ||
		     h[0] == TR_DHCP6_RELAY_REPL))
			return TR_GUARD_DHCP;
	}
	if (nh != TR_IPPROTO_ICMPV6)
		return unspec ? TR_GUARD_IP : 0;
	if (tr_load_bytes(ctx, xdp, x, h, 4))
		return hidden;
	if ((flags & TR_PORT_RA_GUARD) && (h[0] == TR_ICMP6_RA || h[0] == TR_ICMP6_REDIRECT))
		return TR_GUARD_RA;
	if (!ipg)
		return 0;
	if (unspec) {
		if (h[0] == TR_ICMP6_MLD_REPORT || h[0] == TR_ICMP6_MLD2_REPORT)
			return 0;
		if (h[0] != TR_ICMP6_NS)
			return TR_GUARD_IP;
	} else if (h[0] != TR_ICMP6_NA) {
		return 0;
	}
	/* A DAD solicitation's or an advertisement's target (after type, code,
	 * checksum and 4 bytes of flags or reserved). */
	if (tr_load_bytes(ctx, xdp, x + 8, k->addr, 16))
		return TR_GUARD_ND;
	return tr_guard_known6(k) ? 0 : TR_GUARD_ND;
}

/* The frame from the port who (TR_GUARD_WHO: its slot and which of
 * TR_PORT_GUARDS it has), its payload at off after its tags, of EtherType
 * proto: 0 passes, else TR_GUARD_ARP, _ND, _IP, _RA or _DHCP. */
static __always_inline int tr_ipguard(void *ctx, const int xdp, __u64 who, __u32 off, __u32 proto)
{
	struct tr_guard_key k = {.slot = who & 0xffff};
	const __u32 flags = who >> 16;

	switch (proto) {
	case ETH_P_ARP:
		return (flags & TR_PORT_IP_GUARD) ? tr_guard_arp(ctx, xdp, off, &k) : 0;
	case ETH_P_IP:
		return tr_guard_ip4(ctx, xdp, off, &k, flags);
	case ETH_P_IPV6:
		return tr_guard_ip6(ctx, xdp, off, &k, flags);
	case ETH_P_8021Q:
	case ETH_P_8021AD:
		/* more tags than the parser reads: what they hide is not read */
		return (flags & TR_PORT_IP_GUARD) ? TR_GUARD_IP : (flags & TR_PORT_RA_GUARD) ? TR_GUARD_RA : TR_GUARD_DHCP;
	default:
		return 0;
	}
}

TR_TWIN(tr_ipguard, (__u64 who, __u32 off, __u32 proto), (who, off, proto))

#endif
