/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Overlay ports (docs/overlay.md): a port on a vxlan device, reached at tc
 * by redirect, and from XDP through its xdp way in (trestle_via). What leaves by one must fit the device's MTU once encapsulated: a
 * frame (or a flood's copy) whose L2 payload is longer, or a GSO frame
 * whose segments are, is dropped with TR_DROP_OVERLAY_MTU and counted on
 * the overlay port, never handed to the device to be fragmented in the
 * underlay. The MTU is the device's own, read by bpf_check_mtu as the
 * frame leaves: the control plane writes none.
 */
#ifndef TRESTLE_OVERLAY_H
#define TRESTLE_OVERLAY_H

#include <linux/if_ether.h>
#include "maps.h"
#include "parse.h"
#include "port.h"

/*
 * Whether the frame of skb, as it is now (tagged as it will leave), may
 * not leave by the port on ifindex: an overlay port, and the frame too
 * long for it (its length past the Ethernet header above the device's
 * MTU; for a GSO frame, a segment's network length). 1: the caller sends
 * nothing, and drops it (TR_DROP_OVERLAY_MTU, on the overlay port). An
 * error of the helper (no such device) is 0: the redirect finds nothing
 * there either. A global function, verified once, whose frame is small:
 * the walk's deepest chain of calls reaches it, and each way out to a port
 * of a bridge with an overlay port asks it (a flag of the port or the
 * bridge tested first).
 */
__attribute__((noinline)) int tr_overlay_too_long(struct __sk_buff *skb, __u32 ifindex)
{
	const struct tr_port *o;
	__u32 mtu = 0;

	if (!skb)
		return 0;
	o = tr_port_of(ifindex);
	if (!o || !(o->flags & TR_PORT_OVERLAY))
		return 0;
	return bpf_check_mtu(skb, ifindex, &mtu, 0, BPF_MTU_CHK_SEGS) > 0;
}

/*
 * VXLAN encapsulation in the datapath (docs/overlay.md, "Encapsulation in
 * the datapath"): a known unicast frame to a station behind an overlay
 * port, whose outer headers the control plane wrote (encaps), is
 * encapsulated here and redirected straight into the underlay device: in
 * XDP without the socket buffer of the xdp way in, at tc without the vxlan
 * device, whose FDB zebra empties while FRR restarts.
 */

/* What tr_vxlan_encap and tr_vxlan_encap_tc did with the frame. */
enum tr_encap_result {
	TR_ENCAP_NONE,     /* nothing: no entry (or one XDP may not use, or a frame tc cannot
			    * encapsulate); the frame, unchanged, takes the way in (XDP) or the
			    * vxlan device (tc, which asked its MTU: it fits) */
	TR_ENCAP_SENT,     /* encapsulated and redirected: the caller counts it */
	TR_ENCAP_TOO_LONG, /* too long for the overlay: the caller drops it (TR_DROP_OVERLAY_MTU,
			    * on the overlay port) */
	TR_ENCAP_LOST,     /* tc: changed half-way and not put back (its tag, which the kernel
			    * could not write again): the caller drops it */
};

/* The UDP source port of a frame's outer header (RFC 7348 5: a hash of the
 * inner headers, in 49152-65535, for the underlay's ECMP): the inner
 * addresses and, for an IPv4 frame (untagged or with one tag in its
 * bytes), its addresses and the 4 bytes after the header's first 20 (the
 * ports of TCP or UDP without options). The same in both modes: at tc a
 * tag the kernel holds outside the bytes is not hashed, nor is it in XDP.
 * No helper call. eth is bounds-checked for 14. */
static __always_inline __u32 tr_encap_sport(const struct ethhdr *eth, const void *data_end)
{
	const __u32 *w = (const void *)eth;
	const __u8 *l3 = (const void *)(eth + 1);
	__u16 proto = eth->h_proto;
	__u32 h;

	h = w[0] ^ w[1] ^ w[2];
	if (proto == bpf_htons(ETH_P_8021Q) && l3 + 4 <= (const __u8 *)data_end) {
		proto = *(const __u16 *)(l3 + 2);
		l3 += 4;
	}
	if (proto == bpf_htons(ETH_P_IP) && l3 + 24 <= (const __u8 *)data_end) {
		const __u32 *ip = (const void *)l3;

		h ^= ip[3] * 0x9e3779b1 ^ ip[4] ^ ip[5];
	}
	h *= 0x9e3779b1;
	h ^= h >> 16;
	return 0xc000 | (h & 0x3fff);
}

/* Writes entry e's outer header at o, for a packet of len bytes with it,
 * and the UDP source port sport: the template (6 words and a half-word),
 * then IPv4's tot_len and check (at 16, 24: ~ the folded sum) and UDP's
 * source and len (at 34, 38; its check stays 0). o is bounds-checked for
 * TR_ENCAP_HLEN. */
static __always_inline void tr_encap_write(__u8 *o, const struct tr_encap *e, __u32 len, __u32 sport)
{
	__u32 sum;

	for (int i = 0; i < 6; i++)
		((__u64 *)o)[i] = ((const __u64 *)e->hdr)[i];
	((__u16 *)o)[24] = ((const __u16 *)e->hdr)[24];
	sum = e->csum + ((len - 14) & 0xffff);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	*(__u16 *)(o + 16) = bpf_htons(len - 14);
	*(__u16 *)(o + 24) = bpf_htons(~sum & 0xffff);
	*(__u16 *)(o + 34) = bpf_htons(sport);
	*(__u16 *)(o + 38) = bpf_htons(len - 34);
}

/*
 * XDP: encapsulates the frame of ctx for its destination if the control
 * plane wrote its outer headers (encaps, by bridge | vlan << 16 in key_bv
 * and the destination address) for XDP too, and redirects it into the
 * underlay device. The frame, as it is now (tagged as it will leave), must
 * fit the MTU of the overlay port's vxlan device (vxlan_ifindex). No
 * headroom is TR_ENCAP_NONE. A global function, verified once, with a
 * small frame.
 */
__attribute__((noinline)) int tr_vxlan_encap(struct xdp_md *ctx, __u32 key_bv, __u32 vxlan_ifindex)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tr_encap_key k = { .bridge = key_bv, .vlan = key_bv >> 16 };
	const struct tr_encap *e;
	__u32 mtu = 0, sport;
	__u8 *o;

	if ((void *)(eth + 1) > data_end)
		return TR_ENCAP_NONE;
	__builtin_memcpy(k.mac, eth->h_dest, 6);
	e = bpf_map_lookup_elem(&encaps, &k);
	if (!e || (e->flags & TR_ENCAP_NO_XDP))
		return TR_ENCAP_NONE;
	if (bpf_check_mtu(ctx, vxlan_ifindex, &mtu, 0, 0) > 0)
		return TR_ENCAP_TOO_LONG;
	sport = tr_encap_sport(eth, data_end);
	if (bpf_xdp_adjust_head(ctx, -TR_ENCAP_HLEN))
		return TR_ENCAP_NONE;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	o = data;
	if ((void *)(o + TR_ENCAP_HLEN) > data_end)
		return TR_ENCAP_TOO_LONG; /* cannot be: the frame grew by as much */
	tr_encap_write(o, e, data_end - data, sport);
	bpf_redirect(e->ifindex, 0);
	return TR_ENCAP_SENT;
}

/*
 * tc: as tr_vxlan_encap, the kernel's way for a socket buffer
 * (bpf_skb_adjust_room with the ENCAP flags, as the kernel's selftest
 * test_tc_tunnel does): the skb is told it is a VXLAN packet, so that a
 * GSO skb (a TCP stream from a veth's host stack) is segmented, inner and
 * outer headers both, where the underlay device needs it, and an inner
 * checksum left to finish (CHECKSUM_PARTIAL) is finished inside. The GSO
 * size stays (FIXED_GSO): each segment was asked against the vxlan
 * device's MTU (BPF_MTU_CHK_SEGS, as tr_overlay_too_long does), and so
 * fits the underlay's with the outer 50 bytes, as the vxlan device's own
 * do.
 *
 * The frame's tag, held outside its bytes at tc (or in them, where the
 * kernel left a frame so: a test run's), goes inside the inner frame, as
 * the vxlan device puts it (vlan_hwaccel_push_inside): the encapsulated
 * frame carries what the vxlan device would get. What tc cannot
 * encapsulate takes the vxlan device as before (TR_ENCAP_NONE, unchanged):
 * a frame that is not IPv4 or IPv6 behind at most one tag (the kernel's
 * bpf_skb_adjust_room takes no other: ARP, say, or QinQ), an skb the
 * kernel already encapsulated.
 *
 * The outer header is the entry's, as XDP writes it (the same source
 * port for the same flow); the skb's mark and priority stay, as through
 * the vxlan device of the same namespace; a checksum over the whole
 * packet (CHECKSUM_COMPLETE, a NIC's) is kept true with the bytes
 * written. A global function, verified once, with a small frame.
 */
__attribute__((noinline)) int tr_vxlan_encap_tc(struct __sk_buff *skb, __u32 key_bv, __u32 vxlan_ifindex)
{
	struct tr_encap_key k = { .bridge = key_bv, .vlan = key_bv >> 16 };
	__u32 mtu = 0, sport, tci = 0, tagged = 0;
	__be16 tpid = 0, proto;
	const struct tr_encap *e;
	void *data, *data_end;
	struct ethhdr *eth;
	__u64 flags;
	__s64 sum;
	__u8 *o;

	if (!skb)
		return TR_ENCAP_NONE;
	/* The MTU first: the caller asks it nowhere else. */
	if (bpf_check_mtu(skb, vxlan_ifindex, &mtu, 0, BPF_MTU_CHK_SEGS) > 0)
		return TR_ENCAP_TOO_LONG;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return TR_ENCAP_NONE;
	__builtin_memcpy(k.mac, eth->h_dest, 6);
	e = bpf_map_lookup_elem(&encaps, &k);
	if (!e)
		return TR_ENCAP_NONE;
	proto = skb->protocol;
	if (skb->vlan_present) {
		tagged = 1;
		tpid = skb->vlan_proto;
		tci = skb->vlan_tci;
	} else if (eth->h_proto == bpf_htons(ETH_P_8021Q) || eth->h_proto == bpf_htons(ETH_P_8021AD)) {
		struct tr_vlan_hdr *vh = (void *)(eth + 1);

		if ((void *)(vh + 1) > data_end)
			return TR_ENCAP_NONE;
		tagged = 1;
		tpid = eth->h_proto;
		tci = bpf_ntohs(vh->tci);
		proto = vh->proto;
	}
	if (proto != bpf_htons(ETH_P_IP) && proto != bpf_htons(ETH_P_IPV6))
		return TR_ENCAP_NONE;
	sport = tr_encap_sport(eth, data_end);
	/* The tag out of the way (the kernel's in its bytes: out of them),
	 * to be written inside. */
	if (tagged && bpf_skb_vlan_pop(skb))
		return TR_ENCAP_NONE;
	flags = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP |
		BPF_F_ADJ_ROOM_ENCAP_L2_ETH | BPF_F_ADJ_ROOM_ENCAP_L2((ETH_HLEN + tagged * TR_VLAN_HLEN));
	if (bpf_skb_adjust_room(skb, TR_ENCAP_HLEN + tagged * TR_VLAN_HLEN, BPF_ADJ_ROOM_MAC, flags)) {
		/* Unchanged but for the tag: given back, held outside the
		 * bytes, where the vxlan device takes it from. */
		if (tagged && bpf_skb_vlan_push(skb, tpid, tci))
			return TR_ENCAP_LOST;
		return TR_ENCAP_NONE;
	}
	/* The room is behind the frame's Ethernet header, which the kernel
	 * moved to the front: the inner one is a copy of it (and the tag). */
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	o = data;
	if ((void *)(o + TR_ENCAP_HLEN + ETH_HLEN) > data_end)
		return TR_ENCAP_LOST; /* cannot be: the kernel made the room in the head */
	__builtin_memcpy(o + TR_ENCAP_HLEN, o, 12);
	/* CHECKSUM_COMPLETE: the skb's sum covers what follows the outer
	 * Ethernet header at tc ingress (the kernel adds that header's as it
	 * redirects): the new bytes, 14 to the inner header's end, are added
	 * to it; 12-13 (the outer type) are taken back out, for bpf_csum_diff
	 * sums whole words from 12. A no-op on other skbs (-ENOTSUPP). */
	if (tagged) {
		if ((void *)(o + TR_ENCAP_HLEN + ETH_HLEN + TR_VLAN_HLEN) > data_end)
			return TR_ENCAP_LOST;
		*(__u16 *)(o + TR_ENCAP_HLEN + 12) = tpid;
		*(__u16 *)(o + TR_ENCAP_HLEN + 14) = bpf_htons(tci);
		*(__u16 *)(o + TR_ENCAP_HLEN + 16) = *(__u16 *)(o + 12);
		tr_encap_write(o, e, skb->len, sport);
		sum = bpf_csum_diff(NULL, 0, (__be32 *)(o + 12), TR_ENCAP_HLEN + ETH_HLEN + TR_VLAN_HLEN - 12,
				    ~(__u32) * (__u16 *)(o + 12) & 0xffff);
	} else {
		*(__u16 *)(o + TR_ENCAP_HLEN + 12) = *(__u16 *)(o + 12);
		tr_encap_write(o, e, skb->len, sport);
		sum = bpf_csum_diff(NULL, 0, (__be32 *)(o + 12), TR_ENCAP_HLEN + ETH_HLEN - 12,
				    ~(__u32) * (__u16 *)(o + 12) & 0xffff);
	}
	if (sum >= 0)
		bpf_csum_update(skb, sum);
	bpf_redirect(e->ifindex, 0);
	return TR_ENCAP_SENT;
}

#endif
