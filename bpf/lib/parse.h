/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Ethernet parsing for a bridge: addresses, up to two VLAN tags, and a sanity
 * check of what the type field announces. A bridge does not need L3, but a
 * frame that claims an IPv4, IPv6 or ARP payload and is too short to hold its
 * header is a runt, not something to forward. Helpers check their own bounds.
 */
#ifndef TRESTLE_PARSE_H
#define TRESTLE_PARSE_H

#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include "../types.h"

#define TR_VLAN_HLEN 4
#define TR_MAX_VLAN_TAGS 2 /* 802.1ad outer + 802.1Q inner */
#define TR_ETH_MIN_TYPE 0x0600
#define TR_ETH_MAX_LEN 1500

struct tr_vlan_hdr {
	__be16 tci;
	__be16 proto;
};

struct tr_frame {
	struct ethhdr *eth;
	__u16 proto;  /* host order, after VLAN tags */
	__u16 vlan;   /* VID of the outermost tag; 0 when untagged */
	__u32 l3_off; /* offset of the payload after the last tag */
};

static __always_inline int tr_is_vlan(__u16 proto)
{
	return proto == ETH_P_8021Q || proto == ETH_P_8021AD;
}

/* Minimum payload a frame of this type must carry to be well formed. */
static __always_inline __u32 tr_min_payload(__u16 proto)
{
	switch (proto) {
	case ETH_P_IP:
		return 20;
	case ETH_P_IPV6:
		return 40;
	case ETH_P_ARP:
		return 28;
	default:
		return 0;
	}
}

/*
 * Returns -1 and sets *reason when the frame is malformed, 0 otherwise.
 * meta_vlan is the outer VID when the kernel already took the outer tag out
 * of the frame into metadata (skbs at tc), -1 when the tag, if any, is still
 * in the data (XDP); either way the FDB sees the same VLAN.
 */
static __always_inline int tr_parse(void *data, void *data_end, __u32 len, int meta_vlan,
				    struct tr_frame *f, enum tr_drop_reason *reason)
{
	struct ethhdr *eth = data;
	__u32 off = sizeof(*eth);
	__u16 proto;

	if ((void *)(eth + 1) > data_end) {
		*reason = TR_DROP_RUNT;
		return -1;
	}
	f->eth = eth;
	f->vlan = meta_vlan >= 0 ? meta_vlan & 0x0fff : 0;
	proto = bpf_ntohs(eth->h_proto);

#pragma unroll
	for (int i = 0; i < TR_MAX_VLAN_TAGS; i++) {
		struct tr_vlan_hdr *vh = data + off;

		if (!tr_is_vlan(proto))
			break;
		if ((void *)(vh + 1) > data_end) {
			*reason = TR_DROP_RUNT;
			return -1;
		}
		if (i == 0 && meta_vlan < 0)
			f->vlan = bpf_ntohs(vh->tci) & 0x0fff;
		proto = bpf_ntohs(vh->proto);
		off += TR_VLAN_HLEN;
	}

	if (proto < TR_ETH_MIN_TYPE) {
		/* An 802.3 length field: legal, but it must fit in the frame. */
		if (proto > TR_ETH_MAX_LEN || proto > len - off) {
			*reason = TR_DROP_ETHERTYPE;
			return -1;
		}
	} else if (len - off < tr_min_payload(proto)) {
		*reason = TR_DROP_RUNT;
		return -1;
	}
	f->proto = proto;
	f->l3_off = off;
	return 0;
}

static __always_inline int tr_mac_is_multicast(const __u8 *mac)
{
	return mac[0] & 1;
}

static __always_inline int tr_mac_is_zero(const __u8 *mac)
{
	return !(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]);
}

/* IEEE 802.1D reserved group addresses 01:80:c2:00:00:00-0f: never forwarded. */
static __always_inline int tr_mac_is_reserved(const __u8 *mac)
{
	return mac[0] == 0x01 && mac[1] == 0x80 && mac[2] == 0xc2 &&
	       mac[3] == 0 && mac[4] == 0 && (mac[5] & 0xf0) == 0;
}

#endif
