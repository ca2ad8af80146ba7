/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The learning table, on the packet path. rule 2 of architecture.md: the common case
 * (a known source on its known port, seen recently) reads the map and writes
 * nothing. The map is written only for a new address, an address that moved,
 * or a timestamp older than refresh_ns, and refreshing is a plain store into
 * the value. Aging (deleting idle entries) is the control plane's job.
 */
#ifndef TRESTLE_FDB_H
#define TRESTLE_FDB_H

#include "maps.h"
#include "stages.h"
#include "event.h"

/* How stale a timestamp may get before the datapath refreshes it; set at load
 * to a fraction of the shortest aging time. */
const volatile __u64 refresh_ns = 1000000000ULL;

/* The table's generations, so that no CPU's learning cache vouches for an
 * entry that is gone or has moved: the control plane adds one to fdb_gen
 * after it deletes entries, the datapath to move_gen (atomically) after it
 * moves one. Two counters, because one writer cannot add atomically to a
 * counter the other adds to. */
__u32 fdb_gen = 0;
__u32 move_gen = 0;

static __always_inline void tr_fdb_key_init(struct tr_fdb_key *k, __u16 bridge,
					    __u16 vlan, const __u8 *mac)
{
	k->bridge = bridge;
	k->vlan = vlan;
	__builtin_memcpy(k->mac, mac, 6);
}

static __always_inline void tr_count_add(void *map, __u32 idx, int delta)
{
	__s32 *n = bpf_map_lookup_elem(map, &idx);

	if (n)
		__sync_fetch_and_add(n, delta);
}

/* Learned addresses: what the datapath learned less what the control plane
 * deleted (lib/maps.h). Signed, so that a difference read while both sides
 * move never wraps into "full". *added, when asked for, is the datapath's
 * side alone. */
static __always_inline __s32 tr_count_parts(void *added, void *deleted, __u32 idx, __s32 *added_out)
{
	__s32 *a = bpf_map_lookup_elem(added, &idx);
	__s32 *d = bpf_map_lookup_elem(deleted, &idx);

	*added_out = a ? *a : 0;
	return *added_out - (d ? *d : 0);
}

static __always_inline __s32 tr_count_get(void *added, void *deleted, __u32 idx)
{
	__s32 a;

	return tr_count_parts(added, deleted, idx, &a);
}

/* Whether the port in slot holds max_macs learned addresses. A global
 * function: inline, its two lookups kept the first's value and the key's
 * address in spill slots across the second, the deepest point of tr_hop's
 * frame (a new or moved source on a port with max_macs), on the walk's
 * deepest chain of calls (docs/performance.md, "The stack"). */
__attribute__((noinline)) int tr_port_count_full(__u32 slot, __u32 max_macs)
{
	return tr_count_get(&port_macs, &port_macs_del, slot) >= (__s32)max_macs;
}

static __always_inline int tr_port_full(const struct tr_port *in)
{
	return in->max_macs && tr_port_count_full(in->slot, in->max_macs);
}

/*
 * The memos: each CPU remembers the last source it found in place and the
 * last destination it looked up. A stream of frames between two stations,
 * the common case, then does no FDB lookup at all (a hash lookup cost about
 * 40 ns of a forwarded frame's 190: docs/performance.md). A memo never hides
 * a change: a frame from another port, bridge or VLAN misses it; a deletion
 * (the control plane adds to fdb_gen, also when it writes a static entry) or
 * a move (the datapath adds to move_gen) voids every memo; and a source memo
 * lasts half a refresh interval, so the entry's timestamp stays fresh enough
 * for aging.
 */
/*
 * Memos (of a source here, of a path in lib/patch.h, of a tracked connection
 * in lib/filter.h) expire by the kernel's tick count when the control plane
 * knows its rate, CONFIG_HZ, and sets jiffies_hz. Reading jiffies is one load
 * (the verifier inlines bpf_jiffies64); the coarse clock is a helper call
 * that cost about 15 ns a frame here. So a frame reads jiffies, and the
 * clock only when it writes a timestamp (a memo that ran out, a new or moved
 * entry). 0: the clock, every frame.
 */
const volatile __u64 jiffies_hz = 0;

/* The tick memos expire by: jiffies, or the coarse clock in ns. */
static __always_inline __u64 tr_tick(void)
{
	return jiffies_hz ? bpf_jiffies64() : bpf_ktime_get_coarse_ns();
}

/* ns as ticks (at least one), for a memo's lifetime. */
static __always_inline __u64 tr_ticks(__u64 ns)
{
	__u64 t;

	if (!jiffies_hz)
		return ns;
	t = ns * jiffies_hz / 1000000000ULL;
	return t ? t : 1;
}

/* The learning table as a frame finds it: this CPU's memos, and the stamp
 * (types.h) they are made with and checked against. The stamp is in per-CPU
 * memory, the view two pointers: in the pipeline's frame, at the head of
 * the walk's deepest chain of calls, the stamp's four values were four
 * spill slots (docs/performance.md, "The stack"). */
struct tr_table_view {
	struct tr_cpu_cache *memo;  /* NULL: none (the lab's variant) */
	struct tr_table_stamp *at;  /* never NULL once made (tr_view_init, tr_hop) */
	/* Whether tr_fdb_find answered from the destination memo is the
	 * memo's own (memo->dst.hit): 4 bytes less here, in each frame of
	 * the walk's deepest chain of calls (tr_hop's view). */
};

static __always_inline __u64 tr_view_now(struct tr_table_view *v)
{
	if (!v->at->now)
		v->at->now = bpf_ktime_get_coarse_ns();
	return v->at->now;
}

/* When a learning memo made at tick expires: half the refresh interval on. */
static __always_inline __u64 tr_memo_expires(__u64 tick)
{
	return tick + tr_ticks(refresh_ns / 2);
}

/* The frame's view, its stamp in this CPU's cpu_cache value. -1: no value
 * (never: an array of one). */
static __always_inline int tr_view_init(struct tr_table_view *v)
{
	__u32 zero = 0;
	struct tr_cpu_cache *c = bpf_map_lookup_elem(&cpu_cache, &zero);

	if (!c)
		return -1;
	v->memo = c;
#ifdef TR_LAB_VARIANT
	/* The lab's "other build" (clang -DTR_LAB_VARIANT, internal/lab/variant.go):
	 * another program over the same maps, its table's memos never used. */
	v->memo = NULL;
#endif
	v->at = &c->at;
	v->at->gen = *(volatile __u32 *)&fdb_gen;
	v->at->mgen = *(volatile __u32 *)&move_gen;
	v->at->now = 0;
	v->at->tick = jiffies_hz ? bpf_jiffies64() : tr_view_now(v);
	return 0;
}

/* Two addresses compared as a 4-byte and a 2-byte word (cilium's
 * eth_addrcmp): 4 loads where bytes took 12, on the decision memo's path
 * twice. The words may be unaligned (a frame's source address is at 6, so
 * are memo fields); the verifier takes such loads from packets and map
 * values where the architecture has efficient unaligned access (x86-64 and
 * arm64 both). Never pass the stack, whose loads it wants aligned. */
static __always_inline int tr_mac_eq(const __u8 *a, const __u8 *b)
{
	return !((*(const __u32 *)a ^ *(const __u32 *)b) |
		 (*(const __u16 *)(a + 4) ^ *(const __u16 *)(b + 4)));
}

static __always_inline int tr_src_known(const struct tr_table_view *v, __u32 ifindex,
					__u16 bridge, __u16 vlan, const __u8 *src)
{
	const struct tr_src_memo *m;

	if (!v->memo)
		return 0;
	m = &v->memo->src;
	return m->ifindex == ifindex && m->gen == v->at->gen && m->mgen == v->at->mgen &&
	       v->at->tick < m->expires && m->bridge == bridge && m->vlan == vlan &&
	       tr_mac_eq(m->mac, src);
}

static __always_inline void tr_src_remember(struct tr_table_view *v, __u32 ifindex,
					    __u16 bridge, __u16 vlan, const __u8 *src)
{
	struct tr_src_memo *m;

	if (!v->memo)
		return;
	m = &v->memo->src;
	__builtin_memcpy(m->mac, src, 6);
	m->vlan = vlan;
	m->bridge = bridge;
	m->ifindex = ifindex;
	m->gen = v->at->gen;
	m->mgen = v->at->mgen;
	m->expires = tr_memo_expires(v->at->tick);
}

/*
 * Tells the control plane that an address moved, or (an old slot of 0)
 * that a bridge with an overlay port learned a new one: a record in the
 * event ring (lib/event.h). A
 * global function, so it is verified once and the learning path holds
 * only its call, on those rare ways alone: mac is the address's 6 bytes
 * in memory order, bridge_vlan the bridge << 16 | VID, slots the old
 * port's slot << 16 | the new one's.
 */
__attribute__((noinline)) int tr_event_move(__u64 mac, __u32 bridge_vlan, __u32 slots,
					     __u32 from_ifindex, __u32 to_ifindex)
{
	/* A learn (lib/fdb.h's tr_learn, from no port) or a move. */
	struct tr_event *e = tr_event_new(&event_ring, slots >> 16 ? TR_EVENT_MOVE : TR_EVENT_LEARN);

	if (!e)
		return 0;
	e->bridge = bridge_vlan >> 16;
	e->vlan = bridge_vlan & 0xffff;
	__builtin_memcpy(e->mac, &mac, 6);
	e->from_slot = slots >> 16;
	e->to_slot = slots & 0xffff;
	e->from_ifindex = from_ifindex;
	e->to_ifindex = to_ifindex;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/*
 * Fairness of the table (docs/security.md, "A table one port cannot
 * starve"): whether a bridge's table refuses a new source of the port in
 * slot. Full (max_entries learned), it refuses every port's. At or past its
 * high-water mark (max_entries less a TR_FDB_HEADROOM-th of it, rounded up),
 * a port that holds its fair share (max_entries / the bridge's ports) or more
 * learns only within its reserve: while what the datapath has learned on it
 * in all (port_macs, which no deletion lowers) is short of its hold
 * (port_hold), which the daemon sets at each look to that sum plus the
 * reserve, 0 (nothing) before it has looked. So one port flooding random
 * sources fills the table to the mark and then learns a reserve a look,
 * which the daemon takes back out of its oldest entries; what the daemon
 * evicts opens it no room. The room above the mark is for the ports under
 * their share (a new station there is learned at its first frame), and a
 * port over its share (an uplink, a patch port) still learns its newcomers a
 * reserve at a time (internal/daemon/fair.go). The hold is read only at the
 * mark, of a port at its share: a bridge under its mark pays nothing for it.
 */
static __always_inline int tr_table_refuses(__u32 bridge, __u32 slot, __u32 max, __u32 nports)
{
	__s32 n = tr_count_get(&bridge_macs, &bridge_macs_del, bridge), learned, *hold;
	__u32 fair;

	if (n >= (__s32)max)
		return 1;
	if (n < (__s32)(max - (max + TR_FDB_HEADROOM - 1) / TR_FDB_HEADROOM))
		return 0;
	fair = nports ? max / nports : max;
	if (tr_count_parts(&port_macs, &port_macs_del, slot, &learned) < (__s32)(fair ? fair : 1))
		return 0;
	hold = bpf_map_lookup_elem(&port_hold, &slot);
	/* The sum wraps after 2^32 learns: compared as a difference. */
	return !hold || !*hold || (__s32)((__u32)learned - (__u32)*hold) >= 0;
}

/* A new source on a port at its max_macs: dropped, or (mac_limit_action
 * "forward") let through without being learned, and counted so. */
static __always_inline int tr_at_limit(const struct tr_port *in, struct tr_port_stats *st,
				       enum tr_drop_reason *reason)
{
	if (in->flags & TR_PORT_LIMIT_FORWARD) {
		st->c[TR_CNT_UNLEARNED]++;
		return 0;
	}
	*reason = TR_DROP_MAC_LIMIT;
	return -1;
}

/* Scratch for the key and value of tr_learn_new and tr_learn_move, per
 * CPU: a global function's stack is part of the deepest chain of calls
 * (the walk's), which has no room left for them. */
struct tr_learn_scratch {
	struct tr_fdb_key key;
	struct tr_fdb_val val;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tr_learn_scratch);
} learn_scratch SEC(".maps");

/*
 * Learns a new source, if the table takes it (tr_table_refuses): mac is its
 * 6 bytes in memory order, bridge_vlan the bridge << 16 | VID, port the
 * ingress slot << 32 | its ifindex, limits the bridge's max_entries and its
 * ports << 32. A source the table refuses, or that the map itself has no
 * room for, is counted unlearned (and unlearned_full) on the port and goes
 * on: issue 29, a station the table cannot hold yet still talks, and is
 * flooded to until it is learned. Returns 1 when it learned the source, -1
 * when the table refused it, 0 when another CPU learned it first. A
 * global function, so the verifier walks it once a build, and its ways
 * (learned, refused, learned meanwhile by another CPU) leave the caller in
 * one state.
 */
__attribute__((noinline)) int tr_learn_new(__u64 mac, __u32 bridge_vlan, __u64 port, __u64 limits)
{
	__u32 bridge = bridge_vlan >> 16, slot = (port >> 32) & 0xffff, zero = 0;
	struct tr_port_stats *st = tr_stats(slot);
	struct tr_learn_scratch *x = bpf_map_lookup_elem(&learn_scratch, &zero);

	if (!x)
		return 0;
	if (tr_table_refuses(bridge, slot, (__u32)limits, (limits >> 32) & 0xffff))
		goto full;
	x->key.bridge = bridge;
	x->key.vlan = bridge_vlan & 0xffff;
	__builtin_memcpy(x->key.mac, &mac, 6);
	x->val.ifindex = (__u32)port;
	x->val.slot = slot;
	x->val.flags = 0;
	x->val.seen_ns = bpf_ktime_get_coarse_ns();
	if (bpf_map_update_elem(&fdb, &x->key, &x->val, BPF_NOEXIST)) {
		/* -EEXIST: another CPU learned it first, which is fine.
		 * Anything else: the map itself is full. */
		if (bpf_map_lookup_elem(&fdb, &x->key))
			return 0;
		goto full;
	}
	tr_count_add(&port_macs, slot, 1);
	tr_count_add(&bridge_macs, bridge, 1);
	if (st)
		st->c[TR_CNT_LEARNED]++;
	return 1;
full:
	if (st) {
		st->c[TR_CNT_UNLEARNED]++;
		st->c[TR_CNT_UNLEARNED_FULL]++;
	}
	return -1;
}

/*
 * A learned source seen on another port of its bridge moves there: mac its
 * 6 bytes in memory order, bridge_vlan the bridge << 16 | VID, port the new
 * port's slot << 32 | its ifindex, old the entry's, now its timestamp. A
 * global function, as tr_learn_new: inline, its values were the deepest
 * point of tr_hop's frame, on the walk's deepest chain of calls
 * (docs/performance.md, "The stack"). Returns 1 when it moved the entry.
 */
__attribute__((noinline)) int tr_learn_move(__u64 mac, __u32 bridge_vlan, __u64 port, __u64 old,
					     __u64 now)
{
	__u32 slot = (port >> 32) & 0xffff, old_slot = (old >> 32) & 0xffff, zero = 0;
	struct tr_learn_scratch *x = bpf_map_lookup_elem(&learn_scratch, &zero);
	struct tr_port_stats *st;

	if (!x)
		return 0;
	x->key.bridge = bridge_vlan >> 16;
	x->key.vlan = bridge_vlan & 0xffff;
	__builtin_memcpy(x->key.mac, &mac, 6);
	x->val.ifindex = (__u32)port;
	x->val.slot = slot;
	x->val.flags = 0;
	x->val.seen_ns = now;
	/* The update fails only if the control plane deleted the entry
	 * meanwhile (and counted it deleted where it was): the next frame
	 * learns it again. So the count moves only with the entry. Every
	 * CPU's memos may name the old port: a new move generation voids
	 * them. Moves are rare, so the atomics are off the common path. */
	if (bpf_map_update_elem(&fdb, &x->key, &x->val, BPF_EXIST))
		return 0;
	tr_count_add(&port_macs, old_slot, -1);
	tr_count_add(&port_macs, slot, 1);
	__sync_fetch_and_add(&move_gen, 1);
	st = tr_stats(slot);
	if (st)
		st->c[TR_CNT_MOVED]++;
	tr_event_move(mac, bridge_vlan, old_slot << 16 | slot, (__u32)old, (__u32)port);
	return 1;
}

/*
 * Learn the source address on the ingress port, after the checks that bind
 * sources to ports (issue 29, docs/security.md):
 *
 *   - a locked port (TR_PORT_LOCKED) takes only its own static entries as
 *     sources (those of the config, of `trestle fdb add`, of its
 *     allowed_macs, which the control plane writes as statics) and learns
 *     nothing: any other source is dropped (TR_DROP_LOCKED), so no entry
 *     moves onto it, and none moves off it since what it holds is static;
 *   - from any port, a source that is another port's static entry is
 *     dropped (TR_DROP_SRC_STATIC), as a steal of it;
 *   - a port that learns nothing (learning = false) is checked the same,
 *     and learns nothing.
 *
 * Both checks are on the paths that look the source up in the table (a
 * source the memo vouches for was found in place, bound to this port), so
 * a port without them pays nothing. Returns 0 to go on, or -1 with *reason
 * set when the frame must be dropped.
 */
static __always_inline int tr_learn(struct tr_table_view *v, const struct tr_port *in,
				    __u32 ifindex, const struct tr_bridge *br, __u16 vlan,
				    const __u8 *src, struct tr_port_stats *st,
				    enum tr_drop_reason *reason)
{
	struct tr_fdb_key key;
	struct tr_fdb_val *e;
	__u64 now, mac = 0;

	if (tr_src_known(v, ifindex, in->bridge, vlan, src))
		return 0;

	tr_fdb_key_init(&key, in->bridge, vlan, src);
	e = bpf_map_lookup_elem(&fdb, &key);
	if (e) {
		if (e->ifindex == ifindex) {
			/* On a locked port only a static entry binds the source
			 * (a learned one there is left from before the lock). */
			if ((in->flags & TR_PORT_LOCKED) && !(e->flags & TR_FDB_STATIC))
				goto locked;
			now = tr_view_now(v);
			if (!(in->flags & TR_PORT_NO_LEARN) && now - e->seen_ns > refresh_ns)
				e->seen_ns = now;
			tr_src_remember(v, ifindex, in->bridge, vlan, src);
			return 0;
		}
		/* Another port's address. */
		if (in->flags & TR_PORT_LOCKED)
			goto locked;
		/* A static entry wins: the table stays, the frame is dropped. */
		if (e->flags & TR_FDB_STATIC) {
			*reason = TR_DROP_SRC_STATIC;
			return -1;
		}
		if (in->flags & TR_PORT_NO_LEARN)
			goto unlearned;
		if (tr_port_full(in))
			return tr_at_limit(in, st, reason);
		now = tr_view_now(v);
		__builtin_memcpy(&mac, key.mac, 6);
		if (tr_learn_move(mac, (__u32)in->bridge << 16 | vlan, (__u64)in->slot << 32 | ifindex,
				  (__u64)e->slot << 32 | e->ifindex, now) > 0)
			/* This frame's view too: a destination memo of the frame
			 * before, made under the old generation, must not answer
			 * for the rest of this frame's step (a frame to its own
			 * source, which has just moved, went by the memo to the old
			 * port, not hairpin). */
			v->at->mgen = *(volatile __u32 *)&move_gen;
		return 0;
	}

	if (in->flags & TR_PORT_LOCKED)
		goto locked;
	if (in->flags & TR_PORT_NO_LEARN)
		goto unlearned;
	if (tr_port_full(in))
		return tr_at_limit(in, st, reason);
	/* Learned or not, the source is remembered: its next frames stay
	 * off the table until the memo runs out or the control plane makes
	 * room (it adds to fdb_gen when it deletes). */
	__builtin_memcpy(&mac, key.mac, 6);
	tr_view_now(v);
	if (tr_learn_new(mac, (__u32)in->bridge << 16 | vlan, (__u64)in->slot << 32 | ifindex,
			 (__u64)br->nports << 32 | br->max_entries) > 0 &&
	    (br->flags & TR_BRIDGE_OVERLAY)) {
		/* FRR learns of it now, not at the daemon's next look at the
		 * table (issue 30: type-2 convergence). */
		tr_event_move(mac, (__u32)in->bridge << 16 | vlan, in->slot, 0, ifindex);
	}
unlearned:
	/* (learning = false: checked, not learned.) The memo keeps the next
	 * frames of the source off the table until a static entry is written
	 * or deleted (fdb_gen), an entry moves (move_gen) or it runs out. */
	tr_src_remember(v, ifindex, in->bridge, vlan, src);
	return 0;
locked:
	*reason = TR_DROP_LOCKED;
	return -1;
}

/* Where a destination lives: from this CPU's memo when it is the last one
 * looked up, else from the table (and then remembered). 0 if unknown. */
static __always_inline int tr_fdb_find(struct tr_table_view *v, __u16 bridge, __u16 vlan,
				       const __u8 *dst, __u32 *ifindex, __u32 *slot)
{
	struct tr_fdb_key key;
	struct tr_fdb_val *e;
	struct tr_dst_memo *m = v->memo ? &v->memo->dst : NULL;

	if (m && m->gen == v->at->gen && m->mgen == v->at->mgen && m->bridge == bridge &&
	    m->vlan == vlan && m->ifindex && tr_mac_eq(m->mac, dst)) {
		*ifindex = m->ifindex;
		*slot = m->slot;
		m->hit = 1;
		return 1;
	}
	tr_fdb_key_init(&key, bridge, vlan, dst);
	e = bpf_map_lookup_elem(&fdb, &key);
	if (!e)
		return 0;
	*ifindex = e->ifindex;
	*slot = e->slot;
	if (m) {
		__builtin_memcpy(m->mac, dst, 6);
		m->vlan = vlan;
		m->bridge = bridge;
		m->slot = e->slot;
		m->ifindex = e->ifindex;
		m->gen = v->at->gen;
		m->mgen = v->at->mgen;
		m->hit = 0; /* the table answered: tr_fast_remember reads it, for a forward */
	}
	return 1;
}

#endif
