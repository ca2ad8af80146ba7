/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The decision: what the pipeline (switch.h) made of a frame, which the
 * ways out carry out and capture records, and the one way to drop.
 */
#ifndef TRESTLE_DECISION_H
#define TRESTLE_DECISION_H

#include "maps.h"
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
	__u8 counted;              /* tr_drop counted the frame's drop (a walk's drop in a later
				    * bridge is counted there, its reason kept in the walk) */
	__u8 reason;               /* and why (enum tr_drop_reason), which capture reports */
	__u8 straight;             /* forwarded in its bridge (tr_forward), not walked: the
				    * decision memo (lib/memo.h) may hold it */
};

/* The one place a frame is dropped: every drop has a reason, counted on
 * the port it happened at (st; NULL: a port that cannot be counted) and
 * carried in the decision. The flag and the reason are two bytes: a flag
 * that held the reason (1 + reason) is a constant per drop site that
 * tr_switch branches on, which kept the verifier from merging the paths
 * after them, and the tc build with the VLAN stage went over its limit of
 * a million instructions. */
static __always_inline void tr_drop(struct tr_decision *d, struct tr_port_stats *st,
				    enum tr_drop_reason reason)
{
	tr_count_drop(st, reason);
	d->action = TR_ACT_DROP;
	d->counted = 1;
	d->reason = reason;
}

/* The reason capture reports for a frame decided as d: TR_DROP__MAX when
 * none was counted on its ingress port (a drop beyond a patch port). */
static __always_inline __u32 tr_drop_reason(const struct tr_decision *d)
{
	return d->counted ? d->reason : TR_DROP__MAX;
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
