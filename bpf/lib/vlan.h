/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The VLAN stage (802.1Q access, trunk and native ports), on the packet path.
 *
 * It is compiled in only when the control plane loads the programs with
 * vlan_aware set (lib/stages.h), which it does while some bridge is VLAN-aware (architecture.md
 * rule 6): otherwise the verifier removes every line of it, and a switch
 * without VLANs runs exactly the code it ran before. Inside, a bridge's flag
 * says whether its frames are classified; a bridge without it behaves as a
 * VLAN-unaware one (learning keyed by whatever outer VID the frame carries).
 *
 * Classifying a frame reads the port (already read), one bit of the trunk's
 * VLAN set and the VLAN's entry, all arrays: no hash lookup, no lock, no map
 * write (rule 2), where vlan(4) took three mutexes per frame (seed 002).
 */
#ifndef TRESTLE_VLAN_H
#define TRESTLE_VLAN_H

#include "maps.h"
#include "parse.h"
#include "ctx.h"
#include "stages.h"

/* What the frame's tag is, and in which VLAN it travels. */
struct tr_tag {
	__u8 ctag;    /* the frame has an outermost 802.1Q tag (in its bytes or its metadata) */
	__u8 on;      /* the frame's bridge is VLAN-aware: the fields below hold */
	__u16 tci;    /* that tag's TCI */
	__u16 vid;    /* the VLAN it was classified into */
	__u16 members; /* up ports of the bridge carrying vid */
	struct tr_vlan_stats *st;
	/* As the frame came, for the decision memo (lib/memo.h): its ctag (tr_tag_to
	 * changes ctag and tci as it tags the frame), its outer VID as parsed, and
	 * the index of its VLAN's counters (st's). */
	__u8 in_ctag;
	__u16 in_vlan;
	__u16 idx;
};

static __always_inline int tr_vlan_bit(__u32 slot, __u16 vid)
{
	struct tr_port_vlans *pv = bpf_map_lookup_elem(&port_vlans, &slot);

	return pv && (pv->bits[(vid >> 6) & (TR_VLAN_IDS / 64 - 1)] >> (vid & 63)) & 1;
}

/* Does the port carry vid? An access port carries its VLAN, a trunk the VLANs
 * of its bit set (its native VLAN among them). */
static __always_inline int tr_vlan_carries(const struct tr_port *port, __u16 vid)
{
	if (!vid)
		return 0;
	if (!(port->flags & TR_PORT_TRUNK))
		return port->pvid == vid;
	return tr_vlan_bit(port->slot, vid);
}

/* Does vid leave the port untagged (access port, or the native VLAN of a
 * trunk that is not native_tagged)? The trunk's half is one test of an OR,
 * not two branches: two took the xdp build with VLANs 26,000 instructions
 * nearer the verifier's limit, where this one took it 48,000 away. */
static __always_inline int tr_vlan_untagged_on(const struct tr_port *port, __u16 vid)
{
	return !(port->flags & TR_PORT_TRUNK) ||
	       !((port->pvid ^ vid) | (port->flags & TR_PORT_NATIVE_TAGGED));
}

static __always_inline struct tr_vlan_entry *tr_vlan_of(__u16 bridge, __u16 vid)
{
	__u32 k = (__u32)bridge * TR_VLAN_IDS + (vid & (TR_VLAN_IDS - 1));

	return bpf_map_lookup_elem(&vlans, &k);
}

static __always_inline struct tr_vlan_stats *tr_vlan_stats_of(__u16 idx)
{
	__u32 k = idx;

	return idx ? bpf_map_lookup_elem(&vlan_stats, &k) : NULL;
}

/*
 * Does the frame carry a second tag (802.1Q or 802.1ad) behind its outer
 * one? l3_off: where the parser found the payload after the tags in the
 * bytes (tr_parse: up to two); meta_proto: the outer tag's TPID when the
 * kernel holds it outside the bytes (tc), 0 if none. Read from the
 * parser's offset, not the bytes again: a second read of the packet here
 * took the xdp build with VLANs over the verifier's million instructions.
 */
static __always_inline int tr_vlan_inner(__u32 l3_off, __be16 meta_proto)
{
	return l3_off + (meta_proto ? TR_VLAN_HLEN : 0) >= sizeof(struct ethhdr) + 2 * TR_VLAN_HLEN;
}

/*
 * Ingress: which VLAN the frame belongs to. An untagged, priority-tagged
 * (VID 0) or 802.1ad frame takes the port's pvid; a C-tagged one its VID,
 * if the port is a trunk that carries it. meta_proto/meta_tci: a tag the
 * kernel holds outside the bytes (tc), meta_proto 0 if none; l3_off: the
 * parser's (tr_vlan_inner). Returns -1 with *reason when the frame has no
 * VLAN here.
 *
 * On an access port, a frame whose outer tag names no VLAN (a priority tag
 * or an S-tag) and that carries a second tag behind it is dropped
 * (double_tagged) unless the port is a qinq port: the outer tag would come
 * off (a priority tag, where the VLAN leaves untagged) or be ignored (an
 * S-tag) and the inner one would name the VLAN on the next link, a hop into
 * a VLAN the port does not carry (issue 29). A trunk's frames are not
 * checked: its outer tag is the VLAN, and what follows is that VLAN's
 * payload (docs/switching.md, "Double tags").
 */
static __always_inline int tr_vlan_ingress(void *data_end, struct ethhdr *eth,
					   __be16 meta_proto, __u16 meta_tci, __u32 l3_off,
					   const struct tr_port *in, __u32 wire, struct tr_tag *t,
					   enum tr_drop_reason *reason)
{
	struct tr_vlan_hdr *vh = (void *)(eth + 1);
	struct tr_vlan_entry *v;
	__u16 vid;

	t->ctag = 0;
	t->tci = 0;
	if (meta_proto) {
		if (meta_proto == bpf_htons(ETH_P_8021Q)) {
			t->ctag = 1;
			t->tci = meta_tci;
		}
	} else if (eth->h_proto == bpf_htons(ETH_P_8021Q)) {
		if ((void *)(vh + 1) > data_end) {
			*reason = TR_DROP_RUNT;
			return -1;
		}
		t->ctag = 1;
		t->tci = bpf_ntohs(vh->tci);
	}
	vid = t->tci & 0x0fff;
	if (t->ctag && vid) {
		if (!(in->flags & TR_PORT_TRUNK)) {
			*reason = TR_DROP_VLAN_TAGGED;
			return -1;
		}
		if (!tr_vlan_bit(in->slot, vid)) {
			*reason = TR_DROP_VLAN_NOT_CARRIED;
			return -1;
		}
	} else {
		vid = in->pvid;
		if (!vid) {
			*reason = TR_DROP_VLAN_UNTAGGED;
			return -1;
		}
		if (!(in->flags & (TR_PORT_TRUNK | TR_PORT_QINQ)) &&
		    tr_vlan_inner(l3_off, meta_proto)) {
			*reason = TR_DROP_DOUBLE_TAGGED;
			return -1;
		}
	}
	v = tr_vlan_of(in->bridge, vid);
	if (!v || !v->idx) {
		/* The port names a VLAN the control plane has not set up yet. */
		*reason = TR_DROP_VLAN_NOT_CARRIED;
		return -1;
	}
	t->on = 1;
	t->vid = vid;
	t->members = v->members;
	t->in_ctag = t->ctag;
	t->idx = v->idx;
	t->st = tr_vlan_stats_of(v->idx);
	if (t->st) {
		t->st->c[TR_VCNT_RX_PACKETS]++;
		t->st->c[TR_VCNT_RX_BYTES] += wire;
	}
	return 0;
}

/* Makes the frame leave as the egress VLAN rule says: tagged with vid, or
 * untagged. A tag the frame keeps (or gets back) keeps its priority; a new
 * one has PCP 0. Returns the change in the frame's wire length, or a
 * negative error. */
static __always_inline int tr_tag_to(void *ctx, const int xdp, struct tr_tag *t, int untagged)
{
	if (untagged) {
		if (!t->ctag)
			return 0;
		if (tr_tag_pop(ctx, xdp))
			return -100;
		t->ctag = 0;
		return -TR_VLAN_HLEN;
	}
	if (!t->ctag) {
		/* t->tci keeps the priority of a tag this frame had before a
		 * copy to an untagged port took it off: a tag that was never
		 * there has PCP 0. */
		t->tci = (t->tci & 0xf000) | t->vid;
		if (tr_tag_push(ctx, xdp, t->tci))
			return -100;
		t->ctag = 1;
		return TR_VLAN_HLEN;
	}
	if ((t->tci & 0x0fff) != t->vid) {
		t->tci = (t->tci & 0xf000) | t->vid;
		if (tr_tag_set(ctx, xdp, t->tci))
			return -100;
	}
	return 0;
}

#endif
