/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The pipeline of the switch, one function for both attach modes (DESIGN.md
 * rule 5). It reads a frame through a small view (struct tr_pkt) filled by the
 * XDP or tc entry point, and returns a decision; the entry point carries the
 * decision out with its own helpers (devmap redirect or skb redirect/clone).
 * It reads top to bottom as a checklist, like OpenBSD's veb_port_input():
 *
 *   port -> count rx -> span drop -> parse -> VLAN (aware bridges) -> source sane ->
 *   reserved dst -> learn -> group dst: flood | lookup: miss flood, ingress
 *   or gone drop, else forward; a flood passes storm control (lib/storm.h)
 *
 * A forward to a patch port, or a flood in a bridge that has some, goes on
 * in the bridges the patches lead to (lib/patch.h, tr_walk in trestle.c).
 */
#ifndef TRESTLE_SWITCH_H
#define TRESTLE_SWITCH_H

#include "lib/maps.h"
#include "lib/ctx.h"
#include "lib/parse.h"
#include "lib/fdb.h"
#include "lib/vlan.h"
#include "lib/patch.h"
#include "lib/storm.h"

enum tr_action {
	TR_ACT_DROP,
	TR_ACT_FORWARD, /* to egress_ifindex */
	TR_ACT_FLOOD,   /* to every other port of the bridge */
};

struct tr_decision {
	enum tr_action action;
	__u32 egress_ifindex;
	__u32 egress_slot;
	__u32 bridge;
	__u32 in_slot;
	__u32 in_flags; /* the ingress port's (enum tr_port_flags) */
	struct tr_port_stats *in_st; /* NULL only for frames from no port */
	const struct tr_bridge *br;
	const struct tr_port *out; /* TR_ACT_FORWARD: the egress port */
	struct tr_tag tag;         /* the VLAN stage's view (tag.on: the bridge is VLAN-aware) */
	struct tr_table_view v;    /* the learning table as the frame found it */
	struct ethhdr *eth;        /* not NULL once parsed */
	__u16 vlan;                /* the frame's FDB VLAN */
	__u8 counted;              /* tr_drop counted a drop (a walk's drop in a later bridge is counted there) */
};

/* The port of an ingress interface, or NULL: by index for most ifindexes,
 * by hash for the rest (lib/maps.h). */
static __always_inline const struct tr_port *tr_port_of(__u32 ifindex)
{
	const struct tr_port *p;

	if (ifindex < TR_PORT_DIRECT) {
		p = bpf_map_lookup_elem(&port_index, &ifindex);
		return p && p->bridge ? p : NULL;
	}
	if (tr_is_patch(ifindex)) {
		struct tr_patch *pp = tr_patch_of(ifindex & ~TR_PATCH_IFINDEX);

		return pp ? &pp->port : NULL;
	}
	return bpf_map_lookup_elem(&ports, &ifindex);
}

/* The port flags that keep a flooded frame to dst, from a port with flags
 * in_flags, off a port (port policies): the flood switch of its kind, and
 * protection when it came from a protected port. */
static __always_inline __u16 tr_flood_deny(__u16 in_flags, const __u8 *dst)
{
	__u16 deny = TR_PORT_NO_FLOOD;

	if (tr_mac_is_multicast(dst))
		deny = (dst[0] & dst[1] & dst[2] & dst[3] & dst[4] & dst[5]) == 0xff ? TR_PORT_NO_BFLOOD
										 : TR_PORT_NO_MFLOOD;
	return deny | (in_flags & TR_PORT_PROTECTED);
}

/* The live copy of a bridge (lib/maps.h), or NULL. */
static __always_inline const struct tr_bridge *tr_bridge_of(__u32 bridge)
{
	__u32 *live = bpf_map_lookup_elem(&bridge_live, &bridge);

	if (!live || !*live)
		return NULL;
	return bpf_map_lookup_elem(&bridges, live);
}

/* The one place a frame is dropped: every drop has a reason and a counter. */
static __always_inline void tr_drop(struct tr_decision *d, struct tr_port_stats *st,
				    enum tr_drop_reason reason)
{
	tr_count_drop(st, reason);
	d->action = TR_ACT_DROP;
	d->counted = 1;
}

/* A frame is counted once, forwarded, flooded or dropped: a flood that
 * finds no way out after step 8 counted it (no other port, a tag it cannot
 * take, its filter) and is dropped with a reason is not a flood too. The
 * entry point calls this once for such a frame, not each drop site: a
 * check at each cost the XDP build about 2,000 instructions. */
static __always_inline void tr_unflood(struct tr_decision *d)
{
	if (d->in_st)
		d->in_st->c[TR_CNT_FLOODED]--;
	if (d->tag.st)
		d->tag.st->c[TR_VCNT_FLOODED]--;
}

static __always_inline void tr_pipeline(struct tr_pkt *p, struct tr_decision *d)
{
	enum tr_drop_reason reason = TR_DROP_RUNT;
	struct tr_port_stats *st;
	const struct tr_port *in, *out;
	const struct tr_bridge *br;
	struct tr_table_view *v = &d->v;
	struct tr_frame f;
	__u32 bridge, egress, slot;

	/* 1. Which port, which bridge. */
	in = tr_port_of(p->ifindex);
	if (!in) {
		tr_drop(d, tr_stats(0), TR_DROP_NO_PORT);
		return;
	}
	st = tr_stats(in->slot);
	if (!st) {
		d->action = TR_ACT_DROP; /* slot out of range: cannot count it */
		return;
	}
	d->in_st = st;
	d->in_slot = in->slot;
	d->in_flags = in->flags;
	st->c[TR_CNT_RX_PACKETS]++;
	st->c[TR_CNT_RX_BYTES] += p->wire;

	/* A span port only sends (mirrored copies). */
	if (in->flags & TR_PORT_SPAN) {
		tr_drop(d, st, TR_DROP_SPAN);
		return;
	}
	bridge = in->bridge;
	br = tr_bridge_of(bridge);
	if (!br || !br->nports) {
		tr_drop(d, st, TR_DROP_NO_BRIDGE);
		return;
	}
	d->bridge = bridge;
	d->br = br;

	/* 2. Is it a well-formed Ethernet frame? */
	if (tr_parse(p->data, p->data_end, p->len, p->meta_vlan, &f, &reason)) {
		tr_drop(d, st, reason);
		return;
	}

	/* 2b. Which VLAN: on VLAN-aware bridges, from the port and the tag. */
	if (vlan_aware && (br->flags & TR_BRIDGE_VLAN)) {
		if (tr_vlan_ingress(p->data_end, f.eth, p->meta_proto, p->meta_tci, in, p->wire,
				    &d->tag, &reason)) {
			tr_drop(d, st, reason);
			return;
		}
		f.vlan = d->tag.vid;
	}

	/* 3. A source address must be a station. */
	if (tr_mac_is_multicast(f.eth->h_source) || tr_mac_is_zero(f.eth->h_source)) {
		tr_drop(d, st, TR_DROP_BAD_SRC);
		return;
	}

	/* 4. Link-local control frames (STP, LACP, LLDP, 802.1X) stop here. */
	if (tr_mac_is_reserved(f.eth->h_dest)) {
		tr_drop(d, st, TR_DROP_RESERVED);
		return;
	}

	/* 5. Learn where the source lives. */
	tr_view_init(v);
	if (tr_learn(v, in, p->ifindex, br, f.vlan, f.eth->h_source, st, &reason)) {
		tr_drop(d, st, reason);
		return;
	}

	/* 6. Group addresses go everywhere; so do unknown stations. */
	d->eth = f.eth;
	d->vlan = f.vlan;
	if (tr_mac_is_multicast(f.eth->h_dest))
		goto flood;
	if (!tr_fdb_find(v, bridge, f.vlan, f.eth->h_dest, &egress, &slot))
		goto flood;

	/* 7. Known station: forward, unless it lives where the frame came from,
	 *    or its port has just left the bridge (the control plane removes a
	 *    port first and flushes its entries after). */
	if (egress == p->ifindex) {
		tr_drop(d, st, TR_DROP_HAIRPIN);
		return;
	}
	out = tr_port_of(egress);
	if (!out || out->bridge != bridge || out->slot != slot) {
		tr_drop(d, st, TR_DROP_NO_EGRESS);
		return;
	}
	if (in->flags & out->flags & TR_PORT_PROTECTED) {
		tr_drop(d, st, TR_DROP_PROTECTED);
		return;
	}
	d->action = TR_ACT_FORWARD;
	d->egress_ifindex = egress;
	d->egress_slot = slot;
	d->out = out;
	return;

flood:
	/* 8. Storm control, for the ports that have it. */
	if (in->flags & TR_PORT_STORM) {
		__u32 kind = tr_storm_kind(f.eth->h_dest);

		if (!tr_storm_pass(in->slot, kind)) {
			tr_drop(d, st, TR_DROP_STORM_BROADCAST + kind);
			return;
		}
	}
	st->c[TR_CNT_FLOODED]++;
	if (d->tag.st)
		d->tag.st->c[TR_VCNT_FLOODED]++;
	d->action = TR_ACT_FLOOD;
}

/* Counts a flooded frame as sent on every port of the bridge but the ingress. */
static __always_inline void tr_count_flood_tx(const struct tr_bridge *br, __u32 ingress,
					      __u32 len)
{
	for (__u32 i = 0; i < TR_MAX_BRIDGE_PORTS; i++) {
		if (i >= br->nports)
			break;
		if (br->ports[i].ifindex == ingress)
			continue;
		tr_count_tx(tr_stats(br->ports[i].slot), len);
	}
}

#endif
