/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Capture (`trestle capture PORT`): a copy of each frame the switch sees on
 * one port, what it received (in) and what the bridge sent out of it (out),
 * with what became of it, through a ring buffer to the daemon.
 *
 * It is in the programs only while a capture runs (architecture.md rule 6): the
 * control plane loads a second build with capture_on set (lib/stages.h) and moves every
 * attachment to it, and back when the capture ends. With capture_on 0 the
 * verifier removes every line of it; a switch nobody captures runs the code
 * it ran before.
 *
 * A frame is copied when it comes in, before the switch changes it (a tag
 * pushed or popped, an skb cloned away), and its record goes out once the
 * switch has decided, with the verdict. An out record says how the frame's
 * outer tag changed on its way out of the port (enum tr_capture_tag): the
 * control plane applies that to the copy, so the bytes are those that left.
 *
 * The drop reason is the one noted by the drop helper (lib/drop.h): the
 * decision's, or for a frame the walk dropped whole, the walk's; one a
 * bridge beyond a patch port dropped (counted on that patch port) is
 * marked so (beyond).
 * A frame that went through the walk (lib/patch.h) is found by the walk's
 * choice of ports; conf.walks says to copy the frames of every bridge, for
 * those that crossed patch ports from another.
 */
#ifndef TRESTLE_CAPTURE_H
#define TRESTLE_CAPTURE_H

#include "maps.h"
#include "ctx.h"
#include "vlan.h"
#include "patch.h"
#include "port.h"
#include "decision.h"
#include "door.h"
#include "stages.h"

/* For BTF, and so bpf2go: never used. */
enum tr_capture_limits _btf_capture_limits __attribute__((unused));
enum tr_capture_dir _btf_capture_dir __attribute__((unused));
enum tr_capture_verdict _btf_capture_verdict __attribute__((unused));
enum tr_capture_tag _btf_capture_tag __attribute__((unused));

/* The records. One page here: the control plane gives the capture build a
 * ring of its own size (internal/datapath/capture.go). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} capture_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tr_capture_conf);
} capture_conf SEC(".maps");

/* Records the ring had no room for, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} capture_lost SEC(".maps");

/* A frame between the switch's entry and its verdict: too big for the stack. */
struct tr_capture_buf {
	__u32 armed;               /* a frame was copied at entry: its record goes out at exit */
	__u32 grouped;             /* and its flood went to its group's ports only (tr_capture_grouped) */
	struct tr_capture_rec rec;
	__u8 data[TR_CAPTURE_SNAP];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tr_capture_buf);
} capture_buf SEC(".maps");

static __always_inline struct tr_capture_conf *tr_capture_conf(void)
{
	__u32 zero = 0;
	struct tr_capture_conf *c = bpf_map_lookup_elem(&capture_conf, &zero);

	return c && c->ifindex ? c : NULL;
}

/* At entry: copies the frame if the capture may want it, before the switch
 * changes it, and arms the record that tr_capture_record sends at exit. */
static __always_inline int tr_capture_in(void *ctx, const int xdp, __u32 ifindex, __u32 len,
					 __u32 meta)
{
	const struct tr_capture_conf *c = tr_capture_conf();
	const struct tr_port *in;
	struct tr_capture_buf *b;
	struct tr_walk *w;
	__u32 zero = 0;
	__u64 n;

	if (!c)
		return 0;
	in = tr_port_of(ifindex);
	if (!in)
		return 0;
	if (ifindex == c->ifindex) {
		if (!(c->dirs & TR_CAPTURE_IN))
			return 0;
	} else if (!(c->dirs & TR_CAPTURE_OUT) || (in->bridge != c->bridge && !c->walks)) {
		return 0;
	}
	b = bpf_map_lookup_elem(&capture_buf, &zero);
	if (!b)
		return 0;
	n = len < c->snaplen ? len : c->snaplen;
	if (n > TR_CAPTURE_SNAP)
		n = TR_CAPTURE_SNAP;
	/* The bounds checked on the register the helper gets. */
	asm volatile("" : "+r"(n));
	if (n < 1 || n > TR_CAPTURE_SNAP)
		return 0;
	if (tr_load_bytes(ctx, xdp, 0, b->data, n))
		return 0;
	b->rec.ts_ns = bpf_ktime_get_ns();
	b->rec.len = len;
	b->rec.caplen = n;
	b->rec.meta_tci = meta >> 16;
	b->rec.meta_proto = meta & 0xffff;
	w = tr_walk_cur();
	if (w) {
		w->nsel = 0; /* see tr_capture_record */
		w->grouped = 0;
		w->drop.noted = 0;
	}
	b->grouped = 0;
	b->armed = 1;
	return 0;
}

/* Global functions (tr_capture_in_xdp, tr_capture_in_tc): verified once,
 * and the switch's paths meet again after them (nothing they return is
 * kept). meta: tr_pkt's meta_tci << 16 | meta_proto. */
TR_TWIN(tr_capture_in, (__u32 ifindex, __u32 len, __u32 meta), (ifindex, len, meta))

/* The frame being switched was flooded to its group's ports only (a
 * snooping bridge's plain flood, lib/snoop.h): its record asks this CPU's
 * group_cur, which holds them until the frame's record goes out. (A walked
 * flood's record reads the walk's choice, which asked the group.) */
static __always_inline void tr_capture_grouped(void)
{
	__u32 zero = 0;
	struct tr_capture_buf *b = bpf_map_lookup_elem(&capture_buf, &zero);

	if (b)
		b->grouped = 1;
}

/* Whether a flood of bridge br from port in (in_ifindex) that did not go
 * through patch ports left by port out (ifindex): one of the bridge's
 * ports, in the frame's VLAN, not refusing its kind of flood, among its
 * group's ports if it went to a group's: the egress rule (lib/door.h), as
 * the flood's copies ask it at the door. */
static __always_inline int tr_capture_flooded_to(const struct tr_capture_buf *b,
						 const struct tr_bridge *br, const struct tr_port *in,
						 __u32 in_ifindex, const struct tr_port *out, __u32 ifindex,
						 __u32 vid)
{
	enum tr_drop_reason why;
	__u16 deny = 0;

	/* out is a port of br: the caller found it in br's ports (tr_port's bridge). */
	if (b->rec.caplen < ETH_ALEN)
		return 0;
	if (br->flags & TR_BRIDGE_POLICY)
		deny = tr_flood_deny(in->flags, b->data);
	return tr_door_ask(out, ifindex, in_ifindex, vid, deny, b->grouped ? tr_group_cur() : NULL, &why) !=
	       TR_EGRESS_DENY;
}

/* What the switch did with a frame, for tr_capture_record: scalars, which
 * is what a global function can take. */
#define TR_CAP_ACTION 3      /* enum tr_action */
#define TR_CAP_DROPPED 4     /* the program's verdict drops it */
#define TR_CAP_REASON_SHIFT 8 /* bits 8-15: why (the decision's reason) */
#define TR_CAP_VID_SHIFT 16  /* in a VLAN-aware bridge, its VLAN */

/*
 * At exit: the record of the frame copied at entry, if it concerns the
 * capture. A global function, verified once and not on each of the
 * switch's ways out. in: the ingress ifindex; egress: where a forward
 * went; how: TR_CAP_*.
 */
__attribute__((noinline)) int tr_capture_record(__u32 in, __u32 egress, __u32 how)
{
	const struct tr_capture_conf *c = tr_capture_conf();
	const struct tr_port *out, *inp;
	const struct tr_bridge *br;
	struct tr_capture_buf *b;
	struct tr_capture_rec *r;
	struct tr_walk *w;
	__u32 zero = 0, caplen, slot, action = how & TR_CAP_ACTION, vid = how >> TR_CAP_VID_SHIFT;
	enum tr_drop_reason why;
	__u64 *lost;
	int walked = 0, dropped;

	b = bpf_map_lookup_elem(&capture_buf, &zero);
	if (!b || !b->armed)
		return 0;
	b->armed = 0;
	inp = tr_port_of(in);
	if (!c || !inp)
		return 0;
	/* A frame that went through the walk (tr_walk: patch ports, and any
	 * stage that joins it) left by the ports it chose (none, when its
	 * group had no port but its ingress); tr_capture_in cleared its count
	 * and grouped, which only a walk of this frame sets again. */
	w = tr_walk_cur();
	walked = w && (w->nsel || w->grouped);
	r = &b->rec;
	r->egress = 0;
	r->vid = 0;
	r->tag = TR_CAPTURE_TAG_KEEP;
	r->reason = 0;
	r->beyond = 0;
	/* A flood the program's verdict drops went out by its other ports
	 * unless the frame's drop was noted (action TR_ACT_DROP): at tc, the
	 * frame itself is the last copy, which an overlay port's MTU may
	 * refuse (a copy's drop). */
	dropped = action == TR_ACT_DROP || ((how & TR_CAP_DROPPED) && action != TR_ACT_FLOOD);
	if (in == c->ifindex) {
		r->dir = TR_CAPTURE_IN;
		if (dropped) {
			r->verdict = TR_CAPTURE_DROPPED;
			r->reason = (how >> TR_CAP_REASON_SHIFT) & 0xff;
			/* A frame the walk dropped: the walk's note. */
			if (r->reason == TR_DROP__MAX && w && w->drop.noted) {
				r->reason = w->drop.reason;
				r->beyond = w->drop.beyond;
			}
		} else if (action == TR_ACT_FORWARD) {
			r->verdict = TR_CAPTURE_FORWARDED;
			/* A patch port when the walk took it on to several ports. */
			r->egress = tr_is_patch(egress) ? 0 : egress;
		} else {
			r->verdict = TR_CAPTURE_FLOODED;
		}
	} else {
		if (dropped)
			return 0;
		out = tr_port_of(c->ifindex);
		if (!out)
			return 0;
		if (walked) {
			slot = out->slot;
			if (!w || !tr_chosen(w, slot))
				return 0;
		} else if (action == TR_ACT_FORWARD) {
			if (egress != c->ifindex)
				return 0;
		} else {
			br = tr_bridge_of(inp->bridge);
			if (!br || inp->bridge != out->bridge ||
			    !tr_capture_flooded_to(b, br, inp, in, out, c->ifindex, vid))
				return 0;
		}
		r->dir = TR_CAPTURE_OUT;
		r->verdict = action == TR_ACT_FORWARD ? TR_CAPTURE_FORWARDED : TR_CAPTURE_FLOODED;
		r->egress = c->ifindex;
		if (vid) {
			/* As the egress rule left it on this port. */
			r->vid = vid;
			r->tag = tr_door_ask(out, c->ifindex, in, vid, 0, NULL, &why) == TR_EGRESS_UNTAGGED
					 ? TR_CAPTURE_TAG_UNTAG
					 : TR_CAPTURE_TAG_VID;
		}
	}
	caplen = r->caplen;
	if (caplen > TR_CAPTURE_SNAP)
		return 0;
	if (bpf_ringbuf_output(&capture_ring, r, sizeof(*r) + caplen, 0)) {
		lost = bpf_map_lookup_elem(&capture_lost, &zero);
		if (lost)
			(*lost)++;
	}
	return 0;
}

/* At exit: what the switch did, for tr_capture_record, with as little
 * work as may be on each of its ways out (the verifier follows each). */
static __always_inline void tr_capture_out(const struct tr_pkt *p, const struct tr_decision *d,
					   int dropped)
{
	__u32 how = d->action | tr_drop_noted(&d->drop) << TR_CAP_REASON_SHIFT |
		    (__u32)d->tag.vid << TR_CAP_VID_SHIFT;

	if (dropped)
		how |= TR_CAP_DROPPED;
	tr_capture_record(p->ifindex, d->egress_ifindex, how);
}

#endif
