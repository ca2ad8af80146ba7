/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Patch ports: bridges joined inside one program run (architecture.md rule 7).
 *
 * A frame that a bridge forwards or floods to a patch port continues in the
 * peer's bridge as if it had arrived on the peer patch port: learned there,
 * looked up, forwarded, flooded or dropped by that bridge's rules. No veth
 * hop, no second NAPI poll, no extra redirect: the program walks the bridges
 * the frame reaches, breadth first, and collects the interface ports it
 * leaves by. The patches form trees (the control plane refuses cycles), so
 * a walk that never goes back through the patch it came by visits each
 * bridge once; it stops at TR_MAX_PATCH_CHAIN bridges all the same.
 *
 * The VLAN a frame travels in is the same in every bridge of the walk: the
 * control plane accepts a patch only between bridges that are both VLAN-aware
 * or both not, and whose two patch ports carry the same VLANs the same way.
 *
 * A known station behind a chain of patches is the common case (seed 003's
 * chained bridges): each CPU remembers the last two paths it found (struct
 * tr_path_memo), so the next frame between the same two stations crosses
 * the chain with a counter update per patch and no table lookup, until the
 * table's generations change or learning along the path needs a refresh.
 */
#ifndef TRESTLE_PATCH_H
#define TRESTLE_PATCH_H

#include "maps.h"
#include "drop.h"
#include "fdb.h"
#include "vlan.h"

/* The words of a walk's set of slots it remembers writing (tr_choose). */
#define TR_WALK_DIRTY 8

/* tc: the copies one port of a flood may leave to send: the one chosen
 * before it, and before its span port. */
#define TR_WALK_PEND 2

/* The walk of one frame through patched bridges. Only scalars: global
 * functions (verified once, not at every call) take it by pointer. */
struct tr_walk {
	__u64 sel[TR_SEL_WORDS]; /* the interface ports chosen, a bit each by slot (xdp: where the copies go) */
	__u64 seq;    /* which walk of this CPU's this is (tr_walk_new): its copies carry it */
	__u8 dirty[TR_WALK_DIRTY]; /* the words of sel written, while ndirty <= TR_WALK_DIRTY */
	__u32 ndirty; /* how many; TR_WALK_DIRTY + 1: more (sel is cleared whole) */
	struct tr_table_stamp at; /* the first bridge's (types.h), its clock read once for the walk: the
				   * view of each bridge beyond (tr_hop) */
	__u8 src[6];
	__u8 dst[6];
	__u16 vlan;   /* the frame's VLAN in every bridge of the walk (its FDB key) */
	__u16 on;     /* the bridges are VLAN-aware */
	__u32 wire;   /* the frame's length on the wire */
	__u32 ingress; /* the interface it came in by */
	__u32 in_slot; /* and its port's slot */
	__u32 pcp;     /* tc: the priority of its tag, if it had one */
	__u32 nsel;    /* interface ports chosen */
	__u32 last_slot, last_ifindex; /* the last of them */
	__u32 unicast; /* every bridge forwarded it to one port: the path may be remembered */
	__u32 head, tail;
	struct tr_drop_note drop; /* the last drop of the frame or of a copy (tr_drop, lib/drop.h): on
				   * its ingress port (the first bridge's filter of a copy), or beyond */
	__u16 queue[TR_MAX_PATCH_CHAIN]; /* bridges to visit: the patch slot each is entered by */
	__u16 nhops;
	__u8 group;   /* the flood being emitted goes to its group's ports only (this CPU's group_cur,
		       * lib/snoop.h): its bridge snoops and the table has the group */
	__u8 grouped; /* some bridge of the walk sent it to its group's ports only */
	__u16 hops[TR_MAX_PATCH_CHAIN]; /* patches crossed: the slots left by */
	__u32 entry; /* the interface the flood being emitted entered its bridge by (a patch's pseudo one) */
	__u32 npend; /* tc: copies a port of a flood left for tr_emit to send (tr_choose_tc_later) */
	__u32 pend_ifindex[TR_WALK_PEND];
	__u32 fset; /* the flood being emitted is filtered copy by copy: the bridge's rule set (0: not) */
	__u32 fin;  /* and the slot of the port it entered that bridge by */
};

/* Each CPU's walks, a ring of them: too big for the stack of a program
 * that calls two functions deep. A frame's walk runs start to end on one
 * CPU, in softirq, where no other frame's can interrupt it; but XDP sends
 * its copies later, when the device map is flushed at the end of the NAPI
 * poll (at most its budget, 64 frames, later), on the same CPU, and
 * trestle_patch_egress then reads the choice of the walk that sent them.
 * So each walk takes the next entry of the ring (walk_at counts them), and
 * a copy carries its walk's number in the frame's metadata: the ring is
 * four times the budget, and a copy whose walk was written over since
 * (which would take 256 frames before a flush) is dropped, counted. The
 * choice is a set of slots (4097 bits: too many for the 32 bytes of
 * metadata a frame may carry). */
#define TR_WALK_RING 256

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TR_WALK_RING);
	__type(key, __u32);
	__type(value, struct tr_walk);
} walks SEC(".maps");

/* The number of this CPU's last walk. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} walk_at SEC(".maps");

/* Whether slot is in the set of slots sel (a tr_walk's or a tr_reach's). */
static __always_inline int tr_in_set(const __u64 *sel, __u32 slot)
{
	__u32 k = slot >> 6;

	/* The bound on k itself, not a range of slot the compiler would
	 * fold it into (which the verifier cannot carry over to k). */
	asm volatile("" : "+r"(k));
	if (!slot || k >= TR_SEL_WORDS)
		return 0;
	return (sel[k] >> (slot & 63)) & 1;
}

/* This CPU's current walk: the last one started (capture reads it). */
static __always_inline struct tr_walk *tr_walk_cur(void)
{
	__u32 zero = 0, i;
	__u64 *at = bpf_map_lookup_elem(&walk_at, &zero);

	if (!at)
		return NULL;
	i = *at & (TR_WALK_RING - 1);
	return bpf_map_lookup_elem(&walks, &i);
}

/* A new walk: the next entry of the ring, its set of ports emptied (the
 * words its last walk wrote, or all). The caller sets the rest. */
static __always_inline struct tr_walk *tr_walk_new(void)
{
	__u32 zero = 0, i, n;
	__u64 *at = bpf_map_lookup_elem(&walk_at, &zero), seq;
	struct tr_walk *w;

	if (!at)
		return NULL;
	seq = *at + 1;
	*at = seq;
	i = seq & (TR_WALK_RING - 1);
	w = bpf_map_lookup_elem(&walks, &i);
	if (!w)
		return NULL;
	n = w->ndirty;
	if (n > TR_WALK_DIRTY) {
		__builtin_memset(w->sel, 0, sizeof(w->sel));
	} else {
		for (__u32 j = 0; j < TR_WALK_DIRTY; j++) {
			__u32 k;

			if (j >= n)
				break;
			k = w->dirty[j];
			if (k < TR_SEL_WORDS)
				w->sel[k] = 0;
		}
	}
	w->ndirty = 0;
	w->seq = seq;
	return w;
}

/* Each walked bridge's reach (struct tr_reach), by bridge id, and its
 * ports as a devmap with no program (ifindex -> ifindex, as the floods
 * map's sets), in an array of maps by bridge id: the broadcast of a walk
 * that chose every port of its reach but the ingress (walk.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_BRIDGES + 1);
	__type(key, __u32);
	__type(value, struct tr_reach);
} reaches SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, TR_MAX_BRIDGES + 1);
	__type(key, __u32);
	__array(values, struct tr_flood_ports); /* as the plain flood sets' */
} reach_floods SEC(".maps");

static __always_inline struct tr_patch *tr_patch_of(__u32 slot)
{
	struct tr_patch *pp = bpf_map_lookup_elem(&patches, &slot);

	return pp && pp->port.bridge ? pp : NULL;
}

static __always_inline int tr_is_patch(__u32 ifindex)
{
	return (ifindex & TR_PATCH_IFINDEX) != 0;
}

/* The frame's VLAN for the egress rule (lib/door.h): 0 in bridges that are
 * not VLAN-aware. */
static __always_inline __u16 tr_walk_vid(const struct tr_walk *w)
{
	return w->on ? w->vlan : 0;
}

/*
 * The patch port's device step (the door's, lib/door.h): the frame leaves
 * its bridge by patch port slot into the peer's bridge, which the walk
 * visits next. Returns 0, for the door to count the crossing once, as sent
 * on the patch port (the control plane reads it as received on the peer,
 * internal/datapath); or -1, dropped and counted on the patch port: its
 * peer is not set up (yet), or the walk is full (the frame would cross
 * more than TR_MAX_PATCH_CHAIN bridges).
 */
static __always_inline int tr_cross(struct tr_walk *w, __u32 slot)
{
	struct tr_patch *pp;
	__u32 t = w->tail, n = w->nhops;

	pp = tr_patch_of(slot);
	if (!pp || !tr_patch_of(pp->peer)) {
		tr_drop(&w->drop, tr_stats(slot), TR_DROP_NO_EGRESS, 1);
		return -1;
	}
	if (t >= TR_MAX_PATCH_CHAIN - 1) {
		tr_drop(&w->drop, tr_stats(slot), TR_DROP_PATCH_CHAIN, 1);
		return -1;
	}
	w->queue[t & (TR_MAX_PATCH_CHAIN - 1)] = pp->peer;
	w->tail = t + 1;
	if (n < TR_MAX_PATCH_CHAIN) {
		w->hops[n & (TR_MAX_PATCH_CHAIN - 1)] = slot;
		w->nhops = n + 1;
	}
	return 0;
}

/* Whether the walk has chosen the port in slot already: a span port two
 * mirrored ports copy to gets one copy. */
static __always_inline int tr_chosen(const struct tr_walk *w, __u32 slot)
{
	return tr_in_set(w->sel, slot);
}

/* The walk chose an interface port (xdp: its bit; tc sends as it goes). */
static __always_inline void tr_choose(struct tr_walk *w, __u32 ifindex, __u32 slot)
{
	__u32 k = slot >> 6, n;

	asm volatile("" : "+r"(k)); /* as in tr_in_set */
	if (k < TR_SEL_WORDS) {
		if (!w->sel[k]) {
			/* A word written first: remembered, so that the
			 * next walk of this entry clears only it. */
			n = w->ndirty;
			if (n <= TR_WALK_DIRTY) {
				if (n < TR_WALK_DIRTY)
					w->dirty[n] = k;
				w->ndirty = n + 1;
			}
		}
		w->sel[k] |= 1ULL << (slot & 63);
	}
	w->nsel++;
	w->last_slot = slot;
	w->last_ifindex = ifindex;
}

/* The path a frame took, remembered when it was unicast all the way. */
static __always_inline void tr_path_remember(struct tr_cpu_cache *memo, const struct tr_walk *w,
					     __u16 first)
{
	struct tr_path_memo *m;
	__u32 i;

	if (!memo || !w->unicast || w->drop.noted || w->nsel != 1 || !w->nhops ||
	    w->nhops > TR_MAX_PATCH_CHAIN)
		return;
	i = memo->path_next & 1;
	memo->path_next = i ^ 1;
	m = &memo->path[i];
	__builtin_memcpy(m->src, w->src, 6);
	__builtin_memcpy(m->dst, w->dst, 6);
	m->vlan = w->vlan;
	m->first = first;
	m->out_slot = w->last_slot;
	m->out_ifindex = w->last_ifindex;
	m->nhops = w->nhops;
	__builtin_memcpy(m->hops, w->hops, sizeof(m->hops));
	m->gen = w->at.gen;
	m->mgen = w->at.mgen;
	m->expires = tr_memo_expires(w->at.tick);
}

static __always_inline int tr_path_is(const struct tr_path_memo *m, const struct tr_table_view *v,
				      __u16 first, const __u8 *src, const __u8 *dst, __u16 vlan)
{
	return m->first == first && m->gen == v->at->gen && m->mgen == v->at->mgen &&
	       v->at->tick < m->expires && m->vlan == vlan && tr_mac_eq(m->dst, dst) &&
	       tr_mac_eq(m->src, src);
}

/* The remembered path of a frame from src to dst that leaves its first
 * bridge by patch slot first, or NULL. */
static __always_inline const struct tr_path_memo *
tr_path_known(struct tr_cpu_cache *memo, const struct tr_table_view *v, __u16 first,
	      const __u8 *src, const __u8 *dst, __u16 vlan)
{
	if (!memo)
		return NULL;
	if (tr_path_is(&memo->path[0], v, first, src, dst, vlan))
		return &memo->path[0];
	if (tr_path_is(&memo->path[1], v, first, src, dst, vlan))
		return &memo->path[1];
	return NULL;
}

#endif
