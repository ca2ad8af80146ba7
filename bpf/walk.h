/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The walk through joined bridges (lib/patch.h) and mirrors: a frame
 * forwarded to a patch port, or flooded in a bridge that has some, or sent
 * in a bridge with mirrors, goes on in the bridges the patches lead to
 * (tr_hop, each bridge as the pipeline would decide it), and the walk
 * collects the interface ports it leaves by, with the span ports of the
 * mirrors it passes (tr_mirror); tr_walk sends it out by them.
 */
#ifndef TRESTLE_WALK_H
#define TRESTLE_WALK_H

#include "switch.h"
#include "egress.h"
#include "lib/filter.h"

/* The walk's copy to port out (ifindex, slot; NULL where the caller did
 * not look it up), through the door: way TR_WAY_CHOOSE, chosen now and
 * sent when the walk ends; TR_WAY_CROSS, across a patch port into the
 * bridge beyond. rule: the egress rule's answer if the caller asked it
 * (TR_EGRESS_ASK: the door asks, with the flags of deny and in, the
 * interface the frame entered the bridge by). */
static __always_inline enum tr_door_verdict tr_walk_door(void *ctx, const int xdp, const int way,
							 struct tr_walk *w, const struct tr_port *out,
							 __u32 ifindex, __u32 slot, __u32 in, __u16 deny,
							 enum tr_egress rule)
{
	struct tr_copy c = {};

	c.ifindex = ifindex;
	c.slot = slot;
	c.in = in;
	c.vid = tr_walk_vid(w);
	c.deny = deny;
	c.wire = w->wire;
	c.rule = rule;
	c.w = w;
	/* A flood's copy to a group (tr_walk_snoop): the door asks its port
	 * among the group's. */
	if (rule == TR_EGRESS_ASK && w->group)
		c.members = tr_group_cur();
	return tr_door(ctx, xdp, way, out, &c);
}

/* A flood the walk is about to emit in a bridge (flags, its ingress slot
 * there, st its counters): in a snooping bridge, a frame to an IP
 * multicast MAC is classified as the plain flood's is (lib/snoop.h): an
 * IGMP, MLD or PIM message reported to the daemon with the bridge's own
 * ingress (beyond a patch port, the patch port: a report from the far side
 * makes it a member port), and a group the table has goes to its ports
 * only (w->group: the door asks each copy's port, tr_walk_door), counted
 * grouped on st. A bridge without the flag pays its test. */
static __always_inline void tr_walk_snoop(void *ctx, const int xdp, struct tr_walk *w, __u32 bridge,
					  __u32 flags, __u32 slot, struct tr_port_stats *st)
{
	w->group = 0;
	if (!(flags & TR_BRIDGE_SNOOP) || !tr_mac_is_ipmcast(w->dst))
		return;
	if (!TR_CALL(xdp, tr_snoop, ctx, TR_SNOOP_WHO(bridge, w->vlan, slot), 0))
		return;
	w->group = 1;
	w->grouped = 1;
	if (st)
		st->c[TR_CNT_GROUPED]++;
}

/* The span port of the mirror of the port in slot that the walk copies the
 * frame to, in *span (ifindex, slot): once however many of its mirrored
 * ports the frame passes; a frame with copies is never remembered as a
 * path. 0: none. The rule is not asked of a span port, which takes every
 * copy its mirror sends (its tag is made as it leaves). */
static __always_inline int tr_mirror_span(struct tr_walk *w, __u32 slot, __u32 *ifindex, __u32 *span)
{
	const struct tr_mirror *m = bpf_map_lookup_elem(&mirrors, &slot);

	if (!m || !m->span_slot)
		return 0;
	if (m->flags & TR_MIRROR_VLANS) {
		const struct tr_port_vlans *pv = bpf_map_lookup_elem(&mirror_vlans, &slot);

		if (!pv || !((pv->bits[(w->vlan >> 6) & 63] >> (w->vlan & 63)) & 1))
			return 0;
	}
	w->unicast = 0;
	if (tr_chosen(w, m->span_slot))
		return 0;
	*ifindex = m->span_ifindex;
	*span = m->span_slot;
	return 1;
}

/* The walk copies the frame to the span port of the mirror of the port in
 * slot (tr_mirror_span). */
static __always_inline void tr_mirror(void *ctx, const int xdp, struct tr_walk *w, __u32 slot)
{
	__u32 ifindex, span;

	if (tr_mirror_span(w, slot, &ifindex, &span))
		tr_walk_door(ctx, xdp, TR_WAY_CHOOSE, w, NULL, ifindex, span, 0, 0, TR_EGRESS_AS_IS);
}

/* The walk sends the frame out of port out (ifindex, slot) of its bridge,
 * whose rule the caller asked (rule), or asks it (TR_EGRESS_ASK): across
 * it into the bridge beyond if it is a patch port, else by it, and to its
 * span port if what out sends is mirrored. */
static __always_inline void tr_pick(void *ctx, const int xdp, struct tr_walk *w,
				    const struct tr_port *out, __u32 ifindex, __u32 slot, __u32 in,
				    __u16 deny, enum tr_egress rule)
{
	if (tr_is_patch(ifindex)) {
		tr_walk_door(ctx, xdp, TR_WAY_CROSS, w, out, ifindex, slot, in, deny, rule);
		return;
	}
	if (tr_walk_door(ctx, xdp, TR_WAY_CHOOSE, w, out, ifindex, slot, in, deny, rule) == TR_DOOR_SENT &&
	    out && (out->flags & TR_PORT_MIRROR_OUT))
		tr_mirror(ctx, xdp, w, slot);
}

/* One port of a bridge's flood in the walk (ifindex, slot), the flags that
 * keep the copy off it in deny, the port it entered the bridge by in: the
 * door asks the rule of a patch port, and of an interface's when check
 * says the bridge's ports may refuse it (VLANs, policies, mirrors). (The
 * copy met the bridge's rules on the egress port before, in tr_emit.) At
 * tc the copies to the ports it chooses are sent by the flood's loop
 * (TR_WAY_CHOOSE_LATER). */
static __always_inline void tr_emit_to(void *ctx, const int xdp, struct tr_walk *w, __u32 ifindex,
				       __u32 slot, __u32 in, __u16 deny, int check)
{
	const struct tr_port *out = NULL;
	__u32 span_ifindex, span;

	if (tr_is_patch(ifindex)) {
		tr_walk_door(ctx, xdp, TR_WAY_CROSS, w, tr_port_of(ifindex), ifindex, slot, in, deny,
			     TR_EGRESS_ASK);
		return;
	}
	if (check)
		out = tr_port_of(ifindex);
	if (tr_walk_door(ctx, xdp, TR_WAY_CHOOSE_LATER, w, out, ifindex, slot, in, deny,
			 check ? TR_EGRESS_ASK : TR_EGRESS_AS_IS) == TR_DOOR_SENT &&
	    out && (out->flags & TR_PORT_MIRROR_OUT) && tr_mirror_span(w, slot, &span_ifindex, &span))
		tr_walk_door(ctx, xdp, TR_WAY_CHOOSE_LATER, w, NULL, span_ifindex, span, 0, 0, TR_EGRESS_AS_IS);
}

/* One port of the flood as a global function (tr_emit_port_xdp,
 * tr_emit_port_tc), verified once rather than in each of the loop's up to
 * TR_MAX_BRIDGE_PORTS rounds, and with a stack of its own (the filter's
 * call below it would not fit). opts: the deny flags, and
 * bit 16 to check the port. */
static __always_inline int tr_emit_port(void *ctx, const int xdp, struct tr_walk *w,
					    __u32 ifindex, __u32 slot, __u32 opts)
{
	if (!w)
		return 0;
	tr_emit_to(ctx, xdp, w, ifindex, slot, w->entry, opts & 0xffff, opts >> 16);
	return 0;
}

TR_TWIN(tr_emit_port, (struct tr_walk *w, __u32 ifindex, __u32 slot, __u32 opts),
	(w, ifindex, slot, opts))

/* A bridge floods the frame: to each of its ports but except, those in
 * the frame's VLAN; through each patch into the bridge beyond. The loop is
 * a plain one, not a bpf_loop: tr_emit is a global function, verified once
 * a build, so its TR_MAX_BRIDGE_PORTS rounds cost the verifier some 20,000
 * instructions, while a bpf_loop callback would be one more stack frame on
 * the deepest chain of calls (tr_hop, tr_emit, the copy, tr_door_copy_tc),
 * past the verifier's 512 bytes. */
static __always_inline int tr_emit(void *ctx, const int xdp, struct tr_walk *w, __u32 bridge,
				   __u32 except)
{
	const struct tr_bridge *br = tr_bridge_of(bridge);
	const struct tr_port *in;
	__u16 deny = 0;
	int check;

	if (!br || !w)
		return 0;
	if (br->flags & TR_BRIDGE_POLICY) {
		in = tr_port_of(except);
		deny = tr_flood_deny(in ? in->flags : 0, w->dst);
	}
	w->fset = 0;
	if (filter_on && (br->flags & TR_BRIDGE_FILTER) && (br->flags & TR_BRIDGE_FILTER_OUT)) {
		in = tr_port_of(except);
		if (in) {
			w->fset = br->filter_set;
			w->fin = in->slot;
		}
	}
	check = w->on || deny || (br->flags & TR_BRIDGE_MIRROR) || w->group;
	w->entry = except; /* the door's hairpin (the loop leaves it out too) */
	for (__u32 i = 0; i < TR_MAX_BRIDGE_PORTS; i++) {
		__u32 ifindex, slot;

		if (i >= br->nports)
			break;
		ifindex = br->ports[i].ifindex;
		slot = br->ports[i].slot;
		if (ifindex == except)
			continue;
		if (filter_on && w->fset) {
			/* The bridge has rules on the egress port: each copy meets
			 * them. Called here, not in tr_emit_port: one frame less on
			 * the deepest chain of calls (512 bytes of stack). */
			__u32 r = TR_CALL(xdp, tr_filter, ctx, w->fset, w->fin | slot << 16, w->vlan, w->wire);

			if (r) {
				/* On the ingress port in the frame's first bridge. */
				tr_drop(&w->drop, tr_stats(w->fin), tr_filter_reason(r), w->fin != w->in_slot);
				continue;
			}
		}
		TR_CALL(xdp, tr_emit_port, ctx, w, ifindex, slot, deny | (check ? 1u << 16 : 0));
		if (!xdp && w->npend)
			tr_choose_flush_tc(ctx, w); /* the copies the port left (tr_choose_tc_later) */

	}
	return 0;
}

/* Global functions (tr_emit_xdp, tr_emit_tc): each verified once, not at
 * each of its calls. */
TR_TWIN(tr_emit, (struct tr_walk *w, __u32 bridge, __u32 except), (w, bridge, except))

/* The filter of a bridge the walk enters through a patch port: 1 when it
 * blocks the frame (ports: the patch port's slot, and the egress port's in
 * the high half for a forward), counted on the patch port. */
static __always_inline int tr_hop_filtered(void *ctx, const int xdp, struct tr_walk *w,
					   const struct tr_bridge *br, __u32 ports)
{
	__u32 r;

	if (!filter_on || !(br->flags & TR_BRIDGE_FILTER))
		return 0;
	r = TR_CALL(xdp, tr_filter, ctx, br->filter_set, ports, w->vlan, w->wire);
	if (!r)
		return 0;
	tr_drop(&w->drop, tr_stats(ports & 0xffff), tr_filter_reason(r), 1);
	return 1;
}

/*
 * The frame enters the bridge of patch port in_slot through it: learned
 * there, looked up, and forwarded or flooded by that bridge's rules, as if it
 * had arrived from a wire. Drops are counted on the patch port it came in by.
 */
static __always_inline int tr_hop(void *ctx, const int xdp, struct tr_walk *w, __u32 in_slot)
{
	enum tr_drop_reason reason = TR_DROP_NO_BRIDGE;
	struct tr_table_view v = {};
	enum tr_egress rule;
	const struct tr_bridge *br;
	const struct tr_port *in, *out;
	struct tr_port_stats *st;
	struct tr_patch *pp;
	__u32 self, egress, slot;

	if (!w)
		return 0;
	pp = tr_patch_of(in_slot);
	st = tr_stats(in_slot);
	if (!pp || !st)
		return 0;
	in = &pp->port;
	self = TR_PATCH_IFINDEX | in_slot;
	br = tr_bridge_of(in->bridge);
	if (!br || !br->nports) {
		tr_drop(&w->drop, st, TR_DROP_NO_BRIDGE, 1);
		return 0;
	}
	/* No memo here: the CPU's memos stay those of the frames' first
	 * bridge. The stamp is the walk's, in its per-CPU entry. */
	v.at = &w->at;
	switch (tr_bridge_step(&v, in, self, br, w->vlan, tr_walk_vid(w), w->src, w->dst, st, &out,
			       &egress, &slot, &rule, &reason)) {
	case TR_ACT_DROP:
		tr_drop(&w->drop, st, reason, 1);
		return 0;
	case TR_ACT_FLOOD:
		goto flood;
	default:
		break;
	}
	if (!out)
		return 0;
	if (tr_hop_filtered(ctx, xdp, w, br, in_slot | slot << 16))
		return 0;
	/* The rule was asked in the bridge step, before the filter: the walk's
	 * door takes its yes (the copy is tagged as it leaves). */
	tr_pick(ctx, xdp, w, out, egress, slot, self, 0, TR_EGRESS_AS_IS);
	return 0;

flood:
	if (!(br->flags & TR_BRIDGE_FILTER_OUT) && tr_hop_filtered(ctx, xdp, w, br, in_slot))
		return 0;
	st->c[TR_CNT_FLOODED]++;
	w->unicast = 0;
	tr_walk_snoop(ctx, xdp, w, in->bridge, br->flags, in_slot, st);
	return TR_CALL(xdp, tr_emit, ctx, w, in->bridge, self);
}

/* Global functions (tr_hop_xdp, tr_hop_tc): verified once a build. */
TR_TWIN(tr_hop, (struct tr_walk *w, __u32 in_slot), (w, in_slot))

/* Whether the walk chose every port of r but the ingress (a port of r
 * or not): then a broadcast over r's devmap, which excludes the ingress,
 * sends exactly the walk's copies. The walk's ports are all in r, not the
 * ingress, and as many as r has but the ingress. */
static __always_inline int tr_reach_all(const struct tr_reach *r, const struct tr_walk *w)
{
	__u32 n = w->ndirty;

	if (tr_chosen(w, w->in_slot) || w->nsel + tr_in_set(r->sel, w->in_slot) != r->n)
		return 0;
	if (n > TR_WALK_DIRTY) {
		for (__u32 k = 0; k < TR_SEL_WORDS; k++)
			if (w->sel[k] & ~r->sel[k])
				return 0;
		return 1;
	}
	for (__u32 j = 0; j < TR_WALK_DIRTY; j++) {
		__u32 k;

		if (j >= n)
			break;
		k = w->dirty[j];
		if (k >= TR_SEL_WORDS || (w->sel[k] & ~r->sel[k]))
			return 0;
	}
	return 1;
}

/* A round of the reach's count: each copy of a broadcast over the reach
 * flood set, which runs no devmap program, counted as sent. */
static __always_inline long tr_reach_round(__u64 i, const struct tr_ports_loop *a)
{
	const struct tr_reach *r = a->reach;
	__u32 slot;

	if (!r || i >= TR_MAX_BRIDGE_PORTS || i >= r->n)
		return 1;
	slot = r->slots[i];
	if (slot != a->ingress) {
		struct tr_copy c = {};

		c.slot = slot;
		c.wire = a->wire;
		c.rule = TR_EGRESS_AS_IS;
		tr_door(NULL, TR_XDP, TR_WAY_SET, NULL, &c);
	}
	return 0;
}

/* Counts a copy sent to each port of reach r but the one in slot in. */
TR_PORTS_LOOP(tr_reach_count, tr_reach_round, (const struct tr_reach *r, __u32 in, __u32 wire), (r, in, wire),
	      (.reach = r, .n = r ? r->n : 0, .ingress = in, .wire = wire))

/* XDP: the copies to every port of reach r but the ingress, in one
 * broadcast over the bridge's reach flood set, which runs no devmap
 * program; each copy counted here as trestle_patch_egress would. One run of
 * that program a copy was most of a mirror's cost. 0: no set (the caller
 * goes the general way), else the verdict in *ret. */
static __always_inline int tr_reach_send(struct tr_decision *d, const struct tr_reach *r,
					 __u32 wire, int *ret)
{
	long sent = tr_broadcast(&reach_floods, d->bridge);

	if (sent == TR_NO_SET)
		return 0;
	if (sent < 0) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		*ret = XDP_DROP;
		return 1;
	}
	tr_reach_count(r, d->in_slot, wire);
	*ret = XDP_REDIRECT;
	return 1;
}

/* XDP: a walk that chose every port its bridge's copies may reach but the
 * ingress, none retagged (a flood that reaches every port), goes out over
 * the reach flood set (tr_reach_send). 0: not so (the general way). */
static __always_inline int tr_walk_reach_xdp(struct tr_decision *d, struct tr_walk *w, int *ret)
{
	const struct tr_reach *r;

	if (w->on)
		return 0;
	r = bpf_map_lookup_elem(&reaches, &d->bridge);
	if (!r || !tr_reach_all(r, w))
		return 0;
	return tr_reach_send(d, r, w->wire, ret);
}

/* The span port of the mirror of the port in slot, or 0 (none, or one that
 * copies only some VLANs: the walk's to decide). */
static __always_inline __u32 tr_span_of(__u32 slot)
{
	const struct tr_mirror *m = bpf_map_lookup_elem(&mirrors, &slot);

	if (!m || (m->flags & TR_MIRROR_VLANS))
		return 0;
	return m->span_slot;
}

/*
 * XDP, a forward in a bridge with mirrors and no patch ports, not
 * VLAN-aware, in a build without capture (which reads the walk's choice):
 * the way out and the span ports of the mirrors it passes, found without
 * the walk. When they are every port of the bridge's reach but the ingress
 * (a mirrored port in a 3-port bridge), they go out in one broadcast
 * (tr_reach_send): all in the reach, none the ingress, none twice, and as
 * many as the reach has but the ingress. 0: not so (the walk decides; it
 * finds the same ports).
 */
static __always_inline int tr_mirror_fast_xdp(struct tr_decision *d, __u32 wire, int *ret)
{
	const struct tr_reach *r;
	__u32 span_in = 0, span_out, n = 1, out = d->egress_slot, in = d->in_slot;

	if (capture_on || d->tag.on || d->action != TR_ACT_FORWARD || (d->br->flags & TR_BRIDGE_PATCH))
		return 0;
	r = bpf_map_lookup_elem(&reaches, &d->bridge);
	if (!r || out == in || !tr_in_set(r->sel, out))
		return 0;
	if (d->in_flags & TR_PORT_MIRROR_IN) {
		span_in = tr_span_of(in);
		if (span_in) {
			if (span_in == out || span_in == in || !tr_in_set(r->sel, span_in))
				return 0;
			n++;
		}
	}
	if (d->out.flags & TR_PORT_MIRROR_OUT) {
		span_out = tr_span_of(out);
		if (span_out && span_out != span_in) {
			if (span_out == out || span_out == in || !tr_in_set(r->sel, span_out))
				return 0;
			n++;
		}
	}
	if (n + tr_in_set(r->sel, in) != r->n)
		return 0;
	return tr_reach_send(d, r, wire, ret);
}

/* XDP: the copies of a frame the walk sent to several ports, one broadcast
 * over the flood set of every port its bridge's patches reach; the slots
 * chosen travel in the frame's metadata to trestle_patch_egress. A walk
 * that chose all of them but the ingress, none retagged, is sent over the
 * reach flood set instead, with no program (tr_walk_reach_xdp). */
static __always_inline int tr_walk_flood_xdp(struct xdp_md *ctx, struct tr_decision *d,
					     struct tr_walk *w)
{
	void *data;
	__u64 *meta, tagged = 0;
	long ret;
	int r;

	if (tr_walk_reach_xdp(d, w, &r))
		return r;
	if (w->on) {
		if (tr_tag_to(ctx, TR_XDP, &d->tag, 0) < -TR_VLAN_HLEN) {
			tr_drop_frame(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return XDP_DROP;
		}
		tagged = 1; /* the copies carry their VLAN's tag */
	}
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta))) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	meta = (void *)(long)ctx->data_meta;
	data = (void *)(long)ctx->data;
	if ((void *)(meta + 1) > data) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	*meta = w->seq << 1 | tagged;
	ret = tr_broadcast(&patch_floods, d->bridge);
	if (ret < 0) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	return XDP_REDIRECT;
}

/*
 * The devmap program of the patch flood sets (trestle_patch_egress): it
 * runs on each copy of a frame the walk sent to several ports, and lets it
 * out only by the ports chosen, as the egress rule says.
 */
static __always_inline int tr_devmap_patch_egress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	__u64 *meta = (void *)(long)ctx->data_meta, m;
	const struct tr_port *out;
	struct tr_walk *w;
	__u32 i;

	if ((void *)(meta + 1) > data)
		return XDP_DROP;
	m = *meta;
	out = tr_port_of(ctx->egress_ifindex);
	if (!out)
		return XDP_DROP;
	i = (m >> 1) & (TR_WALK_RING - 1);
	w = bpf_map_lookup_elem(&walks, &i);
	if (!w || w->seq != m >> 1) /* its walk's entry taken by a later walk (tr_walk_new) */
		return tr_door_devmap(ctx, out, ctx->ingress_ifindex, 0, NULL, 0, 1);
	if (!tr_chosen(w, out->slot))
		return XDP_DROP; /* not a port the walk chose */
	if (bpf_xdp_adjust_meta(ctx, sizeof(*meta)))
		return XDP_DROP;
	return tr_door_devmap(ctx, out, ctx->ingress_ifindex, 0, NULL, m & 1, 0);
}

/* A frame takes a path the CPU remembers: each crossing passes the door as
 * the memo remembers it, counted on the patch port. */
static __always_inline void tr_path_cross(const int xdp, const struct tr_path_memo *m, __u32 wire)
{
	for (__u32 i = 0; i < TR_MAX_PATCH_CHAIN; i++) {
		struct tr_copy c = {};

		if (i >= m->nhops)
			break;
		c.slot = m->hops[i];
		c.wire = wire;
		c.rule = TR_EGRESS_AS_IS;
		tr_door(NULL, xdp, TR_WAY_SET, NULL, &c);
	}
}

/*
 * The frame goes on through patch ports: its bridge forwards it to one
 * (d->out), or floods it in a bridge that has some. A frame between two
 * stations whose path this CPU remembers goes straight to its last port.
 * A bridge with mirrors sends its frames this way too: the walk adds the
 * span ports to the ports it chooses (tr_mirror), and its copies go out as
 * a flood's do.
 */
static __always_inline int tr_walk(void *ctx, const int xdp, struct tr_pkt *p,
				   struct tr_decision *d)
{
	const struct tr_path_memo *m;
	const struct tr_port *out;
	struct tr_walk *w;
	__u16 first = 0;

	if (!d->eth || !d->br || !d->in_st) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return tr_verdict_drop(xdp);
	}
	if (d->action == TR_ACT_FORWARD && (d->out.flags & TR_PORT_PATCH)) {
		first = d->egress_slot;
		m = NULL;
		if (!(d->in_flags & TR_PORT_MIRROR_IN))
			m = tr_path_known(d->v.memo, &d->v, first, d->eth->h_source, d->eth->h_dest,
					  d->vlan);
		if (m) {
			out = tr_port_of(m->out_ifindex);
			if (out && out->slot == m->out_slot && !(out->flags & TR_PORT_PATCH)) {
				tr_path_cross(xdp, m, p->wire);
				d->out = *out;
				d->egress_ifindex = m->out_ifindex;
				d->egress_slot = m->out_slot;
				return tr_forward(ctx, xdp, p, d, 0);
			}
		}
	}
	if (xdp) {
		int ret;

		if (tr_mirror_fast_xdp(d, p->wire, &ret))
			return ret;
	}
	w = tr_walk_new();
	if (!w) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return tr_verdict_drop(xdp);
	}
	/* What the walk reads before it writes, and capture after it; not the
	 * whole struct (its queue and hops are read only below their counts). */
	w->nsel = 0;
	w->head = 0;
	w->tail = 0;
	w->nhops = 0;
	w->drop.noted = 0;
	w->npend = 0;
	w->fset = 0;
	w->group = 0;
	w->grouped = 0;
	__builtin_memcpy(w->src, d->eth->h_source, 6);
	__builtin_memcpy(w->dst, d->eth->h_dest, 6);
	w->vlan = d->vlan;
	w->on = d->tag.on;
	w->wire = p->wire;
	w->ingress = p->ifindex;
	w->in_slot = d->in_slot;
	w->pcp = d->tag.ctag ? d->tag.tci : 0;
	w->at.now = tr_view_now(&d->v); /* once, not at each bridge's learning */
	w->at.gen = d->v.at->gen;
	w->at.mgen = d->v.at->mgen;
	w->at.tick = d->v.at->tick;
	w->unicast = 1;
	/* What the ingress port receives is mirrored: its copy goes first. */
	if (d->in_flags & TR_PORT_MIRROR_IN)
		tr_mirror(ctx, xdp, w, d->in_slot);
	if (first) {
		tr_walk_door(ctx, xdp, TR_WAY_CROSS, w, &d->out, d->egress_ifindex, first, p->ifindex, 0,
			     TR_EGRESS_AS_IS);
	} else if (d->action == TR_ACT_FORWARD) {
		/* To a port of a bridge with mirrors (the rule asked in the
		 * bridge step: the walk's door takes its yes). */
		tr_pick(ctx, xdp, w, &d->out, d->egress_ifindex, d->egress_slot, p->ifindex, 0,
			TR_EGRESS_AS_IS);
	} else {
		w->unicast = 0;
		tr_walk_snoop(ctx, xdp, w, d->bridge, d->br->flags, d->in_slot, d->in_st);
		TR_CALL(xdp, tr_emit, ctx, w, d->bridge, p->ifindex);
	}
	for (__u32 i = 0; i < TR_MAX_PATCH_CHAIN; i++) {
		__u32 slot;

		if (w->head >= w->tail)
			break;
		slot = w->queue[w->head & (TR_MAX_PATCH_CHAIN - 1)];
		w->head++;
		TR_CALL(xdp, tr_hop, ctx, w, slot);
	}
	if (!w->nsel) {
		/* A frame a bridge of the walk dropped was counted there: a
		 * drop, once, with its reason. One sent to its group's ports
		 * only, which were none but its ingress, went where it had to
		 * (as the plain flood to a group, no drop). */
		if (w->drop.noted)
			d->action = TR_ACT_DROP;
		else if (!w->grouped)
			tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return tr_verdict_drop(xdp);
	}
	if (first)
		tr_path_remember(d->v.memo, w, first);
	if (w->nsel == 1 || !xdp) {
		out = tr_port_of(w->last_ifindex);
		if (!out) {
			tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
			return tr_verdict_drop(xdp);
		}
		if (!xdp && w->nsel > 1) {
			/* tc: the frame itself is the last of several copies
			 * (earlier ones may have changed its tag), through the
			 * door as they went. Too long for an overlay port, it is
			 * that copy's drop, counted there, not the frame's: the
			 * others went. */
			int r = tr_door_copy_tc(ctx, w->last_ifindex, w->on ? w->vlan : 0,
						tr_copy_opts(w->pcp, 1, 0));

			if (r == TR_COPY_TOO_LONG || r == 0)
				return TC_ACT_SHOT;
			if (r < 0) {
				tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
				return TC_ACT_SHOT;
			}
			return tr_redirect_port(TR_TC, w->last_ifindex, w->last_slot);
		}
		d->out = *out;
		d->egress_ifindex = w->last_ifindex;
		d->egress_slot = w->last_slot;
		return tr_forward(ctx, xdp, p, d, 0);
	}
	return tr_walk_flood_xdp(ctx, d, w);
}

#endif
