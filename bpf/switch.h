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
 * in the bridges the patches lead to (lib/patch.h, tr_walk in walk.h).
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
#include "lib/port.h"
#include "lib/decision.h"

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
		tr_drop(d, NULL, TR_DROP__MAX); /* slot out of range: cannot count it */
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

#endif
