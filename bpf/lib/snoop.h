/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * multicast_snooping (docs/switching.md, "Multicast snooping"), as the
 * Linux bridge's mcast_snooping (net/bridge/br_multicast.c) and RFC 4541.
 * In a bridge with TR_BRIDGE_SNOOP, a frame the pipeline would flood to an
 * IP multicast destination is classified here:
 *
 *   - an IGMP message (IPv4 protocol 2), an MLD message (ICMPv6 130, 131,
 *     132, 143, behind at most one hop-by-hop header) or a PIM message
 *     (protocol 103) is copied to the daemon (snoop_ring, its IP packet's
 *     first TR_SNOOP_COPY bytes, tr_ctl_copy; lost copies counted in
 *     snoop_lost), which
 *     parses it (variable-length records are no work for the datapath) and
 *     writes the group table (groups). A query or a PIM hello is flooded;
 *     any other IGMP or MLD message (a report, a leave) goes where the
 *     table's entry of its family's unspecified group says (0.0.0.0 for
 *     IGMP, :: for MLD: the router ports, written once a querier of the
 *     family has been seen), else everywhere;
 *   - a link-local group (224.0.0.0/24; IPv6 scope 2 or less: ff02::1,
 *     the solicited-node groups of neighbour discovery) is flooded, as
 *     RFC 4541 asks, whatever hosts report;
 *   - any other group with an entry goes to that entry's ports (its
 *     members and the router ports); one without is flooded.
 *
 * The entry's ports are the frame's for its copies: the door asks each
 * copy's port (tr_door_ask's members). At tc they are copied to this
 * CPU's group_cur, which tr_door_copy_tc reads (TR_COPY_GROUP). At XDP the
 * copies leave through the program flood set, whose devmap program runs
 * when the NAPI poll ends, after other frames: it classifies its copy
 * again (TR_SNOOP_QUIET: nothing reported twice), one lookup a copy.
 *
 * A bridge the walk crosses (patch ports, mirrors, outbound filter rules:
 * walk.h, tr_walk_snoop) asks the same for each bridge's flood: reported
 * with that bridge's ingress (beyond a patch port, the patch port, so that
 * reports from the far side make it a member port), and its copies chosen
 * among its group's ports by the door, from group_cur, before the walk
 * enters the next bridge (which writes group_cur again); the chosen copies
 * then leave as the walk's do.
 *
 * Global functions (tr_snoop_xdp, tr_snoop_tc), verified once per mode,
 * reading with the context's load helper; the entry point and the walk
 * call them only for a flood to a multicast MAC in a bridge with the flag,
 * a test of a value loaded already (architecture.md rule 6).
 */
#ifndef TRESTLE_SNOOP_H
#define TRESTLE_SNOOP_H

#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include "maps.h"
#include "ctx.h"
#include "neigh.h"

/* tr_snoop's question: the bridge, the frame's VLAN and the ingress slot,
 * one argument. */
#define TR_SNOOP_WHO(bridge, vlan, slot) ((__u64)(bridge) | (__u64)(vlan) << 16 | (__u64)(slot) << 32)

/* tr_snoop's opts: classify only, report nothing (a devmap program's copy,
 * whose frame the pipeline reported). */
#define TR_SNOOP_QUIET 1

#define TR_IGMP_QUERY 0x11
#define TR_MLD_QUERY 130
#define TR_MLD_REPORT 131
#define TR_MLD_DONE 132
#define TR_MLD2_REPORT 143
#define TR_IPPROTO_PIM 103
#define TR_IPPROTO_ICMPV6 58

/* An IP multicast MAC: 01:00:5e (IPv4) or 33:33 (IPv6). */
static __always_inline int tr_mac_is_ipmcast(const __u8 *mac)
{
	return (mac[0] == 0x01 && mac[1] == 0x00 && mac[2] == 0x5e) || (mac[0] == 0x33 && mac[1] == 0x33);
}

/* Whether slot is among the ports of sel (a struct tr_group's). */
static __always_inline int tr_group_has(const __u64 *sel, __u32 slot)
{
	return slot < TR_MAX_PORTS && ((sel[slot >> 6] >> (slot & 63)) & 1);
}

/* This CPU's ports of the frame being flooded to a group. */
static __always_inline const __u64 *tr_group_cur(void)
{
	__u32 zero = 0;
	struct tr_group *g = bpf_map_lookup_elem(&group_cur, &zero);

	return g ? g->sel : NULL;
}

/* The message at off (its IP header) to the daemon (tr_ctl_copy, lib/neigh.h). */
static __always_inline void tr_snoop_report(void *ctx, const int xdp, __u64 who, __u32 off, __u16 proto)
{
	tr_ctl_copy(ctx, xdp, who, off, proto, TR_SNOOP_GROUP);
}

struct tr_ip4 {
	__u8 vihl;
	__u8 tos;
	__u16 len;
	__u16 id;
	__u16 frag;
	__u8 ttl;
	__u8 proto;
	__u16 check;
	__u32 saddr;
	__u32 daddr;
};

struct tr_ip6 {
	__u8 v[6]; /* version, class, flow label, payload length */
	__u8 nexthdr;
	__u8 hops;
	__u8 saddr[16];
	__u8 daddr[16];
};

/* The group key of the frame's IPv4 packet at off, or 1: flood it. */
static __always_inline int tr_snoop_ip4(void *ctx, const int xdp, __u64 who, __u32 opts, __u32 off,
					struct tr_group_key *k)
{
	struct tr_ip4 ip;
	__u32 dst;
	__u8 type;

	if (tr_load_bytes(ctx, xdp, off, &ip, sizeof(ip)) || (ip.vihl >> 4) != 4)
		return 1;
	dst = bpf_ntohl(ip.daddr);
	if ((dst & 0xf0000000) != 0xe0000000)
		return 1;
	if (ip.proto == IPPROTO_IGMP || ip.proto == TR_IPPROTO_PIM) {
		if (!(opts & TR_SNOOP_QUIET))
			tr_snoop_report(ctx, xdp, who, off, ETH_P_IP);
		if (ip.proto == TR_IPPROTO_PIM ||
		    tr_load_bytes(ctx, xdp, off + (ip.vihl & 0xf) * 4, &type, 1) || type == TR_IGMP_QUERY)
			return 1;
		/* A report or a leave: group 0.0.0.0 (::ffff:0.0.0.0). */
		k->addr[10] = 0xff;
		k->addr[11] = 0xff;
		return 0;
	}
	if ((dst & 0xffffff00) == 0xe0000000)
		return 1; /* 224.0.0.0/24, link-local */
	k->addr[10] = 0xff;
	k->addr[11] = 0xff;
	__builtin_memcpy(k->addr + 12, &ip.daddr, 4);
	return 0;
}

/* The group key of the frame's IPv6 packet at off, or 1: flood it. */
static __always_inline int tr_snoop_ip6(void *ctx, const int xdp, __u64 who, __u32 opts, __u32 off,
					struct tr_group_key *k)
{
	struct tr_ip6 ip;
	__u32 o = off + sizeof(ip);
	__u8 nh, h[2];

	if (tr_load_bytes(ctx, xdp, off, &ip, sizeof(ip)) || (ip.v[0] >> 4) != 6 || ip.daddr[0] != 0xff)
		return 1;
	nh = ip.nexthdr;
	if (nh == 0) {
		/* A hop-by-hop header, as MLD's router alert comes in. */
		if (tr_load_bytes(ctx, xdp, o, h, 2))
			return 1;
		nh = h[0];
		o += (h[1] + 1) * 8;
	}
	if (nh == TR_IPPROTO_ICMPV6) {
		if (tr_load_bytes(ctx, xdp, o, h, 1))
			return 1;
		if (h[0] == TR_MLD_QUERY || h[0] == TR_MLD_REPORT || h[0] == TR_MLD_DONE || h[0] == TR_MLD2_REPORT) {
			if (!(opts & TR_SNOOP_QUIET))
				tr_snoop_report(ctx, xdp, who, off, ETH_P_IPV6);
			return h[0] == TR_MLD_QUERY; /* a report or a done: group :: */
		}
	} else if (nh == TR_IPPROTO_PIM) {
		if (!(opts & TR_SNOOP_QUIET))
			tr_snoop_report(ctx, xdp, who, off, ETH_P_IPV6);
		return 1;
	}
	if ((ip.daddr[1] & 0x0f) <= 2)
		return 1; /* interface- or link-local scope: ff02::1, ff02::1:ffXX:XXXX */
	__builtin_memcpy(k->addr, ip.daddr, 16);
	return 0;
}

/*
 * The frame (a flood to a multicast MAC in a snooping bridge): 1 when it
 * goes only to its group's ports, which are then this CPU's group_cur; 0:
 * flood it. IGMP, MLD and PIM messages are reported on the way, unless
 * opts says TR_SNOOP_QUIET.
 */
static __always_inline int tr_snoop(void *ctx, const int xdp, __u64 who, __u32 opts)
{
	struct tr_group_key k = {};
	const struct tr_group *g;
	struct tr_group *cur;
	__u32 off, zero = 0;
	__u16 proto;
	int flood;

	if (tr_neigh_l3(ctx, xdp, &off, &proto))
		return 0;
	if (proto == ETH_P_IP)
		flood = tr_snoop_ip4(ctx, xdp, who, opts, off, &k);
	else if (proto == ETH_P_IPV6)
		flood = tr_snoop_ip6(ctx, xdp, who, opts, off, &k);
	else
		return 0;
	if (flood)
		return 0;
	k.bridge = who & 0xffff;
	k.vlan = (who >> 16) & 0xffff;
	g = bpf_map_lookup_elem(&groups, &k);
	cur = bpf_map_lookup_elem(&group_cur, &zero);
	if (!g || !cur)
		return 0;
	for (int i = 0; i < TR_SEL_WORDS; i++)
		cur->sel[i] = g->sel[i];
	return 1;
}

TR_TWIN(tr_snoop, (__u64 who, __u32 opts), (who, opts))

#endif
