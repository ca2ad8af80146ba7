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
 * VXLAN encapsulation in XDP (docs/overlay.md, "xdp ports and the
 * overlay"): a known unicast frame from an xdp port to a station behind an
 * overlay port, whose outer headers the control plane wrote (encaps), is
 * encapsulated here and redirected straight into the underlay device,
 * without the socket buffer of the xdp way in.
 */

/* The UDP source port of a frame's outer header (RFC 7348 5: a hash of the
 * inner headers, in 49152-65535, for the underlay's ECMP): the inner
 * addresses and, for an IPv4 frame (untagged or with one tag), its
 * addresses and the 4 bytes after the header's first 20 (the ports of TCP
 * or UDP without options). No helper call. eth is bounds-checked for 14. */
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

/*
 * Encapsulates the frame of ctx for its destination if the control plane
 * wrote its outer headers (encaps, by bridge | vlan << 16 in key_bv and the
 * destination address) and redirects it into the underlay device. The
 * frame, as it is now (tagged as it will leave), must fit the MTU of the
 * overlay port's vxlan device (vxlan_ifindex): if not, XDP_DROP, for the
 * caller to drop (TR_DROP_OVERLAY_MTU, on the overlay port). -1: no entry
 * (or no headroom): the caller sends the frame into the way in.
 * XDP_REDIRECT: sent, for the caller to count. A global function, verified
 * once, with a small frame.
 */
__attribute__((noinline)) int tr_vxlan_encap(struct xdp_md *ctx, __u32 key_bv, __u32 vxlan_ifindex)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tr_encap_key k = { .bridge = key_bv, .vlan = key_bv >> 16 };
	const struct tr_encap *e;
	__u32 mtu = 0, len, sum, sport;
	__u8 *o;

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(k.mac, eth->h_dest, 6);
	e = bpf_map_lookup_elem(&encaps, &k);
	if (!e)
		return -1;
	if (bpf_check_mtu(ctx, vxlan_ifindex, &mtu, 0, 0) > 0)
		return XDP_DROP;
	sport = tr_encap_sport(eth, data_end);
	if (bpf_xdp_adjust_head(ctx, -TR_ENCAP_HLEN))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	o = data;
	if ((void *)(o + TR_ENCAP_HLEN) > data_end)
		return XDP_DROP; /* cannot be: the frame grew by as much */
	len = data_end - data;
	/* The template: 6 words and a half-word, in place. */
	for (int i = 0; i < 6; i++)
		((__u64 *)o)[i] = ((const __u64 *)e->hdr)[i];
	((__u16 *)o)[24] = ((const __u16 *)e->hdr)[24];
	/* IPv4 (at 14): tot_len (16), check (24): ~ the folded sum. */
	sum = e->csum + ((len - 14) & 0xffff);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	*(__u16 *)(o + 16) = bpf_htons(len - 14);
	*(__u16 *)(o + 24) = bpf_htons(~sum & 0xffff);
	/* UDP (at 34): source, len (38); its check stays 0. */
	*(__u16 *)(o + 34) = bpf_htons(sport);
	*(__u16 *)(o + 38) = bpf_htons(len - 34);
	return bpf_redirect(e->ifindex, 0);
}

#endif
