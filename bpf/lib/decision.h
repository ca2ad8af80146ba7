/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The decision: what the pipeline (switch.h) made of a frame, which the
 * ways out carry out and capture records, and the one way to drop.
 */
#ifndef TRESTLE_DECISION_H
#define TRESTLE_DECISION_H

#include "maps.h"
#include "drop.h"
#include "fdb.h"
#include "vlan.h"

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
	/* TR_ACT_FORWARD: the egress port, a copy. A pointer would point into
	 * one of three maps (tr_port_of), and the verifier keeps the paths
	 * apart by which: a copy on the stack is the same on every path. */
	struct tr_port out;
	struct tr_tag tag;         /* the VLAN stage's view (tag.on: the bridge is VLAN-aware) */
	struct tr_table_view v;    /* the learning table as the frame found it */
	struct ethhdr *eth;        /* not NULL once parsed */
	__u16 vlan;                /* the frame's FDB VLAN */
	struct tr_drop_note drop;  /* the frame's drop in its bridge (lib/drop.h), which capture
				    * reports (a walk's drop in a later bridge is noted in the walk) */
	__u8 rule;                 /* TR_ACT_FORWARD: the egress rule's answer (enum tr_egress, lib/door.h),
				    * asked in the bridge step, which the door takes */
	__u8 straight;             /* forwarded in its bridge (tr_forward), not walked: the
				    * decision memo (lib/memo.h) may hold it */
};

/* The frame is dropped in its own bridge, for reason, counted on the port
 * of st (the ingress, or the overlay port it was too long for): the one
 * drop helper with the decision's note. */
static __always_inline void tr_drop_frame(struct tr_decision *d, struct tr_port_stats *st,
					  enum tr_drop_reason reason)
{
	d->action = TR_ACT_DROP;
	tr_drop(&d->drop, st, reason, 0);
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

#endif
