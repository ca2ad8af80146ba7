/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The two attach points of the switch. Both run tr_run(): tr_pipeline() from
 * switch.h decides, and the egress half below carries the decision out. The
 * modes differ only in a few context operations (read the frame, push, pop
 * or rewrite a VLAN tag, redirect to a port), the context shim of
 * lib/ctx.h, each one call with an XDP and a tc implementation, chosen by a
 * constant the compiler folds (DESIGN.md rule 5).
 *
 * A frame like the last one this CPU forwarded in a plain bridge skips the
 * pipeline: the decision memo (lib/memo.h) counts it and sends it on.
 *
 * xdp: packet-rate mode. Unicast through the tx_ports devmap (by port slot), flooding through
 *      the bridge's devmap with BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS.
 * tc:  stack-friendly mode (tcx ingress). The skb keeps its GSO and checksum
 *      state; unicast with bpf_redirect(), flooding by cloning to each port.
 */
#include "switch.h"
#include "lib/capture.h"
#include "lib/filter.h"
#include "lib/memo.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Enums reach BTF, and so bpf2go, only through a typed object; these are never used. */
enum tr_drop_reason _btf_drop_reason __attribute__((unused));
enum tr_counter _btf_counter __attribute__((unused));
enum tr_vlan_counter _btf_vlan_counter __attribute__((unused));
enum tr_limits _btf_limits __attribute__((unused));
enum tr_fdb_flags _btf_fdb_flags __attribute__((unused));
enum tr_port_flags _btf_port_flags __attribute__((unused));
enum tr_bridge_flags _btf_bridge_flags __attribute__((unused));
enum tr_patch_ifindex _btf_patch_ifindex __attribute__((unused));
enum tr_storm_kind _btf_storm_kind __attribute__((unused));
enum tr_mirror_flags _btf_mirror_flags __attribute__((unused));
enum tr_filter_limits _btf_filter_limits __attribute__((unused));
enum tr_filter_flags _btf_filter_flags __attribute__((unused));
enum tr_state_flags _btf_state_flags __attribute__((unused));
enum tr_state_timeouts _btf_state_timeouts __attribute__((unused));
/* The events' types as load-time constants, never read: .rodata is each
 * program's own, where a new variable of .bss (pinned, with the table's
 * generations) would change its layout, which an upgrade then copies. */
const volatile enum tr_event_limits _btf_event_limits __attribute__((unused)) = 0;
const volatile enum tr_event_type _btf_event_type __attribute__((unused)) = 0;
const volatile struct tr_event _btf_event __attribute__((unused)) = {};

/* ---- egress ---- */

/* Known unicast: to one port, tagged as that port takes the frame's VLAN. */
static __always_inline int tr_forward(void *ctx, const int xdp, struct tr_pkt *p,
				      struct tr_decision *d)
{
	__u32 wire = p->wire;
	long ret;

	if (d->tag.on) {
		int delta;

		if (!d->out || !tr_vlan_carries(d->out, d->tag.vid)) {
			tr_drop(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return tr_verdict_drop(xdp);
		}
		delta = tr_tag_to(ctx, xdp, &d->tag, tr_vlan_untagged_on(d->out, d->tag.vid));
		if (delta < -TR_VLAN_HLEN) {
			tr_drop(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return tr_verdict_drop(xdp);
		}
		wire += delta;
	}
	ret = tr_redirect_port(xdp, d->egress_ifindex, d->egress_slot);
	if (ret < 0) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return tr_verdict_drop(xdp);
	}
	tr_count_tx(tr_stats(d->egress_slot), wire);
	tr_vlan_count_tx(d->tag.st, wire);
	return ret;
}

/* XDP flood: one broadcast redirect over the bridge's devmap. In a
 * VLAN-aware bridge the frame goes out tagged with its VLAN, over the
 * devmap whose entries each run trestle_vlan_egress. */
static __always_inline int tr_flood_xdp(struct xdp_md *ctx, struct tr_pkt *p, struct tr_decision *d)
{
	void *flood;
	long ret;

	if (!d->br || d->br->nports < 2 || (d->tag.on && d->tag.members < 2)) {
		/* A broadcast to a set holding only the ingress frees the frame
		 * without a word: count it instead. */
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	if (d->tag.on) {
		if (tr_tag_to(ctx, TR_XDP, &d->tag, 0) < -TR_VLAN_HLEN) {
			tr_drop(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return XDP_DROP;
		}
		flood = bpf_map_lookup_elem(&vlan_floods, &d->bridge);
	} else {
		flood = bpf_map_lookup_elem(&floods, &d->bridge);
	}
	if (!flood) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	ret = bpf_redirect_map(flood, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
	if (ret != XDP_REDIRECT) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	/* In a VLAN-aware bridge each copy is counted where it leaves. */
	if (!d->tag.on)
		tr_count_flood_tx(d->br, p->ifindex, p->wire);
	return XDP_REDIRECT;
}

/* XDP flood in a bridge with port policies that is not VLAN-aware: the
 * frame as it is, over the program flood set, whose devmap program keeps
 * the copies off the ports that refuse them and counts the others. Apart
 * from tr_flood_xdp, whose code a bridge without policies runs as before. */
static __always_inline int tr_flood_xdp_policy(struct xdp_md *ctx, struct tr_decision *d)
{
	void *flood = bpf_map_lookup_elem(&vlan_floods, &d->bridge);

	if (!flood || !d->br || d->br->nports < 2 ||
	    bpf_redirect_map(flood, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS) != XDP_REDIRECT) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	return XDP_REDIRECT;
}

/*
 * A devmap program's copy, tagged with its VLAN, leaves by out as out takes
 * that VLAN: not at all where out does not carry it, untagged where it is
 * out's untagged VLAN; counted on out and in its VLAN there.
 */
static __always_inline int tr_devmap_vlan_out(struct xdp_md *ctx, const struct tr_port *out)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tr_vlan_hdr *vh = (void *)(eth + 1);
	struct tr_vlan_entry *v;
	__u32 wire = data_end - data;
	__u16 vid;

	if ((void *)(vh + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_8021Q))
		return XDP_DROP;
	vid = bpf_ntohs(vh->tci) & 0x0fff;
	if (!tr_vlan_carries(out, vid))
		return XDP_DROP;
	if (tr_vlan_untagged_on(out, vid)) {
		if (tr_xdp_pop(ctx))
			return XDP_DROP;
		wire -= TR_VLAN_HLEN;
	}
	tr_count_tx(tr_stats(out->slot), wire);
	v = tr_vlan_of(out->bridge, vid);
	if (v)
		tr_vlan_count_tx(tr_vlan_stats_of(v->idx), wire);
	return XDP_PASS;
}

/*
 * The devmap program of the flood set of a bridge that is VLAN-aware or has
 * port policies: it runs on each copy of a flooded frame, for the port the
 * copy is about to leave by. A port that refuses the frame's kind of flood,
 * or is protected as the ingress is, gets nothing. In a VLAN-aware bridge
 * the copy arrives tagged with its VLAN: a port that does not carry the
 * VLAN gets nothing, one that takes it untagged gets it without the tag.
 */
SEC("xdp/devmap")
int trestle_vlan_egress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	const struct tr_port *out, *in;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	out = tr_port_of(ctx->egress_ifindex);
	in = tr_port_of(ctx->ingress_ifindex);
	if (!out || !in || (out->flags & tr_flood_deny(in->flags, eth->h_dest)))
		return XDP_DROP;
	if (!out->pvid && !(out->flags & TR_PORT_TRUNK)) {
		/* Not VLAN-aware: the frame leaves as it came. */
		tr_count_tx(tr_stats(out->slot), data_end - data);
		return XDP_PASS;
	}
	return tr_devmap_vlan_out(ctx, out);
}

/* tc flood, VLAN-unaware: clone to every other port; the original goes to
 * the last one. Finding the last without a loop keeps the verifier's work
 * linear. */
static __always_inline int tr_flood_tc(struct __sk_buff *skb, struct tr_pkt *p,
				       struct tr_decision *d)
{
	__u32 last;

	if (!d->br || d->br->nports < 2 || d->br->nports > TR_MAX_BRIDGE_PORTS) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS); /* nowhere to flood */
		return TC_ACT_SHOT;
	}
	/* The masks are no-ops after the check above; they show the verifier the bound. */
	last = (d->br->nports - 1) & (TR_MAX_BRIDGE_PORTS - 1);
	if (d->br->ports[last].ifindex == p->ifindex)
		last = (last - 1) & (TR_MAX_BRIDGE_PORTS - 1);
	for (__u32 i = 0; i < TR_MAX_BRIDGE_PORTS; i++) {
		__u32 ifindex;

		if (i >= last)
			break;
		ifindex = d->br->ports[i].ifindex;
		if (ifindex == p->ifindex)
			continue;
		if (bpf_clone_redirect(skb, ifindex, 0))
			tr_count_tx_dropped(tr_stats(d->br->ports[i].slot));
		else
			tr_count_tx(tr_stats(d->br->ports[i].slot), p->wire);
	}
	tr_count_tx(tr_stats(d->br->ports[last].slot), p->wire);
	return tr_redirect_port(TR_TC, d->br->ports[last].ifindex, d->br->ports[last].slot);
}

/*
 * One copy of a tc flood in a VLAN-aware bridge: to ifindex if its port
 * carries vid, tagged or untagged as it takes it. The skb's tag state is
 * changed in place for the copy and stays so for the next; pcp is the
 * priority the frame came in with, for a tag an earlier copy took off. A global
 * function, verified once rather than at each of the loop's 64 calls.
 * opts: the priority (bits 12-15), TR_COPY_LAST (no clone: the caller
 * redirects the frame itself), and the port flags that keep the copy off
 * the port (bits 16-31, tr_flood_deny). vid 0: the bridge is not
 * VLAN-aware, the copy leaves as it is.
 * Returns 0: not for this port, 1: sent (or ready to be), -1: could not.
 */
#define TR_COPY_LAST 1

static __always_inline __u32 tr_copy_opts(__u32 pcp, __u32 last, __u16 deny)
{
	return (pcp & 0xf000) | (last ? TR_COPY_LAST : 0) | ((__u32)deny << 16);
}

__attribute__((noinline)) int tr_vlan_copy(struct __sk_buff *skb, __u32 ifindex, __u32 vid,
					   __u32 opts)
{
	__u32 pcp = opts & 0xf000, last = opts & TR_COPY_LAST;
	struct tr_tag t = {};
	const struct tr_port *out;
	struct tr_vlan_entry *v;
	__u32 wire;
	int delta;

	if (!skb)
		return -1;
	out = tr_port_of(ifindex);
	if (!out || (out->flags & (opts >> 16)))
		return 0;
	if (!vid) {
		if (!last && bpf_clone_redirect(skb, ifindex, 0))
			return -1;
		tr_count_tx(tr_stats(out->slot), skb->len + (skb->vlan_present ? TR_VLAN_HLEN : 0));
		return 1;
	}
	if (!tr_vlan_carries(out, vid))
		return 0;
	t.vid = vid;
	t.tci = pcp & 0xf000; /* the frame's priority, if an earlier copy took its tag off */
	if (skb->vlan_present && skb->vlan_proto == bpf_htons(ETH_P_8021Q)) {
		t.ctag = 1;
		t.tci = skb->vlan_tci;
	}
	delta = tr_tag_to(skb, TR_TC, &t, tr_vlan_untagged_on(out, vid));
	if (delta < -TR_VLAN_HLEN)
		return -1;
	if (!last && bpf_clone_redirect(skb, ifindex, 0))
		return -1;
	wire = skb->len + (skb->vlan_present ? TR_VLAN_HLEN : 0);
	tr_count_tx(tr_stats(out->slot), wire);
	v = tr_vlan_of(out->bridge, vid);
	if (v)
		tr_vlan_count_tx(tr_vlan_stats_of(v->idx), wire);
	return 1;
}

/* tc flood, VLAN-aware or with port policies: a clone to each port the
 * frame may leave by, each tagged for its port; the original is consumed. */
static __always_inline int tr_flood_tc_vlan(struct __sk_buff *skb, struct tr_pkt *p,
					    struct tr_decision *d)
{
	__u32 opts, vid = d->tag.on ? d->tag.vid : 0;
	__u16 deny = 0;

	if (!d->br || !d->eth || (d->tag.on && d->tag.members < 2) || d->br->nports < 2) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return TC_ACT_SHOT;
	}
	/* Before the first clone, which ends every pointer into the frame. */
	if (d->br->flags & TR_BRIDGE_POLICY) {
		/* Looked up again here, so that no other path keeps it. */
		const struct tr_port *in = tr_port_of(p->ifindex);

		deny = tr_flood_deny(in ? in->flags : 0, d->eth->h_dest);
	}
	opts = tr_copy_opts(d->tag.ctag ? d->tag.tci : 0, 0, deny);
	for (__u32 i = 0; i < TR_MAX_BRIDGE_PORTS; i++) {
		__u32 ifindex;

		if (i >= d->br->nports)
			break;
		ifindex = d->br->ports[i].ifindex;
		if (ifindex == p->ifindex)
			continue;
		if (tr_vlan_copy(skb, ifindex, vid, opts) < 0)
			tr_count_tx_dropped(tr_stats(d->br->ports[i].slot));
	}
	return TC_ACT_STOLEN;
}

/* ---- patch ports: the walk through joined bridges (lib/patch.h) ---- */

/* tc: a copy to each port the walk chooses, sent when the next is chosen;
 * the frame itself goes to the last. */
static __always_inline void tr_choose_tc(struct __sk_buff *skb, struct tr_walk *w, __u32 ifindex,
					 __u32 slot)
{
	if (w->nsel) {
		if (w->on) {
			if (tr_vlan_copy(skb, w->last_ifindex, w->vlan, tr_copy_opts(w->pcp, 0, 0)) < 0)
				tr_count_tx_dropped(tr_stats(w->last_slot));
		} else if (bpf_clone_redirect(skb, w->last_ifindex, 0)) {
			tr_count_tx_dropped(tr_stats(w->last_slot));
		} else {
			tr_count_tx(tr_stats(w->last_slot), w->wire);
		}
	}
	tr_choose(w, ifindex, slot);
}

/* The walk copies the frame to the span port of the mirror of the port in
 * slot, once however many of its mirrored ports the frame passes; a frame
 * with copies is never remembered as a path. */
static __always_inline void tr_mirror(void *ctx, const int xdp, struct tr_walk *w, __u32 slot)
{
	const struct tr_mirror *m = bpf_map_lookup_elem(&mirrors, &slot);

	if (!m || !m->span_slot)
		return;
	if (m->flags & TR_MIRROR_VLANS) {
		const struct tr_port_vlans *pv = bpf_map_lookup_elem(&mirror_vlans, &slot);

		if (!pv || !((pv->bits[(w->vlan >> 6) & 63] >> (w->vlan & 63)) & 1))
			return;
	}
	w->unicast = 0;
	if (tr_chosen(w, m->span_slot))
		return;
	if (xdp)
		tr_choose(w, m->span_ifindex, m->span_slot);
	else
		tr_choose_tc(ctx, w, m->span_ifindex, m->span_slot);
}

/* The walk sends the frame out of interface port out (ifindex, slot), and
 * to out's span port if what out sends is mirrored. */
static __always_inline void tr_pick(void *ctx, const int xdp, struct tr_walk *w,
				    const struct tr_port *out, __u32 ifindex, __u32 slot)
{
	if (xdp)
		tr_choose(w, ifindex, slot);
	else
		tr_choose_tc(ctx, w, ifindex, slot);
	if (out && (out->flags & TR_PORT_MIRROR_OUT))
		tr_mirror(ctx, xdp, w, slot);
}

/* One port of a bridge's flood in the walk (ifindex, slot), the flags that
 * keep the copy off it in deny: through it to the bridge beyond if it is a
 * patch port, else out of it if it takes the frame. */
static __always_inline void tr_emit_to(void *ctx, const int xdp, struct tr_walk *w, __u32 ifindex,
				       __u32 slot, __u16 deny, int check)
{
	const struct tr_port *out;

	if (filter_on && w->fset) {
		/* The bridge has rules on the egress port: each copy meets them. */
		__u32 ports = w->fin | slot << 16, r;

		r = TR_CALL(xdp, tr_filter, ctx, w->fset, ports, w->vlan, w->wire);
		if (r) {
			tr_walk_drop(w, w->fin, r == TR_DROP_STATE_FULL ? TR_DROP_STATE_FULL : TR_DROP_FILTERED);
			return;
		}
	}
	if (tr_is_patch(ifindex)) {
		out = tr_port_of(ifindex);
		if (out && !(out->flags & deny))
			tr_cross(w, out, slot);
		return;
	}
	out = NULL;
	if (check) {
		out = tr_port_of(ifindex);
		if (!out || (out->flags & deny) || (w->on && !tr_vlan_carries(out, w->vlan)))
			return;
	}
	tr_pick(ctx, xdp, w, out, ifindex, slot);
}

/* One port of the flood as a global function (tr_emit_port_xdp,
 * tr_emit_port_tc), verified once rather than in each of the loop's 64
 * rounds (the tc build with the VLAN stage is otherwise near the
 * verifier's limit of a million instructions), and with a stack of its own
 * (the filter's call below it would not fit). opts: the deny flags, and
 * bit 16 to check the port. */
static __always_inline int tr_emit_port(void *ctx, const int xdp, struct tr_walk *w,
					    __u32 ifindex, __u32 slot, __u32 opts)
{
	if (!w)
		return 0;
	tr_emit_to(ctx, xdp, w, ifindex, slot, opts & 0xffff, opts >> 16);
	return 0;
}

TR_TWIN(tr_emit_port, (struct tr_walk *w, __u32 ifindex, __u32 slot, __u32 opts),
	(w, ifindex, slot, opts))

/* A bridge floods the frame: to each of its ports but except, those in
 * the frame's VLAN; through each patch into the bridge beyond. */
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
	check = w->on || deny || (br->flags & TR_BRIDGE_MIRROR);
	for (__u32 i = 0; i < TR_MAX_BRIDGE_PORTS; i++) {
		__u32 ifindex, slot;

		if (i >= br->nports)
			break;
		ifindex = br->ports[i].ifindex;
		slot = br->ports[i].slot;
		if (ifindex == except)
			continue;
		TR_CALL(xdp, tr_emit_port, ctx, w, ifindex, slot, deny | (check ? 1u << 16 : 0));
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
	tr_walk_drop(w, ports & 0xffff, r == TR_DROP_STATE_FULL ? TR_DROP_STATE_FULL : TR_DROP_FILTERED);
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
		tr_walk_drop(w, in_slot, TR_DROP_NO_BRIDGE);
		return 0;
	}
	/* No memo here: the CPU's memos stay those of the frames' first bridge. */
	v.gen = w->gen;
	v.mgen = w->mgen;
	v.now = w->now;
	v.tick = w->tick;
	if (tr_learn(&v, in, self, br, w->vlan, w->src, st, &reason)) {
		tr_walk_drop(w, in_slot, reason);
		return 0;
	}
	if (tr_mac_is_multicast(w->dst) || !tr_fdb_find(&v, in->bridge, w->vlan, w->dst, &egress, &slot))
		goto flood;
	if (egress == self) {
		tr_walk_drop(w, in_slot, TR_DROP_HAIRPIN);
		return 0;
	}
	out = tr_port_of(egress);
	if (!out || out->bridge != in->bridge || out->slot != slot) {
		tr_walk_drop(w, in_slot, TR_DROP_NO_EGRESS);
		return 0;
	}
	if (w->on && !tr_vlan_carries(out, w->vlan)) {
		tr_walk_drop(w, in_slot, TR_DROP_VLAN_EGRESS);
		return 0;
	}
	if (in->flags & out->flags & TR_PORT_PROTECTED) {
		tr_walk_drop(w, in_slot, TR_DROP_PROTECTED);
		return 0;
	}
	if (tr_hop_filtered(ctx, xdp, w, br, in_slot | slot << 16))
		return 0;
	if (out->flags & TR_PORT_PATCH) {
		tr_cross(w, out, slot);
		return 0;
	}
	tr_pick(ctx, xdp, w, out, egress, slot);
	return 0;

flood:
	if (!(br->flags & TR_BRIDGE_FILTER_OUT) && tr_hop_filtered(ctx, xdp, w, br, in_slot))
		return 0;
	st->c[TR_CNT_FLOODED]++;
	w->unicast = 0;
	return TR_CALL(xdp, tr_emit, ctx, w, in->bridge, self);
}

/* Global functions (tr_hop_xdp, tr_hop_tc): verified once a build. */
TR_TWIN(tr_hop, (struct tr_walk *w, __u32 in_slot), (w, in_slot))

/* XDP: the copies of a frame the walk sent to several ports, one broadcast
 * over the flood set of every port its bridge's patches reach; the slots
 * chosen travel in the frame's metadata to trestle_patch_egress. */
static __always_inline int tr_walk_flood_xdp(struct xdp_md *ctx, struct tr_decision *d,
					     struct tr_walk *w)
{
	void *flood, *data;
	__u64 *meta;
	long ret;

	if (w->on) {
		if (tr_tag_to(ctx, TR_XDP, &d->tag, 0) < -TR_VLAN_HLEN) {
			tr_drop(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return XDP_DROP;
		}
		w->sel[0] |= 1; /* the copies carry their VLAN's tag */
	}
	flood = bpf_map_lookup_elem(&patch_floods, &d->bridge);
	if (!flood || bpf_xdp_adjust_meta(ctx, -(int)sizeof(w->sel))) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	meta = (void *)(long)ctx->data_meta;
	data = (void *)(long)ctx->data;
	if ((void *)(meta + 4) > data) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	meta[0] = w->sel[0];
	meta[1] = w->sel[1];
	meta[2] = w->sel[2];
	meta[3] = w->sel[3];
	ret = bpf_redirect_map(flood, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
	if (ret != XDP_REDIRECT) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	return XDP_REDIRECT;
}

/*
 * The devmap program of the patch flood sets: it runs on each copy of a
 * frame the walk sent to several ports, and lets it out only by the ports
 * chosen, untagged where the port takes the frame's VLAN untagged.
 */
SEC("xdp/devmap")
int trestle_patch_egress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	__u64 *meta = (void *)(long)ctx->data_meta;
	const struct tr_port *out;
	__u64 word, tagged;
	void *data_end;
	__u32 slot;

	if ((void *)(meta + 4) > data)
		return XDP_DROP;
	out = tr_port_of(ctx->egress_ifindex);
	if (!out)
		return XDP_DROP;
	slot = out->slot;
	switch (slot >> 6) {
	case 0:
		word = meta[0];
		break;
	case 1:
		word = meta[1];
		break;
	case 2:
		word = meta[2];
		break;
	default:
		word = meta[3];
		break;
	}
	if (!slot || !((word >> (slot & 63)) & 1))
		return XDP_DROP; /* not a port the walk chose */
	tagged = meta[0] & 1;
	if (bpf_xdp_adjust_meta(ctx, sizeof(__u64) * 4))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (tagged)
		return tr_devmap_vlan_out(ctx, out);
	tr_count_tx(tr_stats(slot), data_end - data);
	return XDP_PASS;
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
	__u32 zero = 0;
	__u16 first = 0;

	if (!d->eth || !d->br || !d->in_st) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return tr_verdict_drop(xdp);
	}
	if (d->action == TR_ACT_FORWARD && (d->out->flags & TR_PORT_PATCH)) {
		first = d->egress_slot;
		if (d->tag.on && !tr_vlan_carries(d->out, d->tag.vid)) {
			tr_drop(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return tr_verdict_drop(xdp);
		}
		m = NULL;
		if (!(d->in_flags & TR_PORT_MIRROR_IN))
			m = tr_path_known(d->v.memo, &d->v, first, d->eth->h_source, d->eth->h_dest,
					  d->vlan);
		if (m) {
			out = tr_port_of(m->out_ifindex);
			if (out && out->slot == m->out_slot && !(out->flags & TR_PORT_PATCH)) {
				tr_path_count(m, p->wire);
				d->out = out;
				d->egress_ifindex = m->out_ifindex;
				d->egress_slot = m->out_slot;
				return tr_forward(ctx, xdp, p, d);
			}
		}
	}
	w = bpf_map_lookup_elem(&walks, &zero);
	if (!w) {
		tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		return tr_verdict_drop(xdp);
	}
	__builtin_memset(w, 0, sizeof(*w));
	__builtin_memcpy(w->src, d->eth->h_source, 6);
	__builtin_memcpy(w->dst, d->eth->h_dest, 6);
	w->vlan = d->vlan;
	w->on = d->tag.on;
	w->wire = p->wire;
	w->ingress = p->ifindex;
	w->in_slot = d->in_slot;
	w->pcp = d->tag.ctag ? d->tag.tci : 0;
	w->gen = d->v.gen;
	w->mgen = d->v.mgen;
	w->now = tr_view_now(&d->v); /* once, not at each bridge's learning */
	w->tick = d->v.tick;
	w->unicast = 1;
	/* What the ingress port receives is mirrored: its copy goes first. */
	if (d->in_flags & TR_PORT_MIRROR_IN)
		tr_mirror(ctx, xdp, w, d->in_slot);
	if (first) {
		tr_cross(w, d->out, first);
	} else if (d->action == TR_ACT_FORWARD) {
		/* To a port of a bridge with mirrors. */
		if (d->tag.on && !tr_vlan_carries(d->out, d->tag.vid)) {
			tr_drop(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return tr_verdict_drop(xdp);
		}
		tr_pick(ctx, xdp, w, d->out, d->egress_ifindex, d->egress_slot);
	} else {
		w->unicast = 0;
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
		 * drop, once, with its reason. */
		if (!w->dropped)
			tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
		else
			d->action = TR_ACT_DROP;
		return tr_verdict_drop(xdp);
	}
	if (first)
		tr_path_remember(d->v.memo, w, first);
	if (w->nsel == 1 || !xdp) {
		out = tr_port_of(w->last_ifindex);
		if (!out) {
			tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
			return tr_verdict_drop(xdp);
		}
		if (!xdp && w->nsel > 1 && w->on) {
			/* tc: the frame itself is the last copy; earlier copies
			 * changed its tag. */
			if (tr_vlan_copy(ctx, w->last_ifindex, w->vlan, tr_copy_opts(w->pcp, 1, 0)) < 0) {
				tr_drop(d, d->in_st, TR_DROP_NO_EGRESS);
				return TC_ACT_SHOT;
			}
			return tr_redirect_port(TR_TC, w->last_ifindex, w->last_slot);
		}
		d->out = out;
		d->egress_ifindex = w->last_ifindex;
		d->egress_slot = w->last_slot;
		return tr_forward(ctx, xdp, p, d);
	}
	return tr_walk_flood_xdp(ctx, d, w);
}

/* The filter stage, in the programs that have it: the frame, with its
 * egress port if it has one, against its bridge's rule set (set 0: its
 * filter is off, and the call returns at once; one call on every path keeps
 * the verifier's paths one). A flood in a bridge with rules on the egress
 * port is filtered copy by copy in the walk instead. 0: it passes. */
static __always_inline int tr_filtered(void *ctx, const int xdp, struct tr_pkt *p,
				       struct tr_decision *d)
{
	__u32 ports = d->in_slot, set = 0, r;

	if (d->br->flags & TR_BRIDGE_FILTER)
		set = d->br->filter_set;
	if (d->action == TR_ACT_FORWARD)
		ports |= d->egress_slot << 16;
	else if (d->br->flags & TR_BRIDGE_FILTER_OUT)
		set = 0;
	r = TR_CALL(xdp, tr_filter, ctx, set, ports, d->vlan, p->wire);
	if (!r)
		return 0;
	/* Constant reasons: the verifier cannot bound a returned index. */
	tr_drop(d, d->in_st, r == TR_DROP_STATE_FULL ? TR_DROP_STATE_FULL : TR_DROP_FILTERED);
	return 1;
}

/* The switch for one frame. filt: the entry point is one of those with the
 * filter stage (trestle_xdp_filter, trestle_tc_filter), which the control
 * plane attaches while a bridge filters; the others are compiled as if the
 * stage did not exist. (A flag tested here instead cost every forwarded
 * frame 5 ns of the compiler's choices, though the verifier removed the
 * dead branch; a flag tested in tr_run, 2.5.) */
static __always_inline int tr_send(void *ctx, const int xdp, struct tr_pkt *p,
				   struct tr_decision *d, const int filt)
{
	if (filt && d->action != TR_ACT_DROP && tr_filtered(ctx, xdp, p, d))
		return tr_verdict_drop(xdp);

	switch (d->action) {
	case TR_ACT_FORWARD:
		if ((d->out->flags & TR_PORT_PATCH) || (d->br->flags & TR_BRIDGE_MIRROR))
			return tr_walk(ctx, xdp, p, d);
		return tr_forward(ctx, xdp, p, d);
	case TR_ACT_FLOOD:
		if (d->br->flags & (TR_BRIDGE_PATCH | TR_BRIDGE_MIRROR))
			return tr_walk(ctx, xdp, p, d);
		if (filt && (d->br->flags & TR_BRIDGE_FILTER_OUT))
			return tr_walk(ctx, xdp, p, d); /* each copy meets the filter */
		if (xdp && !d->tag.on && (d->br->flags & TR_BRIDGE_POLICY))
			return tr_flood_xdp_policy(ctx, d);
		if (xdp)
			return tr_flood_xdp(ctx, p, d);
		if (d->tag.on || (d->br->flags & TR_BRIDGE_POLICY))
			return tr_flood_tc_vlan(ctx, p, d);
		return tr_flood_tc(ctx, p, d);
	default:
		return tr_verdict_drop(xdp);
	}
}

/* The switch for one frame: the pipeline decides, tr_send carries it out.
 * A flood that found no way out and was dropped with a reason is counted
 * as that drop only (tr_unflood). */
static __always_inline int tr_switch(void *ctx, const int xdp, struct tr_pkt *p,
				    struct tr_decision *d, const int filt)
{
	int flood, ret;

	tr_pipeline(p, d);
	flood = d->action == TR_ACT_FLOOD;
	ret = tr_send(ctx, xdp, p, d, filt);
	if (flood && d->counted)
		tr_unflood(d);
	return ret;
}

/* A frame the decision memo (lib/memo.h) knows: counted and sent as the
 * decision it remembers was. Returns 0 when the memo does not know it. */
static __always_inline int tr_fast_send(void *ctx, const int xdp, struct tr_pkt *p,
					struct tr_fast *fs, int *ret)
{
	const struct tr_fwd_memo *m;
	struct ethhdr *eth = p->data;
	struct tr_port_stats *st;
	enum tr_drop_reason reason;
	struct tr_frame f;
	long r;

	if (!fs->memo || (void *)(eth + 1) > p->data_end)
		return 0;
	m = &fs->memo->fwd;
	/* The ingress and the addresses first: a frame of another stream
	 * costs no parse. */
	if (m->ifindex != p->ifindex || !tr_mac_eq(m->dst, eth->h_dest) ||
	    !tr_mac_eq(m->src, eth->h_source))
		return 0;
	if (tr_parse(p->data, p->data_end, p->len, p->meta_vlan, &f, &reason) ||
	    !tr_fast_hit(fs, &f))
		return 0;
	st = tr_stats(m->in_slot);
	if (!st)
		return 0;
	st->c[TR_CNT_RX_PACKETS]++;
	st->c[TR_CNT_RX_BYTES] += p->wire;
	r = tr_redirect_port(xdp, m->out_ifindex, m->out_slot);
	if (r < 0) {
		tr_count_drop(st, TR_DROP_NO_EGRESS);
		*ret = tr_verdict_drop(xdp);
		return 1;
	}
	tr_count_tx(tr_stats(m->out_slot), p->wire);
	*ret = r;
	return 1;
}

/* After the pipeline forwarded a frame of a plain bridge to one port: the
 * decision, for the next frame like it, if the source memo vouches for the
 * source (so learning has nothing to do until it expires) and the
 * destination memo answered (the frame is not the first of its stream: a
 * stream of frames each to another station writes no memo it never uses). */
static __always_inline void tr_fast_remember(void *ctx, const int xdp, struct tr_fast *fs,
					     struct tr_pkt *p, struct tr_decision *d)
{
	struct tr_fwd_memo *m;
	const struct tr_src_memo *s;
	struct tr_pkt now; /* the verifier's view of the frame, afresh: d's pointers may be spent */
	struct ethhdr *eth;

	tr_read(ctx, xdp, &now);
	eth = now.data;
	/* An odd generation: the control plane is writing (configChanging). */
	if (!fs->memo || (fs->cgen & 1) || d->action != TR_ACT_FORWARD || d->tag.on ||
	    (void *)(eth + 1) > now.data_end ||
	    (d->br->flags & (TR_BRIDGE_PATCH | TR_BRIDGE_MIRROR)))
		return; /* not a plain bridge: tr_walk may have sent the frame on */
	s = &fs->memo->src;
	if (!d->v.dst_memo || !tr_src_known(&d->v, p->ifindex, d->bridge, d->vlan, eth->h_source))
		return;
	m = &fs->memo->fwd;
	__builtin_memcpy(m->dst, eth->h_dest, 6);
	__builtin_memcpy(m->src, eth->h_source, 6);
	m->vlan = d->vlan;
	m->in_slot = d->in_slot;
	m->ifindex = p->ifindex;
	m->out_slot = d->egress_slot;
	m->out_ifindex = d->egress_ifindex;
	m->cgen = fs->cgen;
	m->gen = d->v.gen;
	m->mgen = d->v.mgen;
	m->expires = s->expires;
}

static __always_inline int tr_run(void *ctx, const int xdp, const int filt)
{
	struct tr_pkt p;
	struct tr_decision d = {};

	tr_read(ctx, xdp, &p);
	if (!filt && !capture_on) {
		/* The decision memo, in the programs without the filter stage. */
		struct tr_fast fs;
		int ret;

		tr_fast_init(&fs);
		if (tr_fast_send(ctx, xdp, &p, &fs, &ret))
			return ret;
		ret = tr_switch(ctx, xdp, &p, &d, filt);
		if (ret == tr_verdict_redirect(xdp))
			tr_fast_remember(ctx, xdp, &fs, &p, &d);
		return ret;
	}
	if (capture_on) {
		/* Only in the programs of a running capture (lib/capture.h). */
		int ret;

		TR_CALL(xdp, tr_capture_in, ctx, p.ifindex, p.len, (__u32)p.meta_tci << 16 | p.meta_proto);
		ret = tr_switch(ctx, xdp, &p, &d, filt);
		tr_capture_out(&p, &d, ret == tr_verdict_drop(xdp));
		return ret;
	}
	return tr_switch(ctx, xdp, &p, &d, filt);
}

SEC("xdp")
int trestle_xdp(struct xdp_md *ctx)
{
	return tr_run(ctx, TR_XDP, 0);
}

SEC("tc")
int trestle_tc(struct __sk_buff *skb)
{
	return tr_run(skb, TR_TC, 0);
}

/* The entry points with the filter stage (bpf/lib/filter.h), loaded with
 * filter_on set while some bridge filters. */
SEC("xdp")
int trestle_xdp_filter(struct xdp_md *ctx)
{
	return tr_run(ctx, TR_XDP, 1);
}

SEC("tc")
int trestle_tc_filter(struct __sk_buff *skb)
{
	return tr_run(skb, TR_TC, 1);
}
