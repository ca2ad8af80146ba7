/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The ways out of the switch for a frame that stays in its bridge: a
 * forward to one port (tr_forward), and a flood, in XDP one broadcast
 * redirect over the bridge's devmap (tr_flood_xdp, tr_flood_xdp_policy,
 * with the devmap program tr_devmap_egress for the copies of VLAN-aware
 * bridges and bridges with port policies), in tc a clone to each port
 * (tr_flood_tc, tr_flood_tc_vlan). The walk (walk.h) takes frames that
 * cross patch ports or are mirrored.
 */
#ifndef TRESTLE_EGRESS_H
#define TRESTLE_EGRESS_H

#include "switch.h"
#include "lib/overlay.h"

/* Each copy of an XDP flood over a bridge's plain set, which runs no
 * devmap program, is counted as sent here: one round a port. */
static __always_inline long tr_count_round(__u64 i, const struct tr_ports_loop *a)
{
	const struct tr_bridge_port *bp = tr_loop_port(a, i);

	if (!bp)
		return 1;
	if (bp->ifindex != a->ingress)
		tr_count_tx(tr_stats(bp->slot), a->wire);
	return 0;
}

/* Counts a flooded frame as sent on every port of the bridge but the ingress. */
TR_PORTS_LOOP(tr_count_flood_tx, tr_count_round, (const struct tr_bridge *br, __u32 ingress, __u32 len),
	      (br, ingress, len), (.br = br, .n = br ? br->nports : 0, .ingress = ingress, .wire = len))

/* Known unicast: to one port, tagged as that port takes the frame's VLAN.
 * straight: a forward in the frame's bridge (trestle.c), not the walk's
 * last (whose chain of calls has no stack left for tr_vxlan_encap). */
static __always_inline int tr_forward(void *ctx, const int xdp, struct tr_pkt *p,
				      struct tr_decision *d, const int straight)
{
	__u32 wire = p->wire;
	long ret;

	if (d->tag.on) {
		enum tr_egress e = tr_egress(&d->out, d->tag.vid, 0);
		int delta;

		if (e == TR_EGRESS_DENY) {
			tr_drop_frame(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return tr_verdict_drop(xdp);
		}
		delta = tr_tag_to(ctx, xdp, &d->tag, e == TR_EGRESS_UNTAGGED);
		if (delta < -TR_VLAN_HLEN) {
			tr_drop_frame(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return tr_verdict_drop(xdp);
		}
		wire += delta;
	}
	/* An overlay port: at tc the frame must fit its MTU; in XDP it is
	 * encapsulated straight into the underlay if the control plane wrote
	 * the station's outer headers, else it takes the way in. The flag is
	 * the decision's copy of the port: other ports pay a test. */
	if (!xdp && (d->out.flags & TR_PORT_OVERLAY) && tr_overlay_too_long(ctx, d->egress_ifindex)) {
		tr_drop_frame(d, tr_stats(d->egress_slot), TR_DROP_OVERLAY_MTU);
		return TC_ACT_SHOT;
	}
	if (xdp && straight && (d->out.flags & TR_PORT_OVERLAY)) {
		ret = tr_vxlan_encap(ctx, d->bridge | (__u32)d->vlan << 16, d->egress_ifindex);
		if (ret == XDP_DROP) {
			tr_drop_frame(d, tr_stats(d->egress_slot), TR_DROP_OVERLAY_MTU);
			return XDP_DROP;
		}
		if (ret == XDP_REDIRECT) {
			struct tr_port_stats *st = tr_stats(d->egress_slot);

			tr_count_tx(st, wire);
			if (st)
				st->c[TR_CNT_ENCAP]++;
			tr_vlan_count_tx(d->tag.st, wire);
			d->straight = 0; /* no memo: its way out is the overlay's way in */
			return XDP_REDIRECT;
		}
	}
	ret = tr_redirect_port(xdp, d->egress_ifindex, d->egress_slot);
	if (ret < 0) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
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
	long ret;

	if (!d->br || d->br->nports < 2 || (d->tag.on && d->tag.members < 2)) {
		/* A broadcast to a set holding only the ingress frees the frame
		 * without a word: count it instead. */
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	if (d->tag.on) {
		if (tr_tag_to(ctx, TR_XDP, &d->tag, 0) < -TR_VLAN_HLEN) {
			tr_drop_frame(d, d->in_st, TR_DROP_VLAN_EGRESS);
			return XDP_DROP;
		}
		ret = tr_broadcast(&vlan_floods, d->bridge);
	} else {
		ret = tr_broadcast(&floods, d->bridge);
	}
	if (ret < 0) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
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
	if (!d->br || d->br->nports < 2 || tr_broadcast(&vlan_floods, d->bridge) < 0) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	return XDP_REDIRECT;
}

/*
 * A devmap program's copy leaves by out as the egress rule says, counted on
 * out (and in its VLAN there). tagged: the copy carries its VLAN's tag (a
 * VLAN-aware bridge), which it keeps or loses as out takes that VLAN;
 * else it leaves as it is. deny: the port flags that refuse it.
 */
static __always_inline int tr_devmap_out(struct xdp_md *ctx, const struct tr_port *out, __u16 deny,
					 int tagged)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tr_vlan_hdr *vh = (void *)(eth + 1);
	struct tr_vlan_entry *v;
	__u32 wire = data_end - data;
	__u16 vid = 0;

	if (tagged) {
		if ((void *)(vh + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_8021Q))
			return XDP_DROP;
		vid = bpf_ntohs(vh->tci) & 0x0fff;
		if (!vid)
			return XDP_DROP;
	}
	switch (tr_egress(out, vid, deny)) {
	case TR_EGRESS_DENY:
		return XDP_DROP;
	case TR_EGRESS_UNTAGGED:
		if (tr_xdp_pop(ctx))
			return XDP_DROP;
		wire -= TR_VLAN_HLEN;
		break;
	default:
		break;
	}
	tr_count_tx(tr_stats(out->slot), wire);
	if (vid) {
		v = tr_vlan_of(out->bridge, vid);
		if (v)
			tr_vlan_count_tx(tr_vlan_stats_of(v->idx), wire);
	}
	return XDP_PASS;
}

/*
 * The devmap program of the flood set of a bridge that is VLAN-aware or has
 * port policies (trestle_vlan_egress): it runs on each copy of a flooded
 * frame, for the port the copy is about to leave by. A port that refuses
 * the frame's kind of flood, or is protected as the ingress is, gets
 * nothing. In a VLAN-aware bridge the copy arrives tagged with its VLAN: a
 * port that does not carry the VLAN gets nothing, one that takes it
 * untagged gets it without the tag.
 */
static __always_inline int tr_devmap_egress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	const struct tr_port *out, *in;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	out = tr_port_of(ctx->egress_ifindex);
	in = tr_port_of(ctx->ingress_ifindex);
	if (!out || !in)
		return XDP_DROP;
	/* A port of a VLAN-aware bridge has a pvid or is a trunk. */
	return tr_devmap_out(ctx, out, tr_flood_deny(in->flags, eth->h_dest),
			     out->pvid || (out->flags & TR_PORT_TRUNK));
}

static __always_inline long tr_clone_round(__u64 i, const struct tr_ports_loop *a)
{
	const struct tr_bridge_port *bp = tr_loop_port(a, i);

	if (!bp || !a->ctx)
		return 1;
	if (bp->ifindex == a->ingress)
		return 0;
	if ((a->br->flags & TR_BRIDGE_OVERLAY) && tr_overlay_too_long(a->ctx, bp->ifindex)) {
		tr_drop(NULL, tr_stats(bp->slot), TR_DROP_OVERLAY_MTU);
		return 0;
	}
	if (bpf_clone_redirect(a->ctx, bp->ifindex, 0))
		tr_count_tx_dropped(tr_stats(bp->slot));
	else
		tr_count_tx(tr_stats(bp->slot), a->wire);
	return 0;
}

/* The copies of a tc flood, VLAN-unaware: a clone to each port of br in
 * rounds 0..last-1 but the ingress; the caller sends the frame itself to
 * the port of round last. */
TR_PORTS_LOOP(tr_flood_tc_clones, tr_clone_round,
	      (struct __sk_buff *skb, const struct tr_bridge *br, __u32 ingress, __u32 wire, __u32 last),
	      (skb, br, ingress, wire, last), (.ctx = skb, .br = br, .n = last, .ingress = ingress, .wire = wire))

/* tc flood, VLAN-unaware: clone to every other port; the original goes to
 * the last one. */
static __always_inline int tr_flood_tc(struct __sk_buff *skb, struct tr_pkt *p,
				       struct tr_decision *d)
{
	__u32 last;

	if (!d->br || d->br->nports < 2 || d->br->nports > TR_MAX_BRIDGE_PORTS) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS); /* nowhere to flood */
		return TC_ACT_SHOT;
	}
	/* The masks are no-ops after the check above; they show the verifier the bound. */
	last = (d->br->nports - 1) & (TR_MAX_BRIDGE_PORTS - 1);
	if (d->br->ports[last].ifindex == p->ifindex)
		last = (last - 1) & (TR_MAX_BRIDGE_PORTS - 1);
	tr_flood_tc_clones(skb, d->br, p->ifindex, p->wire, last);
	if ((d->br->flags & TR_BRIDGE_OVERLAY) && tr_overlay_too_long(skb, d->br->ports[last].ifindex)) {
		/* A copy's drop, not the frame's: the other copies went. */
		tr_drop(NULL, tr_stats(d->br->ports[last].slot), TR_DROP_OVERLAY_MTU);
		return TC_ACT_SHOT;
	}
	tr_count_tx(tr_stats(d->br->ports[last].slot), p->wire);
	return tr_redirect_port(TR_TC, d->br->ports[last].ifindex, d->br->ports[last].slot);
}

/*
 * One copy of a tc flood in a VLAN-aware bridge: to ifindex if its port
 * carries vid, tagged or untagged as it takes it. The skb's tag state is
 * changed in place for the copy and stays so for the next; pcp is the
 * priority the frame came in with, for a tag an earlier copy took off. A global
 * function, verified once rather than at each of the loop's calls.
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
	enum tr_egress e;
	__u32 wire;
	int delta;

	if (!skb)
		return -1;
	out = tr_port_of(ifindex);
	e = tr_egress(out, vid, opts >> 16);
	if (e == TR_EGRESS_DENY || !out)
		return 0;
	if (e == TR_EGRESS_AS_IS) {
		if ((out->flags & TR_PORT_OVERLAY) && tr_overlay_too_long(skb, ifindex)) {
			tr_drop(NULL, tr_stats(out->slot), TR_DROP_OVERLAY_MTU);
			return last ? -1 : 0;
		}
		if (!last && bpf_clone_redirect(skb, ifindex, 0))
			return -1;
		tr_count_tx(tr_stats(out->slot), skb->len + (skb->vlan_present ? TR_VLAN_HLEN : 0));
		return 1;
	}
	t.vid = vid;
	t.tci = pcp & 0xf000; /* the frame's priority, if an earlier copy took its tag off */
	if (skb->vlan_present && skb->vlan_proto == bpf_htons(ETH_P_8021Q)) {
		t.ctag = 1;
		t.tci = skb->vlan_tci;
	}
	delta = tr_tag_to(skb, TR_TC, &t, e == TR_EGRESS_UNTAGGED);
	if (delta < -TR_VLAN_HLEN)
		return -1;
	if ((out->flags & TR_PORT_OVERLAY) && tr_overlay_too_long(skb, ifindex)) {
		tr_drop(NULL, tr_stats(out->slot), TR_DROP_OVERLAY_MTU);
		return last ? -1 : 0;
	}
	if (!last && bpf_clone_redirect(skb, ifindex, 0))
		return -1;
	wire = skb->len + (skb->vlan_present ? TR_VLAN_HLEN : 0);
	tr_count_tx(tr_stats(out->slot), wire);
	v = tr_vlan_of(out->bridge, vid);
	if (v)
		tr_vlan_count_tx(tr_vlan_stats_of(v->idx), wire);
	return 1;
}

static __always_inline long tr_copy_round(__u64 i, const struct tr_ports_loop *a)
{
	const struct tr_bridge_port *bp = tr_loop_port(a, i);

	if (!bp)
		return 1;
	if (bp->ifindex != a->ingress && tr_vlan_copy(a->ctx, bp->ifindex, a->vid, a->opts) < 0)
		tr_count_tx_dropped(tr_stats(bp->slot));
	return 0;
}

/* The copies of a tc flood in a VLAN-aware bridge or one with port
 * policies: tr_vlan_copy to each port of br but the ingress. */
TR_PORTS_LOOP(tr_flood_tc_copies, tr_copy_round,
	      (struct __sk_buff *skb, const struct tr_bridge *br, __u32 ingress, __u32 vid, __u32 opts),
	      (skb, br, ingress, vid, opts),
	      (.ctx = skb, .br = br, .n = br ? br->nports : 0, .ingress = ingress, .vid = vid, .opts = opts))

/* tc flood, VLAN-aware or with port policies: a clone to each port the
 * frame may leave by, each tagged for its port; the original is consumed. */
static __always_inline int tr_flood_tc_vlan(struct __sk_buff *skb, struct tr_pkt *p,
					    struct tr_decision *d)
{
	__u32 vid, opts;
	__u16 deny = 0;

	if (!d->br || !d->eth || (d->tag.on && d->tag.members < 2) || d->br->nports < 2) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return TC_ACT_SHOT;
	}
	/* Before the first clone, which ends every pointer into the frame. */
	if (d->br->flags & TR_BRIDGE_POLICY) {
		/* Looked up again here, so that no other path keeps it. */
		const struct tr_port *in = tr_port_of(p->ifindex);

		deny = tr_flood_deny(in ? in->flags : 0, d->eth->h_dest);
	}
	vid = d->tag.on ? d->tag.vid : 0;
	opts = tr_copy_opts(d->tag.ctag ? d->tag.tci : 0, 0, deny);
	tr_flood_tc_copies(skb, d->br, p->ifindex, vid, opts);
	return TC_ACT_STOLEN;
}

#endif
