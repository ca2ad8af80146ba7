/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The attach points of the switch, read top to bottom: the entry (tr_run,
 * and the decision memo's fast path), the pipeline that decides
 * (tr_pipeline, switch.h), and the send that carries the decision out
 * (tr_send: a forward or a flood in the frame's bridge, egress.h, or the
 * walk through patch ports and mirrors, walk.h). The modes differ only in a
 * few context operations (read the frame, push, pop or rewrite a VLAN tag,
 * redirect to a port), the context shim of lib/ctx.h, each one call with an
 * XDP and a tc implementation, chosen by a constant the compiler folds
 * (architecture.md rule 5).
 *
 * A frame like the last one this CPU forwarded in a plain bridge (VLAN-aware
 * or not) skips the pipeline: the decision memo (lib/memo.h) counts it, tags
 * it as the last one was, and sends it on.
 *
 * xdp: packet-rate mode. Unicast through the tx_ports devmap (by port slot), flooding through
 *      the bridge's devmap with BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS.
 * tc:  stack-friendly mode (tcx ingress). The skb keeps its GSO and checksum
 *      state; unicast with bpf_redirect(), flooding by cloning to each port.
 */
#include "switch.h"
#include "egress.h"
#include "walk.h"
#include "lib/capture.h"
#include "lib/filter.h"
#include "lib/memo.h"
#include "lib/neigh.h"
#include "lib/snoop.h"

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
enum tr_encap_limits _btf_encap_limits __attribute__((unused));
enum tr_encap_flags _btf_encap_flags __attribute__((unused));
enum tr_filter_flags _btf_filter_flags __attribute__((unused));
enum tr_state_flags _btf_state_flags __attribute__((unused));
enum tr_state_timeouts _btf_state_timeouts __attribute__((unused));
enum tr_neigh_flags _btf_neigh_flags __attribute__((unused));
/* The events' types as load-time constants, never read: .rodata is each
 * program's own, where a new variable of .bss (pinned, with the table's
 * generations) would change its layout, which an upgrade then copies. */
const volatile enum tr_event_limits _btf_event_limits __attribute__((unused)) = 0;
const volatile enum tr_event_type _btf_event_type __attribute__((unused)) = 0;
const volatile enum tr_filter_unread _btf_filter_unread __attribute__((unused)) = 0;
const volatile enum tr_filter_l4 _btf_filter_l4 __attribute__((unused)) = 0;
const volatile struct tr_event _btf_event __attribute__((unused)) = {};
const volatile enum tr_probe_limits _btf_probe_limits __attribute__((unused)) = 0;
const volatile struct tr_probe _btf_probe __attribute__((unused)) = {};
const volatile enum tr_snoop_limits _btf_snoop_limits __attribute__((unused)) = 0;
const volatile struct tr_snoop_msg _btf_snoop_msg __attribute__((unused)) = {};
const volatile enum tr_snoop_kind _btf_snoop_kind __attribute__((unused)) = 0;

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
	tr_drop_frame(d, d->in_st, tr_filter_reason(r));
	return 1;
}

/* A flood in a bridge with neigh_suppress that is a request the bridge's
 * neighbour table answers (lib/neigh.h): the frame, now the answer, goes
 * back out of the port it came in by, and nowhere else. Counted
 * suppressed on that port and not flooded; capture says it was forwarded
 * to that port. After the filter (the request met the rules, as a flood
 * does) and storm control (a request over its port's rate is not
 * answered), before any way out (neither the walk's copies nor the
 * mirrors'). Returns the verdict, or 0: flood it. */
static __always_inline int tr_suppress(void *ctx, const int xdp, struct tr_pkt *p, struct tr_decision *d)
{
	const __u64 who = TR_NEIGH_WHO(d->bridge, d->vlan, d->in_slot);
	long r;

	if (!TR_CALL(xdp, tr_neigh_known, ctx, who))
		return 0;
	/* A drop below is counted as that drop, not a flood: tr_switch takes
	 * the flood back (tr_unflood) for a flood dropped with a reason. */
	if (!TR_CALL(xdp, tr_neigh_answer, ctx, who)) {
		/* The kernel refused to grow or write the frame (XDP with no
		 * tailroom for an advertisement's option): the frame may be
		 * half an answer, and is no request to flood any more. */
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return tr_verdict_drop(xdp);
	}
	/* Back out of the ingress, as a forward to it: XDP by its tx_ports
	 * entry rather than XDP_TX, which a veth delivers to a peer without
	 * an XDP program only when something else wakes the peer (the kernel
	 * flushes XDP_TX's frames to a peer with a program only; a
	 * redirect's flush wakes any), so an answer could wait there for the
	 * host's next frame. */
	r = tr_redirect_port(xdp, p->ifindex, d->in_slot);
	if (r < 0) {
		tr_drop_frame(d, d->in_st, TR_DROP_NO_EGRESS);
		return tr_verdict_drop(xdp);
	}
	tr_unflood(d);
	d->in_st->c[TR_CNT_SUPPRESSED]++;
	d->action = TR_ACT_FORWARD;
	d->egress_ifindex = p->ifindex;
	d->egress_slot = d->in_slot;
	return r;
}

/* A frame a bridge with neigh_suppress forwards or floods: an ARP, ND or
 * DHCP server message is copied to the daemon, which learns its station's
 * address from it (lib/neigh.h, tr_neigh_copy). Before the answer, which
 * rewrites a request: its sender is learned too. Not from an overlay port:
 * the fabric's stations are EVPN's remote entries, not learned here (nor
 * does a decision memo of such a port's frames ask, tr_fast_remember). */
static __always_inline void tr_neigh_learn(void *ctx, const int xdp, struct tr_decision *d)
{
	if (d->in_flags & TR_PORT_OVERLAY)
		return;
	TR_CALL(xdp, tr_neigh_copy, ctx, TR_NEIGH_WHO(d->bridge, d->vlan, d->in_slot));
}

/* A multicast flood in a snooping bridge: 1 when it goes to its group's
 * ports only (counted grouped on its ingress), which are then this CPU's
 * group_cur (lib/snoop.h). Called after the filter and storm control, as
 * a flood's other questions are. */
static __always_inline int tr_snoop_flood(void *ctx, const int xdp, struct tr_decision *d)
{
	if (!TR_CALL(xdp, tr_snoop, ctx, TR_SNOOP_WHO(d->bridge, d->vlan, d->in_slot), 0))
		return 0;
	d->in_st->c[TR_CNT_GROUPED]++;
	if (capture_on)
		tr_capture_grouped(); /* its record says the group's ports */
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
	int group = 0;

	if (filt && d->action != TR_ACT_DROP && tr_filtered(ctx, xdp, p, d))
		return tr_verdict_drop(xdp);

	switch (d->action) {
	case TR_ACT_FORWARD:
		/* A stream's frames (those a decision memo of a neigh_suppress
		 * bridge does not send) ask the type, next header and port
		 * inline first: its TCP or UDP pays no global call. A flood
		 * does not: tr_suppress calls tr_neigh_known after, a global
		 * call all the same, and the test is paths more for the
		 * verifier (tr_neigh_may_copy_eth). */
		if ((d->br->flags & TR_BRIDGE_NEIGH_SUPPRESS) && tr_neigh_may_copy_eth(d->eth, p->data_end))
			tr_neigh_learn(ctx, xdp, d);
		if ((d->out.flags & TR_PORT_PATCH) || (d->br->flags & TR_BRIDGE_MIRROR))
			return tr_walk(ctx, xdp, p, d);
		d->straight = 1;
		return tr_forward(ctx, xdp, p, d, 1);
	case TR_ACT_FLOOD:
		if (d->br->flags & TR_BRIDGE_NEIGH_SUPPRESS) {
			int r;

			tr_neigh_learn(ctx, xdp, d);
			r = tr_suppress(ctx, xdp, p, d);

			if (r)
				return r;
		}
		if (d->br->flags & (TR_BRIDGE_PATCH | TR_BRIDGE_MIRROR))
			return tr_walk(ctx, xdp, p, d); /* which asks the group (tr_walk_snoop) */
		if (filt && (d->br->flags & TR_BRIDGE_FILTER_OUT))
			return tr_walk(ctx, xdp, p, d); /* each copy meets the filter */
		/* A snooping bridge's multicast (lib/snoop.h): reported if IGMP or
		 * MLD, and to its group's ports only if the table has it. */
		if ((d->br->flags & TR_BRIDGE_SNOOP) && d->eth && tr_mac_is_ipmcast(d->eth->h_dest))
			group = tr_snoop_flood(ctx, xdp, d);
		if (xdp && !d->tag.on && ((d->br->flags & TR_BRIDGE_POLICY) || group))
			return tr_flood_xdp_policy(ctx, d);
		if (xdp)
			return tr_flood_xdp(ctx, p, d);
		if (d->tag.on || (d->br->flags & TR_BRIDGE_POLICY) || group)
			return tr_flood_tc_vlan(ctx, p, d, group);
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

	tr_pipeline(ctx, xdp, p, d);
	flood = d->action == TR_ACT_FLOOD;
	ret = tr_send(ctx, xdp, p, d, filt);
	if (flood && d->drop.noted)
		tr_unflood(d);
	return ret;
}

/* A frame the decision memo (lib/memo.h) knows: counted and sent as the
 * decision it remembers was, through the door with the door's answers it
 * remembers (TR_WAY_MEMO: the rule not asked again, the tag as the memo
 * says, no device step, for none of its ports has one). Returns 0 when
 * the memo does not know it. */
static __always_inline int tr_fast_send(void *ctx, const int xdp, struct tr_pkt *p,
					struct tr_fast *fs, struct tr_decision *d, int *ret)
{
	const struct tr_fwd_memo *m;
	struct ethhdr *eth = p->data;
	struct tr_port_stats *st;
	enum tr_drop_reason reason;
	struct tr_copy c = {};
	struct tr_frame f;

	if (!fs->memo || (void *)(eth + 1) > p->data_end)
		return 0;
	m = &fs->memo->fwd;
	/* The ingress and the addresses first: a frame of another stream
	 * costs no parse. */
	if (m->ifindex != p->ifindex || !tr_mac_eq(m->dst, eth->h_dest) ||
	    !tr_mac_eq(m->src, eth->h_source))
		return 0;
	if (tr_parse(p->data, p->data_end, p->len, p->meta_vlan, &f, &reason) ||
	    !tr_fast_hit(fs, p, &f))
		return 0;
	st = tr_stats(m->in_slot);
	if (!st)
		return 0;
	st->c[TR_CNT_RX_PACKETS]++;
	st->c[TR_CNT_RX_BYTES] += p->wire;
	c.retag = tr_fast_tag(m, p->wire, &c.vst); /* VLAN-aware bridges only */
	c.tci = m->tci;
	c.ifindex = m->out_ifindex;
	c.slot = m->out_slot;
	c.wire = p->wire;
	c.rule = TR_EGRESS_AS_IS; /* asked when the memo was made */
	c.note = &d->drop;
	c.in_st = st;
	if (tr_door(ctx, xdp, TR_WAY_MEMO, NULL, &c) != TR_DOOR_SENT) {
		d->action = TR_ACT_DROP;
		*ret = tr_verdict_drop(xdp);
		return 1;
	}
	*ret = tr_verdict_redirect(xdp);
	return 1;
}

/* After the pipeline forwarded a frame of a plain bridge (VLAN-aware or not;
 * one with a priority tag is remembered as no frame matches, lib/memo.h) to
 * one port: the decision, for the next frame like it, if the source memo vouches for the
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

	/* First: a constant of each path the verifier takes, so that it leaves
	 * every walk's path here (the tc build with the VLAN stage is near its
	 * million instructions). */
	if (!d->straight)
		return;
	tr_read(ctx, xdp, &now);
	eth = now.data;
	/* An odd generation: the control plane is writing (configChanging). */
	if (!fs->memo || (fs->cgen & 1) || d->action != TR_ACT_FORWARD || (d->in_flags & TR_PORT_GUARDS) ||
	    (void *)(eth + 1) > now.data_end ||
	    (d->br->flags & (TR_BRIDGE_PATCH | TR_BRIDGE_MIRROR)))
		return; /* not a plain bridge: tr_walk may have sent the frame on; a
			 * guarded port's frames are checked each (lib/ipguard.h) */
	/* Nor a forward to an overlay port at tc: each frame meets its MTU and
	 * its encapsulation, whose entry may come or go. (In XDP, one through
	 * the way in is remembered, one encapsulated is not: tr_forward took
	 * its straight; a new outer header forgets every memo, SetEncap.) */
	if (!xdp && (d->out.flags & TR_PORT_OVERLAY))
		return;
	s = &fs->memo->src;
	if (!fs->memo->dst.hit || !tr_src_known(&d->v, p->ifindex, d->bridge, d->vlan, eth->h_source))
		return;
	m = &fs->memo->fwd;
	__builtin_memcpy(m->dst, eth->h_dest, 6);
	__builtin_memcpy(m->src, eth->h_source, 6);
	m->vlan = tr_fast_tag_remember(m, &d->tag, d->vlan);
	/* A neigh_suppress bridge's, from a port whose frames tr_neigh_learn
	 * asks: each frame the memo would send is asked too (tr_fast_hit), so
	 * that an ARP reply, an advertisement or a DHCPACK in a stream's midst
	 * is decided, and copied, by the pipeline. */
	if ((d->br->flags & TR_BRIDGE_NEIGH_SUPPRESS) && !(d->in_flags & TR_PORT_OVERLAY))
		m->vlan |= TR_MEMO_NEIGH;
	m->in_slot = d->in_slot;
	m->ifindex = p->ifindex;
	m->out_slot = d->egress_slot;
	m->out_ifindex = d->egress_ifindex;
	m->cgen = fs->cgen;
	m->gen = d->v.at->gen;
	m->mgen = d->v.at->mgen;
	m->expires = s->expires;
}

static __always_inline int tr_run(void *ctx, const int xdp, const int filt)
{
	struct tr_pkt p;
	/* Zeroed where it is first needed, not here: the decision is 120
	 * bytes, 15 stores that a frame the memo sends never reads (a drop
	 * there writes its note, which nothing after reads). */
	struct tr_decision d;

	tr_read(ctx, xdp, &p);
	if (!filt && !capture_on) {
		/* The decision memo, in the programs without the filter stage. */
		struct tr_fast fs;
		int ret;

		tr_fast_init(&fs);
		if (tr_fast_send(ctx, xdp, &p, &fs, &d, &ret))
			return ret;
		__builtin_memset(&d, 0, sizeof(d));
		ret = tr_switch(ctx, xdp, &p, &d, filt);
		if (ret == tr_verdict_redirect(xdp))
			tr_fast_remember(ctx, xdp, &fs, &p, &d);
		return ret;
	}
	if (capture_on) {
		/* Only in the programs of a running capture (lib/capture.h). */
		int ret;

		TR_CALL(xdp, tr_capture_in, ctx, p.ifindex, p.len, (__u32)p.meta_tci << 16 | p.meta_proto);
		__builtin_memset(&d, 0, sizeof(d));
		ret = tr_switch(ctx, xdp, &p, &d, filt);
		tr_capture_out(&p, &d, ret == tr_verdict_drop(xdp));
		return ret;
	}
	__builtin_memset(&d, 0, sizeof(d));
	return tr_switch(ctx, xdp, &p, &d, filt);
}

/* The devmap programs: each copy of a flood, as it leaves by its port. */
SEC("xdp/devmap")
int trestle_vlan_egress(struct xdp_md *ctx)
{
	return tr_devmap_egress(ctx);
}

SEC("xdp/devmap")
int trestle_patch_egress(struct xdp_md *ctx)
{
	return tr_devmap_patch_egress(ctx);
}

/* The far end of an overlay port's xdp way in (lib/overlay.h). */
SEC("tc")
int trestle_via(struct __sk_buff *skb)
{
	return tr_via(skb);
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

