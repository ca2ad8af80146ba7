/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The door: every copy of a frame that leaves a bridge passes tr_door, as
 * each frame OpenBSD's veb(4) sends passes veb_transmit or veb_broadcast,
 * which ask one question and call one device hook. In order:
 *
 *   1. the egress rule, whole (tr_door_ask): never back by the port it came
 *      in by (hairpin), nor by a port a flag keeps it off (protection, a
 *      kind of flood the port refuses), nor by one outside its VLAN, nor,
 *      for a multicast copy in a snooping bridge, by one outside its
 *      group's ports (lib/snoop.h); and tagged or untagged as the port
 *      takes that VLAN;
 *   2. the copy made so: its tag pushed, popped or rewritten;
 *   3. the port kind's device step, as veb_offload: an overlay port's
 *      encapsulation into the underlay (a forward to a known station, both
 *      modes) or else its MTU (tc), a patch port's crossing into the
 *      bridge beyond (the walk);
 *   4. out: redirected, cloned, left to the kernel (a broadcast's copy),
 *      or chosen (the walk's, sent when the walk ends);
 *   5. counted: sent by the port (and in its VLAN); or dropped with a
 *      reason through the one drop helper (lib/drop.h); or, a copy among
 *      several that the kernel would not take, tx_dropped on the port.
 *
 * It returns TR_DOOR_SENT, TR_DOOR_DENIED (the rule keeps the copy off
 * the port: the frame's only copy is then dropped with the rule's reason,
 * one copy of a flood is simply not made) or TR_DOOR_DROPPED (with the
 * reason in the copy's why).
 *
 * The way out (TR_WAY_*) is a constant at each call, and the door is
 * inlined: each way compiles to its own steps and nothing else, so a
 * forward in a plain bridge is its redirect and its counter, as it was
 * before there was a door.
 *
 * Where the rule was asked before the copy reaches the door, the door
 * takes the answer (struct tr_copy's rule): a unicast's, in the bridge step
 * that decides it (switch.h), before the filter's rules on the egress port
 * meet it, as veb asks hairpin and protection before its OUT rules; the
 * decision memo's, remembered (lib/memo.h); the walk's copies', at their
 * choice (their tag is made as they leave, the rule's VLAN half asked
 * again then).
 */
#ifndef TRESTLE_DOOR_H
#define TRESTLE_DOOR_H

#include <linux/if_ether.h>
#include "maps.h"
#include "ctx.h"
#include "drop.h"
#include "vlan.h"
#include "port.h"
#include "patch.h"
#include "overlay.h"
#include "snoop.h"

/* How a copy leaves by a port: the egress rule's answer. */
enum tr_egress {
	TR_EGRESS_DENY,     /* not by this port */
	TR_EGRESS_AS_IS,    /* as it is: its bridge is not VLAN-aware */
	TR_EGRESS_TAGGED,   /* tagged with its VLAN */
	TR_EGRESS_UNTAGGED, /* without a tag */
	TR_EGRESS_ASK,      /* not asked yet: the door asks */
};

/*
 * The egress rule, the one answer to "may a copy that came in by in leave
 * by port out (ifindex), and tagged how?": not back by in (hairpin); not
 * where out is missing, or has a flag of deny (a kind of flood it refuses,
 * tr_flood_deny; protection, when in is protected); not where out does not
 * carry the frame's VLAN vid (0: the bridge is not VLAN-aware, and the copy
 * leaves as it is); not where members (a multicast flood's group ports in a
 * snooping bridge, lib/snoop.h; NULL: none) lacks out; untagged where vid
 * is out's untagged VLAN. *why: the
 * reason, when the answer is TR_EGRESS_DENY (a flood's copy denied is no
 * drop; a unicast denied is dropped for it). Hairpin first, before the
 * caller's lookup of out: a frame to its own port costs no lookup.
 */
static __always_inline enum tr_egress tr_door_ask(const struct tr_port *out, __u32 ifindex, __u32 in,
						  __u16 vid, __u16 deny, const __u64 *members,
						  enum tr_drop_reason *why)
{
	if (ifindex == in) {
		*why = TR_DROP_HAIRPIN;
		return TR_EGRESS_DENY;
	}
	if (!out) {
		*why = TR_DROP_NO_EGRESS;
		return TR_EGRESS_DENY;
	}
	if (vid && !tr_vlan_carries(out, vid)) {
		*why = TR_DROP_VLAN_EGRESS;
		return TR_EGRESS_DENY;
	}
	if (out->flags & deny) {
		*why = TR_DROP_PROTECTED; /* of a unicast's deny flags, the only one */
		return TR_EGRESS_DENY;
	}
	if (members && !tr_group_has(members, out->slot)) {
		*why = TR_DROP_NO_EGRESS; /* only a flood's copies ask: no drop */
		return TR_EGRESS_DENY;
	}
	if (!vid)
		return TR_EGRESS_AS_IS;
	return tr_vlan_untagged_on(out, vid) ? TR_EGRESS_UNTAGGED : TR_EGRESS_TAGGED;
}

/*
 * Whether port out is blocked (TR_PORT_BLOCKED, lib/guard.h): it takes no
 * copy. No flood's copy reaches one: the daemon keeps it out of its
 * bridge's flood sets and reach, as a port whose link is down. A unicast's
 * rule asks this where it is decided (the bridge step, switch.h), beside
 * tr_door_ask; asked inside tr_door_ask, which every copy's way inlines, it
 * took 8 bytes more of the tc filter build's entry frame, the first of the
 * deepest chain of calls (512 bytes at most; 496 before).
 */
static __always_inline int tr_door_blocked(const struct tr_port *out)
{
	return __builtin_expect(out && (out->flags & TR_PORT_BLOCKED), 0);
}

/* The ways out: how the copy leaves once the door lets it (a constant at
 * each call). */
#define TR_WAY_FRAME 1  /* the frame itself, redirected (a forward; at tc, a flood's last copy) */
#define TR_WAY_MEMO 2   /* the frame itself, as the decision memo remembers its door (lib/memo.h) */
#define TR_WAY_CLONE 3  /* tc: a clone of the frame, which stays for the next copy (or, last, is
			 * redirected by the caller) */
#define TR_WAY_DEVMAP 4 /* XDP: a broadcast's copy in its devmap program: the kernel sends it */
#define TR_WAY_SET 5    /* XDP: a broadcast's copy over a set that runs no program, or a crossing a
			 * path memo remembers: sent; counted here */
#define TR_WAY_CHOOSE 6 /* the walk's copy to an interface: chosen now, sent when the walk ends */
#define TR_WAY_CROSS 7  /* the walk's across a patch port, into the bridge beyond */
#define TR_WAY_CHOOSE_LATER 8 /* CHOOSE, by a port of a flood's walk: at tc the copy to the port
			       * chosen before it is sent by the flood's loop (tr_choose_tc_later) */

enum tr_door_verdict {
	TR_DOOR_SENT,
	TR_DOOR_DENIED,
	TR_DOOR_DROPPED,
};

/* MEMO: what the memo does to the frame's tag. */
#define TR_RETAG_PUSH 1
#define TR_RETAG_POP 2

/* A copy at the door. The caller fills what its way needs; the door
 * writes why (and encapped). */
struct tr_copy {
	__u32 ifindex;  /* the port it leaves by: its interface (a patch port's: TR_PATCH_IFINDEX | slot) */
	__u32 slot;
	__u32 in;       /* the interface it came into this bridge by (beyond a patch port, the patch's) */
	__u16 vid;      /* its VLAN in a VLAN-aware bridge; 0: it leaves as it is */
	__u16 deny;     /* port flags that keep it off (a flood's kind; the ingress's protection) */
	__u32 wire;     /* its length on the wire before the door tags it */
	__u32 encap;    /* FRAME: bridge | FDB VLAN << 16 of a known station's forward, which an
			 * overlay port encapsulates; 0: it takes the way in (XDP) or the vxlan
			 * device (tc) */
	__u16 tci;      /* MEMO, TR_RETAG_PUSH: the tag pushed */
	__u8 rule;      /* enum tr_egress: the rule's answer, if asked before; else TR_EGRESS_ASK */
	__u8 overlay;   /* FRAME, CLONE: the port is, or may be, an overlay port: encapsulate (FRAME with
			 * encap) or ask its MTU (tc) */
	__u8 retag;     /* MEMO: TR_RETAG_* */
	__u8 last;      /* CLONE: the frame itself, which the caller redirects: no clone */
	__u8 why;       /* out: DENIED, DROPPED: enum tr_drop_reason */
	__u8 encapped;  /* out: FRAME: encapsulated (not the redirect a memo could remember) */
	struct tr_tag *tag;          /* FRAME, CLONE: the frame's tag as it is; the door makes it the copy's */
	struct tr_vlan_stats *vst;   /* the VLAN's counters (NULL: none; DEVMAP, CLONE look them up) */
	struct tr_drop_note *note;   /* the frame's only copy: its drop is the frame's, noted here; NULL:
				      * one copy of several, whose drop drops no frame */
	struct tr_port_stats *in_st; /* where the frame's drop that is not the port's is counted */
	struct tr_walk *w;           /* CHOOSE, CROSS */
	const __u64 *members;        /* DEVMAP: the group's ports of a multicast flood in a snooping
				      * bridge (lib/snoop.h); NULL: none */
};

/* A copy's counters, which no code but the door's writes: sent by the port
 * (and in its VLAN there), or not sent (tx_dropped: a copy for the port
 * that could not go, the egress port's to count, as an interface counts
 * its tx_dropped; the frame it is a copy of was flooded, and counted so,
 * once, on its ingress). */
static __always_inline void tr_count_tx(struct tr_port_stats *st, __u32 len)
{
	if (st) {
		st->c[TR_CNT_TX_PACKETS]++;
		st->c[TR_CNT_TX_BYTES] += len;
	}
}

static __always_inline void tr_vlan_count_tx(struct tr_vlan_stats *st, __u32 wire)
{
	if (st) {
		st->c[TR_VCNT_TX_PACKETS]++;
		st->c[TR_VCNT_TX_BYTES] += wire;
	}
}

static __always_inline void tr_count_tx_dropped(struct tr_port_stats *st)
{
	if (st)
		st->c[TR_CNT_TX_DROPPED]++;
}

/* The frame's drop at the door: counted on st, noted if it is the frame's. */
static __always_inline enum tr_door_verdict tr_door_drop(struct tr_copy *c, struct tr_port_stats *st,
							 enum tr_drop_reason why)
{
	c->why = why;
	tr_drop(c->note, st, why, 0);
	return TR_DOOR_DROPPED;
}

/* The memo's tag step, replayed: the tag pushed, popped, or left. The change
 * in the frame's wire length, or less than -TR_VLAN_HLEN if it failed. */
static __always_inline int tr_memo_retag(void *ctx, const int xdp, const struct tr_copy *c)
{
	if (!vlan_aware || !c->retag)
		return 0;
	if (c->retag == TR_RETAG_PUSH)
		return tr_tag_push(ctx, xdp, c->tci) ? -100 : TR_VLAN_HLEN;
	return tr_tag_pop(ctx, xdp) ? -100 : -TR_VLAN_HLEN;
}

/*
 * Step 3, the port kind's device step, for a copy about to be sent (tc, or
 * the far end of an overlay's xdp way in): an overlay port takes nothing
 * longer than its device's MTU (lib/overlay.h). 1: too long, dropped there.
 */
static __always_inline int tr_door_device_tc(struct __sk_buff *skb, struct tr_copy *c)
{
	if (!c->overlay || !tr_overlay_too_long(skb, c->ifindex))
		return 0;
	tr_door_drop(c, tr_stats(c->slot), TR_DROP_OVERLAY_MTU);
	return 1;
}

/* The door of a tc copy, as a global function (below). */
int tr_door_copy_tc(struct __sk_buff *skb, __u32 ifindex, __u32 vid, __u32 opts);

/* tc: a copy to each port the walk chooses, sent (through the door, as a
 * clone) when the next is chosen; the frame itself goes to the last. */
static __always_inline void tr_choose_tc(struct __sk_buff *skb, struct tr_walk *w, __u32 ifindex,
					 __u32 slot)
{
	if (w->nsel)
		tr_door_copy_tc(skb, w->last_ifindex, w->on ? w->vlan : 0,
				w->pcp & 0xf000);
	tr_choose(w, ifindex, slot);
}

/* tc, a port of a flood's walk (tr_emit_port): as tr_choose_tc, but the
 * copy to the port chosen before is left in the walk for the flood's loop
 * (tr_emit) to send (tr_choose_flush_tc), one call less deep: the walk's
 * deepest chain of calls, under the verifier's 512 bytes. */
static __always_inline void tr_choose_tc_later(struct tr_walk *w, __u32 ifindex, __u32 slot)
{
	__u32 n = w->npend;

	if (w->nsel && n < TR_WALK_PEND) {
		w->pend_ifindex[n] = w->last_ifindex;
		w->npend = n + 1;
	} else if (w->nsel) {
		/* No room (a port chooses at most TR_WALK_PEND): never so
		 * today, and if it were, a copy not sent is counted. */
		tr_count_tx_dropped(tr_stats(w->last_slot));
	}
	tr_choose(w, ifindex, slot);
}

/* tc: the copies tr_choose_tc_later left, through the door. A global
 * function with a small frame, verified once: tr_emit calls it after each
 * of its ports, and the chain of calls through the filter keeps its frame
 * small too. */
__attribute__((noinline)) int tr_choose_flush_tc(struct __sk_buff *skb, struct tr_walk *w)
{
	if (!skb || !w)
		return 0;
	for (__u32 i = 0; i < TR_WALK_PEND; i++) {
		if (i >= w->npend)
			break;
		tr_door_copy_tc(skb, w->pend_ifindex[i], w->on ? w->vlan : 0, w->pcp & 0xf000);
	}
	w->npend = 0;
	return 0;
}

/* The door. out: the port (NULL where the way needs none: the rule was
 * answered, and the device step looks the port up itself). */
static __always_inline enum tr_door_verdict tr_door(void *ctx, const int xdp, const int way,
						    const struct tr_port *out, struct tr_copy *c)
{
	enum tr_drop_reason why = TR_DROP_NO_EGRESS;
	enum tr_egress e = c->rule;
	struct tr_port_stats *st;
	__u32 wire = c->wire;
	int delta = 0;

	/* 1. The egress rule. */
	if (e == TR_EGRESS_ASK) {
		e = tr_door_ask(out, c->ifindex, c->in, c->vid, c->deny, c->members, &why);
		if (e == TR_EGRESS_DENY) {
			c->why = why;
			tr_drop(c->note, c->in_st, why, 0); /* a flood's copy (no note) is no drop */
			return TR_DOOR_DENIED;
		}
	}

	/* The walk's copy: a patch port's device step, the crossing into the
	 * bridge beyond (which the walk visits next), counted as sent by the
	 * patch port; an interface's copy chosen, its tag made and its count
	 * taken when it is sent (it passes the door again then: the next
	 * choice's clone at tc, the devmap program, the reach's count or the
	 * walk's last forward). (Here, before the steps it does not take: so
	 * placed, the copy's fields stay in registers, where after them the
	 * walk's frame grew by 168 bytes, past the 512 of its chain.) */
	if (way == TR_WAY_CROSS) {
		if (tr_cross(c->w, c->slot))
			return TR_DOOR_DROPPED; /* dropped there, noted in the walk */
		tr_count_tx(tr_stats(c->slot), wire);
		return TR_DOOR_SENT;
	}
	if (way == TR_WAY_CHOOSE) {
		if (xdp)
			tr_choose(c->w, c->ifindex, c->slot);
		else
			tr_choose_tc(ctx, c->w, c->ifindex, c->slot);
		return TR_DOOR_SENT;
	}
	if (way == TR_WAY_CHOOSE_LATER) {
		if (xdp)
			tr_choose(c->w, c->ifindex, c->slot);
		else
			tr_choose_tc_later(c->w, c->ifindex, c->slot);
		return TR_DOOR_SENT;
	}

	/* 2. The copy as the rule says. */
	if (way == TR_WAY_MEMO) {
		delta = tr_memo_retag(ctx, xdp, c);
		if (delta < -TR_VLAN_HLEN)
			return tr_door_drop(c, c->in_st, TR_DROP_VLAN_EGRESS);
	} else if ((way == TR_WAY_FRAME || way == TR_WAY_CLONE) &&
		   (e == TR_EGRESS_TAGGED || e == TR_EGRESS_UNTAGGED)) {
		delta = tr_tag_to(ctx, xdp, c->tag, e == TR_EGRESS_UNTAGGED);
		if (delta < -TR_VLAN_HLEN) {
			if (way == TR_WAY_FRAME)
				return tr_door_drop(c, c->in_st, TR_DROP_VLAN_EGRESS);
			/* A copy the tag could not be written on: the port's
			 * tx_dropped (the frame itself, last: the caller's drop). */
			if (!c->last)
				tr_count_tx_dropped(tr_stats(c->slot));
			c->why = TR_DROP_VLAN_EGRESS;
			return TR_DOOR_DROPPED;
		}
	} else if (way == TR_WAY_DEVMAP && e == TR_EGRESS_UNTAGGED) {
		if (tr_xdp_pop(ctx)) {
			tr_count_tx_dropped(tr_stats(c->slot));
			c->why = TR_DROP_VLAN_EGRESS;
			return TR_DOOR_DROPPED;
		}
		delta = -TR_VLAN_HLEN;
	}
	wire += delta;

	/* 3. The port kind's device step. */
	if (way == TR_WAY_FRAME && c->overlay && c->encap) {
		/* A known station behind an overlay port whose outer headers the
		 * control plane wrote: encapsulated and sent into the underlay,
		 * else the way in (XDP: the port's tx_ports entry) or the vxlan
		 * device (tc: its MTU asked there). */
		int r = xdp ? tr_vxlan_encap(ctx, c->encap, c->ifindex) : tr_vxlan_encap_tc(ctx, c->encap, c->ifindex);

		if (r == TR_ENCAP_TOO_LONG)
			return tr_door_drop(c, tr_stats(c->slot), TR_DROP_OVERLAY_MTU);
		if (r == TR_ENCAP_LOST)
			return tr_door_drop(c, c->in_st, TR_DROP_NO_EGRESS);
		if (r == TR_ENCAP_SENT) {
			st = tr_stats(c->slot);
			tr_count_tx(st, wire);
			if (st)
				st->c[TR_CNT_ENCAP]++;
			tr_vlan_count_tx(c->vst, wire);
			c->encapped = 1;
			return TR_DOOR_SENT;
		}
	} else if (!xdp && (way == TR_WAY_FRAME || way == TR_WAY_CLONE) && tr_door_device_tc(ctx, c)) {
		return TR_DOOR_DROPPED;
	}

	/* 4. Out. */
	if (way == TR_WAY_FRAME || way == TR_WAY_MEMO) {
		if (tr_redirect_port(xdp, c->ifindex, c->slot) < 0)
			return tr_door_drop(c, c->in_st, TR_DROP_NO_EGRESS);
	} else if (way == TR_WAY_CLONE) {
		if (!c->last && bpf_clone_redirect(ctx, c->ifindex, 0)) {
			tr_count_tx_dropped(tr_stats(c->slot));
			c->why = TR_DROP_NO_EGRESS;
			return TR_DOOR_DROPPED;
		}
	}

	/* 5. Counted: on the port, and in the copy's VLAN there. */
	tr_count_tx(tr_stats(c->slot), wire);
	if ((way == TR_WAY_DEVMAP || way == TR_WAY_CLONE) && c->vid && out) {
		struct tr_vlan_entry *v = tr_vlan_of(out->bridge, c->vid);

		if (v)
			c->vst = tr_vlan_stats_of(v->idx);
	}
	tr_vlan_count_tx(c->vst, wire);
	return TR_DOOR_SENT;
}

/*
 * The door of a tc copy of a flood or of the walk: its steps, as tr_door
 * takes them for a clone, written out in a global function of their own,
 * verified once rather than at each of the loops' and the walk's calls.
 * Written out, not tr_door inlined: the walk's deepest chain of calls
 * reaches it, and so its frame is 48 bytes, where tr_door's clone made it
 * 80, which took that chain past the verifier's 512 (its MTU check is
 * inline for the same reason, one frame less).
 *
 * To the port on ifindex if the rule lets it, tagged or untagged as it
 * takes vid (0: the bridge is not VLAN-aware, the copy leaves as it is).
 * The skb's tag state is changed in place for the copy and stays so for
 * the next; the priority in opts (bits 12-15) is the frame's, for a tag an
 * earlier copy took off. opts: TR_COPY_LAST (no clone: the caller
 * redirects the frame itself), TR_COPY_GROUP (a multicast flood of a
 * snooping bridge: only to the ports of this CPU's group_cur, lib/snoop.h),
 * and the port flags that keep the copy off
 * the port (bits 16-31, tr_flood_deny). Returns 0: not for this port, 1:
 * sent (or ready to be), TR_COPY_TOO_LONG: too long for its overlay port,
 * the copy's drop counted there, -1: could not, counted here (tx_dropped;
 * the frame itself, last: the caller's drop).
 */
#define TR_COPY_LAST 1
#define TR_COPY_GROUP 2

static __always_inline __u32 tr_copy_opts(__u32 pcp, __u32 last, __u16 deny)
{
	return (pcp & 0xf000) | (last ? TR_COPY_LAST : 0) | ((__u32)deny << 16);
}

/* tr_door_copy_tc's answer for a copy too long for its overlay port,
 * counted there (the frame itself too, last: the others went). */
#define TR_COPY_TOO_LONG (-2)

/* A copy that could not be sent (the frame itself, last: the caller's
 * drop), or one too long for its overlay port. */
static __always_inline int tr_copy_failed(struct tr_port_stats *st, __u32 last, int too_long)
{
	if (too_long) {
		tr_drop(NULL, st, TR_DROP_OVERLAY_MTU, 0);
		return TR_COPY_TOO_LONG;
	}
	if (!last)
		tr_count_tx_dropped(st);
	return -1;
}

__attribute__((noinline)) int tr_door_copy_tc(struct __sk_buff *skb, __u32 ifindex, __u32 vid, __u32 opts)
{
	__u32 last = opts & TR_COPY_LAST, wire, mtu = 0;
	const struct tr_port *out;
	struct tr_vlan_entry *v;
	enum tr_drop_reason why;
	struct tr_tag t = {};
	enum tr_egress e;

	if (!skb)
		return -1;
	/* 1. The egress rule. */
	out = tr_port_of(ifindex);
	e = tr_door_ask(out, ifindex, 0, vid, opts >> 16, (opts & TR_COPY_GROUP) ? tr_group_cur() : NULL, &why);
	if (e == TR_EGRESS_DENY || !out)
		return 0;
	if (e == TR_EGRESS_AS_IS) {
		/* 3-5 as they are: the device step, out, counted. */
		if ((out->flags & TR_PORT_OVERLAY) && bpf_check_mtu(skb, ifindex, &mtu, 0, BPF_MTU_CHK_SEGS) > 0)
			return tr_copy_failed(tr_stats(out->slot), last, 1);
		if (!last && bpf_clone_redirect(skb, ifindex, 0))
			return tr_copy_failed(tr_stats(out->slot), last, 0);
		tr_count_tx(tr_stats(out->slot), skb->len + (skb->vlan_present ? TR_VLAN_HLEN : 0));
		return 1;
	}
	/* 2. The copy's tag. */
	t.vid = vid;
	t.tci = opts & 0xf000;
	if (skb->vlan_present && skb->vlan_proto == bpf_htons(ETH_P_8021Q)) {
		t.ctag = 1;
		t.tci = skb->vlan_tci;
	}
	if (tr_tag_to(skb, TR_TC, &t, e == TR_EGRESS_UNTAGGED) < -TR_VLAN_HLEN)
		return tr_copy_failed(tr_stats(out->slot), last, 0);
	/* 3. The port kind's device step. */
	if ((out->flags & TR_PORT_OVERLAY) && bpf_check_mtu(skb, ifindex, &mtu, 0, BPF_MTU_CHK_SEGS) > 0)
		return tr_copy_failed(tr_stats(out->slot), last, 1);
	/* 4. Out. */
	if (!last && bpf_clone_redirect(skb, ifindex, 0))
		return tr_copy_failed(tr_stats(out->slot), last, 0);
	/* 5. Counted, on the port and in its VLAN. */
	wire = skb->len + (skb->vlan_present ? TR_VLAN_HLEN : 0);
	tr_count_tx(tr_stats(out->slot), wire);
	v = tr_vlan_of(out->bridge, vid);
	if (v)
		tr_vlan_count_tx(tr_vlan_stats_of(v->idx), wire);
	return 1;
}

/* XDP: a broadcast's copy, in its devmap program, leaves by out as the
 * door says; tagged: it carries its VLAN's tag (a VLAN-aware bridge),
 * which it keeps or loses as out takes that VLAN, else it leaves as it
 * is; in: the ingress; deny: the port flags that refuse it; members: the
 * group's ports of a snooping bridge's multicast flood (NULL: none); lost: what
 * would say where it goes is gone (a walk's copy whose walk a later one
 * took the place of, walk.h), so it cannot be sent, tx_dropped. The
 * verdict for the kernel. */
static __always_inline int tr_door_devmap(struct xdp_md *ctx, const struct tr_port *out, __u32 in,
					  __u16 deny, const __u64 *members, int tagged, int lost)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tr_vlan_hdr *vh = (void *)(eth + 1);
	struct tr_copy c = {};

	if (lost) {
		tr_count_tx_dropped(tr_stats(out->slot));
		return XDP_DROP;
	}
	if (tagged) {
		if ((void *)(vh + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_8021Q))
			return XDP_DROP;
		c.vid = bpf_ntohs(vh->tci) & 0x0fff;
		if (!c.vid)
			return XDP_DROP;
	}
	c.ifindex = ctx->egress_ifindex;
	c.slot = out->slot;
	c.in = in;
	c.deny = deny;
	c.members = members;
	c.wire = data_end - data;
	c.rule = TR_EGRESS_ASK;
	return tr_door(ctx, TR_XDP, TR_WAY_DEVMAP, out, &c) == TR_DOOR_SENT ? XDP_PASS : XDP_DROP;
}

/*
 * trestle_via: the far end of an overlay port's xdp way in. A vxlan device
 * takes no XDP redirect, so XDP ports send the overlay's frames into a
 * veth pair of the VNI's; at its far end, the socket buffers GRO made
 * arrive here, and go on to the vxlan device, checked against its MTU as
 * tc ports' frames are (counted on the overlay port). The peer's entry in
 * the port maps (TR_PORT_VIA) holds the overlay port's slot and its device
 * (via_dev). Anything else arriving here is dropped.
 */
static __always_inline int tr_via(struct __sk_buff *skb)
{
	const struct tr_port *v = tr_port_of(skb->ifindex); /* at ingress: the device it arrived on */
	struct tr_copy c = {};
	__u32 dev;

	if (!v || !(v->flags & TR_PORT_VIA))
		return TC_ACT_SHOT;
	dev = v->via_dev;
	/* The copy passed the door when XDP sent it into the way in (asked,
	 * counted): here, the overlay port's device step alone. */
	c.ifindex = dev;
	c.slot = v->slot;
	c.overlay = 1;
	if (tr_door_device_tc(skb, &c))
		return TC_ACT_SHOT;
	return bpf_redirect(dev, 0);
}

#endif
