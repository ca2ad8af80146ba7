/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The ways out of the switch for a frame that stays in its bridge, each
 * copy through the door (lib/door.h): a forward to one port (tr_forward),
 * and a flood, in XDP one broadcast redirect over the bridge's devmap
 * (tr_flood_xdp, tr_flood_xdp_policy, with the devmap program
 * tr_devmap_egress for the copies of VLAN-aware bridges and bridges with
 * port policies), in tc a clone to each port (tr_flood_tc,
 * tr_flood_tc_vlan). The walk (walk.h) takes frames that cross patch
 * ports or are mirrored.
 */
#ifndef TRESTLE_EGRESS_H
#define TRESTLE_EGRESS_H

#include "switch.h"
#include "lib/door.h"

/* Each copy of an XDP flood over a bridge's plain set, which runs no
 * devmap program, passes the door as the kernel sends it (TR_WAY_SET):
 * counted, one round a port. The set holds the bridge's ports, which the
 * rule lets every frame of a bridge with no VLANs or port policies leave
 * by, but the ingress, which the kernel leaves out (and the round too). */
static __always_inline long tr_count_round(__u64 i, const struct tr_ports_loop *a)
{
	const struct tr_bridge_port *bp = tr_loop_port(a, i);
	struct tr_copy c = {};

	if (!bp)
		return 1;
	if (bp->ifindex == a->ingress)
		return 0;
	c.slot = bp->slot;
	c.wire = a->wire;
	c.rule = TR_EGRESS_AS_IS;
	tr_door(NULL, TR_XDP, TR_WAY_SET, NULL, &c);
	return 0;
}

/* Counts a flooded frame as sent on every port of the bridge but the ingress. */
TR_PORTS_LOOP(tr_count_flood_tx, tr_count_round, (const struct tr_bridge *br, __u32 ingress, __u32 len),
	      (br, ingress, len), (.br = br, .n = br ? br->nports : 0, .ingress = ingress, .wire = len))

/* Known unicast: to one port (d->out), through the door. straight: a
 * forward in the frame's bridge (trestle.c), whose rule the bridge step
 * asked (d->rule), and which an overlay port encapsulates (in both modes);
 * else the walk's last, whose port the walk chose (the door asks the rule
 * again, for its tag) and whose chain of calls has no stack left for
 * tr_vxlan_encap or tr_vxlan_encap_tc. */
static __always_inline int tr_forward(void *ctx, const int xdp, struct tr_pkt *p,
				      struct tr_decision *d, const int straight)
{
	struct tr_copy c = {};

	c.ifindex = d->egress_ifindex;
	c.slot = d->egress_slot;
	c.in = p->ifindex;
	c.vid = d->tag.on ? d->tag.vid : 0;
	c.wire = p->wire;
	c.rule = straight ? d->rule : TR_EGRESS_ASK;
	/* The flag is the decision's copy of the port: other ports pay a test. */
	c.overlay = (d->out.flags & TR_PORT_OVERLAY) != 0;
	c.encap = straight ? d->bridge | (__u32)d->vlan << 16 : 0;
	c.tag = &d->tag;
	c.vst = d->tag.st;
	c.note = &d->drop;
	c.in_st = d->in_st;
	if (tr_door(ctx, xdp, TR_WAY_FRAME, &d->out, &c) != TR_DOOR_SENT) {
		d->action = TR_ACT_DROP;
		return tr_verdict_drop(xdp);
	}
	if (c.encapped)
		d->straight = 0; /* no memo: its redirect is the overlay's way in */
	return tr_verdict_redirect(xdp);
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
	/* In a VLAN-aware bridge each copy passes the door where it leaves. */
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
 * The devmap program of the flood set of a bridge that is VLAN-aware or has
 * port policies (trestle_vlan_egress): it runs on each copy of a flooded
 * frame, for the port the copy is about to leave by, and passes it
 * through the door. A port that refuses the frame's kind of flood, or is
 * protected as the ingress is, gets nothing. In a VLAN-aware bridge the
 * copy arrives tagged with its VLAN: a port that does not carry the VLAN
 * gets nothing, one that takes it untagged gets it without the tag. In a
 * snooping bridge, a multicast copy goes only to its group's ports: the
 * copy is classified again here (lib/snoop.h), for the pipeline's answer
 * is gone by the time the kernel runs this program (at the end of the NAPI
 * poll, after other frames).
 */
static __always_inline int tr_devmap_egress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tr_vlan_hdr *vh = (void *)(eth + 1);
	const struct tr_port *out, *in;
	const __u64 *members = NULL;
	__u16 deny, vid = 0;
	__u64 who;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	out = tr_port_of(ctx->egress_ifindex);
	in = tr_port_of(ctx->ingress_ifindex);
	if (!out || !in)
		return XDP_DROP;
	deny = tr_flood_deny(in->flags, eth->h_dest);
	if ((in->flags & TR_PORT_SNOOP) && tr_mac_is_ipmcast(eth->h_dest)) {
		/* The group's VLAN as the pipeline keyed it: the outer tag's. */
		if ((void *)(vh + 1) <= data_end && tr_is_vlan(bpf_ntohs(eth->h_proto)))
			vid = bpf_ntohs(vh->tci) & 0x0fff;
		who = TR_SNOOP_WHO(in->bridge, vid, in->slot);
		if (tr_snoop_xdp(ctx, who, TR_SNOOP_QUIET))
			members = tr_group_cur();
	}
	/* A port of a VLAN-aware bridge has a pvid or is a trunk. */
	return tr_door_devmap(ctx, out, ctx->ingress_ifindex, deny, members,
			      out->pvid || (out->flags & TR_PORT_TRUNK), 0);
}

/* A copy of a tc flood, VLAN-unaware, through the door as a clone: to the
 * port of round i but the ingress (the rule lets every port of a bridge
 * with no VLANs or port policies take it; at an overlay port, in a bridge
 * that has one, its MTU is asked). */
static __always_inline long tr_clone_round(__u64 i, const struct tr_ports_loop *a)
{
	const struct tr_bridge_port *bp = tr_loop_port(a, i);
	struct tr_copy c = {};

	if (!bp || !a->ctx)
		return 1;
	if (bp->ifindex == a->ingress)
		return 0;
	c.ifindex = bp->ifindex;
	c.slot = bp->slot;
	c.wire = a->wire;
	c.rule = TR_EGRESS_AS_IS;
	c.overlay = (a->br->flags & TR_BRIDGE_OVERLAY) != 0;
	tr_door(a->ctx, TR_TC, TR_WAY_CLONE, NULL, &c);
	return 0;
}

/* The copies of a tc flood, VLAN-unaware: a clone to each port of br in
 * rounds 0..last-1 but the ingress; the caller sends the frame itself to
 * the port of round last. */
TR_PORTS_LOOP(tr_flood_tc_clones, tr_clone_round,
	      (struct __sk_buff *skb, const struct tr_bridge *br, __u32 ingress, __u32 wire, __u32 last),
	      (skb, br, ingress, wire, last), (.ctx = skb, .br = br, .n = last, .ingress = ingress, .wire = wire))

/* tc flood, VLAN-unaware: clone to every other port; the original goes to
 * the last one. Its drop there (too long for an overlay port) is a copy's:
 * the other copies went. */
static __always_inline int tr_flood_tc(struct __sk_buff *skb, struct tr_pkt *p,
				       struct tr_decision *d)
{
	struct tr_copy c = {};
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
	c.ifindex = d->br->ports[last].ifindex;
	c.slot = d->br->ports[last].slot;
	c.wire = p->wire;
	c.rule = TR_EGRESS_AS_IS;
	c.overlay = (d->br->flags & TR_BRIDGE_OVERLAY) != 0;
	if (tr_door(skb, TR_TC, TR_WAY_FRAME, NULL, &c) != TR_DOOR_SENT)
		return TC_ACT_SHOT;
	return TC_ACT_REDIRECT;
}

/* A copy of a tc flood in a VLAN-aware bridge or one with port policies:
 * through the door (tr_door_copy_tc) to the port of round i but the
 * ingress. */
static __always_inline long tr_copy_round(__u64 i, const struct tr_ports_loop *a)
{
	const struct tr_bridge_port *bp = tr_loop_port(a, i);

	if (!bp)
		return 1;
	if (bp->ifindex != a->ingress)
		tr_door_copy_tc(a->ctx, bp->ifindex, a->vid, a->opts);
	return 0;
}

/* The copies of a tc flood in a VLAN-aware bridge or one with port
 * policies: one to each port of br but the ingress. */
TR_PORTS_LOOP(tr_flood_tc_copies, tr_copy_round,
	      (struct __sk_buff *skb, const struct tr_bridge *br, __u32 ingress, __u32 vid, __u32 opts),
	      (skb, br, ingress, vid, opts),
	      (.ctx = skb, .br = br, .n = br ? br->nports : 0, .ingress = ingress, .vid = vid, .opts = opts))

/* tc flood, VLAN-aware, with port policies or to a group's ports (group:
 * the ports are this CPU's group_cur, lib/snoop.h): a clone to each port
 * the frame may leave by, each tagged for its port; the original is
 * consumed. */
static __always_inline int tr_flood_tc_vlan(struct __sk_buff *skb, struct tr_pkt *p,
					    struct tr_decision *d, int group)
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
	opts = tr_copy_opts(d->tag.ctag ? d->tag.tci : 0, 0, deny) | (group ? TR_COPY_GROUP : 0);
	tr_flood_tc_copies(skb, d->br, p->ifindex, vid, opts);
	return TC_ACT_STOLEN;
}

#endif
