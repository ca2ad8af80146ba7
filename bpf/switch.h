/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The pipeline of the switch, one function for both attach modes (architecture.md
 * rule 5). It reads a frame through a small view (struct tr_pkt) filled by the
 * XDP or tc entry point, and returns a decision; the entry point carries the
 * decision out with its own helpers (devmap redirect or skb redirect/clone).
 * It reads top to bottom as a checklist, like OpenBSD's veb_port_input():
 *
 *   port -> count rx -> span or blocked drop -> parse -> [loop probe] -> VLAN (aware
 *   bridges) -> source sane -> [ip_guard, ra_guard, dhcp_guard] -> reserved dst [bpdu_guard] -> learn -> group dst: flood | lookup: miss flood, ingress
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
#include "lib/door.h"
#include "lib/ipguard.h"
#include "lib/guard.h"

/*
 * Steps 5 to 7 of a bridge, for a frame from port in (interface self; a
 * patch port's is TR_PATCH_IFINDEX | its slot) in VLAN vlan: learn the
 * source, look the destination up, and forward to the port it lives on as
 * the egress rule (lib/door.h) says. The pipeline takes this step in the
 * frame's first bridge, the walk (tr_hop) in each bridge beyond a patch
 * port. vid: the frame's VLAN for the rule (0: the bridge is not
 * VLAN-aware). Returns TR_ACT_FORWARD with *out, *egress, *slot and the
 * rule's answer in *rule (how the frame leaves: the door takes it as
 * asked), TR_ACT_FLOOD, or TR_ACT_DROP with *reason.
 */
static __always_inline enum tr_action
tr_bridge_step(struct tr_table_view *v, const struct tr_port *in, __u32 self,
	       const struct tr_bridge *br, __u16 vlan, __u16 vid, const __u8 *src, const __u8 *dst,
	       struct tr_port_stats *st, const struct tr_port **out, __u32 *egress, __u32 *slot,
	       enum tr_egress *rule, enum tr_drop_reason *reason)
{
	const struct tr_port *o = NULL;

	/* 5. Learn where the source lives. */
	if (tr_learn(v, in, self, br, vlan, src, st, reason))
		return TR_ACT_DROP;

	/* 6. Group addresses go everywhere; so do unknown stations. */
	if (tr_mac_is_multicast(dst) || !tr_fdb_find(v, in->bridge, vlan, dst, egress, slot))
		return TR_ACT_FLOOD;

	/* 7. Known station: forward as the egress rule says, asked here, before
	 *    the filter's rules on the egress port meet the frame (as veb asks
	 *    hairpin and protection before its OUT rules). Not back where it
	 *    came from (no lookup then), nor to a port that has just left the
	 *    bridge (the control plane removes a port first and flushes its
	 *    entries after), nor to a blocked one, nor outside the frame's
	 *    VLAN, nor from a protected port to another. */
	if (*egress != self) {
		o = tr_port_of(*egress);
		if (o && (o->bridge != in->bridge || o->slot != *slot))
			o = NULL;
		/* Nor to a blocked port (lib/door.h's tr_door_blocked). */
		if (tr_door_blocked(o)) {
			*reason = TR_DROP_PORT_BLOCKED;
			return TR_ACT_DROP;
		}
	}
	*rule = tr_door_ask(o, *egress, self, vid, in->flags & TR_PORT_PROTECTED, NULL, reason);
	if (*rule == TR_EGRESS_DENY)
		return TR_ACT_DROP;
	*out = o;
	return TR_ACT_FORWARD;
}

static __always_inline void tr_pipeline(void *ctx, const int xdp, struct tr_pkt *p, struct tr_decision *d)
{
	enum tr_drop_reason reason = TR_DROP_RUNT;
	struct tr_port_stats *st;
	const struct tr_port *in, *out;
	const struct tr_bridge *br;
	struct tr_table_view *v = &d->v;
	enum tr_egress rule;
	struct tr_frame f;
	__u32 bridge, egress, slot;

	/* 1. Which port, which bridge. An interface's: never a patch port. */
	in = tr_port_of_dev(p->ifindex);
	if (!in) {
		tr_drop_frame(d, tr_stats(0), TR_DROP_NO_PORT);
		return;
	}
	st = tr_stats(in->slot);
	if (!st) {
		tr_drop_frame(d, NULL, TR_DROP__MAX); /* slot out of range: cannot count it */
		return;
	}
	d->in_st = st;
	d->in_slot = in->slot;
	d->in_flags = in->flags;
	st->c[TR_CNT_RX_PACKETS]++;
	st->c[TR_CNT_RX_BYTES] += p->wire;

	/* A span port only sends (mirrored copies). */
	if (in->flags & TR_PORT_SPAN) {
		tr_drop_frame(d, st, TR_DROP_SPAN);
		return;
	}
	/* A blocked port (lib/guard.h) takes nothing in: one test of the flags
	 * just read. Marked unlikely: as a plain test, or folded into the span
	 * port's, the compiler spilled one value more, 8 bytes of the tc filter
	 * build's entry frame, the first of its deepest chain of calls. */
	if (__builtin_expect(!!(in->flags & TR_PORT_BLOCKED), 0)) {
		tr_drop_frame(d, st, TR_DROP_PORT_BLOCKED);
		return;
	}
	bridge = in->bridge;
	br = tr_bridge_of(bridge);
	if (!br || !br->nports) {
		tr_drop_frame(d, st, TR_DROP_NO_BRIDGE);
		return;
	}
	d->bridge = bridge;
	d->br = br;

	/* 2. Is it a well-formed Ethernet frame? */
	if (tr_parse(p->data, p->data_end, p->len, p->meta_vlan, &f, &reason)) {
		tr_drop_frame(d, st, reason);
		return;
	}

	/* 2a. On a loop_detect bridge, a loop probe is the daemon's: reported
	 *     and dropped (lib/guard.h). The type first: other frames pay one
	 *     compare, and other bridges' probes go on as any frame. */
	if (f.proto == TR_PROBE_ETHERTYPE && (br->flags & TR_BRIDGE_LOOP_DETECT) && tr_probe_heard(p, &f, in)) {
		tr_drop_frame(d, st, TR_DROP_LOOP_PROBE);
		return;
	}

	/* 2b. Which VLAN: on VLAN-aware bridges, from the port and the tag. */
	if (vlan_aware) {
		d->tag.in_vlan = f.vlan; /* the decision memo's key (lib/memo.h) */
		if (br->flags & TR_BRIDGE_VLAN) {
			if (tr_vlan_ingress(p->data_end, f.eth, p->meta_proto, p->meta_tci, f.l3_off, in,
					    p->wire, &d->tag, &reason)) {
				tr_drop_frame(d, st, reason);
				return;
			}
			f.vlan = d->tag.vid;
		}
	}

	/* 3. A source address must be a station. */
	if (tr_mac_is_multicast(f.eth->h_source) || tr_mac_is_zero(f.eth->h_source)) {
		tr_drop_frame(d, st, TR_DROP_BAD_SRC);
		return;
	}

	/* 3b. On an ip_guard port, ARP, ND and IP sources must be the port's;
	 *     from an ra_guard or dhcp_guard port, no router advertisement or
	 *     DHCP server's message (lib/ipguard.h); before anything is
	 *     learned from the frame. */
	if (in->flags & TR_PORT_GUARDS) {
		/* A reason, or 0; masked so that the verifier knows its range
		 * (what a global function returns is any value to it). */
		__u32 g = TR_CALL(xdp, tr_ipguard, ctx, TR_GUARD_WHO(in->slot, in->flags), f.l3_off, f.proto) & 0xff;

		if (g) {
			tr_drop_frame(d, st, g < TR_DROP__MAX ? g : TR_DROP_IPGUARD_IP);
			return;
		}
	}

	/* 4. Link-local control frames (STP, LACP, LLDP, 802.1X) stop here; a
	 *    BPDU on a bpdu_guard port is reported, for the daemon blocks the
	 *    port (lib/guard.h). */
	if (tr_mac_is_reserved(f.eth->h_dest)) {
		if ((in->flags & TR_PORT_BPDU_GUARD) && tr_is_bpdu(f.eth->h_dest)) {
			tr_bpdu_heard(in, p->ifindex, f.eth->h_source);
			tr_drop_frame(d, st, TR_DROP_BPDU_GUARD);
			return;
		}
		tr_drop_frame(d, st, TR_DROP_RESERVED);
		return;
	}

	/* 5-7. Learn, look up, forward: the bridge's step (the walk's too). */
	if (tr_view_init(v)) {
		tr_drop_frame(d, st, TR_DROP__MAX); /* no cpu_cache value: cannot be */
		return;
	}
	d->eth = f.eth;
	d->vlan = f.vlan;
	switch (tr_bridge_step(v, in, p->ifindex, br, f.vlan, d->tag.on ? d->tag.vid : 0, f.eth->h_source,
			       f.eth->h_dest, st, &out, &egress, &slot, &rule, &reason)) {
	case TR_ACT_DROP:
		tr_drop_frame(d, st, reason);
		return;
	case TR_ACT_FORWARD:
		d->action = TR_ACT_FORWARD;
		d->egress_ifindex = egress;
		d->egress_slot = slot;
		d->out = *out;
		d->rule = rule;
		return;
	default:
		break;
	}

	/* 8. Storm control, for the ports that have it (a flood). */
	if (in->flags & TR_PORT_STORM) {
		__u32 kind = tr_storm_kind(f.eth->h_dest);

		if (!tr_storm_pass(in->slot, kind)) {
			tr_drop_frame(d, st, TR_DROP_STORM_BROADCAST + kind);
			return;
		}
	}
	st->c[TR_CNT_FLOODED]++;
	if (d->tag.st)
		d->tag.st->c[TR_VCNT_FLOODED]++;
	d->action = TR_ACT_FLOOD;
}

#endif
