/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The one way to drop, as cilium's send_drop_notify() is: a frame, or a
 * copy of it, that the switch does not send goes through tr_drop with a
 * reason (enum tr_drop_reason), which counts it on the port it happened at
 * and notes the reason where the entry point and capture read it. No other
 * code writes a drop counter.
 *
 * Where the note is:
 *   - the decision's (lib/decision.h, d->drop): a drop in the frame's own
 *     bridge, on its ingress port or at the port it would have left by (an
 *     overlay port's MTU);
 *   - the walk's (lib/patch.h): a drop in a bridge the frame reached
 *     through a patch port, or of one copy of its flood; capture reads it
 *     there for a frame the walk dropped whole;
 *   - none (NULL): one copy of a flood, dropped at its port (too long for an
 *     overlay port) while the others go: the frame is not dropped.
 */
#ifndef TRESTLE_DROP_H
#define TRESTLE_DROP_H

#include "maps.h"

struct tr_drop_note {
	__u8 noted;  /* a drop was counted: reason holds. A byte of its own, always 1
		      * where written: a flag that held the reason (1 + reason) is a
		      * constant per drop site, and the verifier cannot merge the
		      * paths after a branch on it (the tc build with VLANs went over
		      * its million instructions) */
	__u8 reason; /* enum tr_drop_reason */
	__u8 beyond; /* counted in a bridge beyond a patch port (the walk's note) */
};

/* Drops the frame, or a copy of it, for reason: counted on the port whose
 * counters are st (NULL: none can be, a slot out of range), noted in n
 * with where (beyond: in a bridge beyond a patch port, a value the walk
 * computes, never a pointer to one of two notes: a register that points to
 * either kept the verifier from merging the paths of each round of
 * tr_emit's loop, 64,000 instructions more in the filter builds). */
static __always_inline void tr_drop(struct tr_drop_note *n, struct tr_port_stats *st,
				    enum tr_drop_reason reason, __u8 beyond)
{
	if (st && reason < TR_DROP__MAX)
		st->drops[reason]++;
	if (n) {
		n->noted = 1;
		n->reason = reason;
		n->beyond = beyond;
	}
}

/* The reason noted in n, for capture: TR_DROP__MAX when none was. */
static __always_inline __u32 tr_drop_noted(const struct tr_drop_note *n)
{
	return n->noted ? n->reason : TR_DROP__MAX;
}

#endif
