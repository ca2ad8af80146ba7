/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The filter stage: a bridge's ordered pass/block rules, the first match
 * deciding, and the connections keep_state rules open (pf's keep state).
 *
 * Classifier: a tuple space search. The control plane groups the rules by
 * their mask (which fields they match, with which prefix lengths: a port
 * range becomes the prefixes that cover it) and writes, for each mask, one
 * hash entry per rule at the rule's masked values, holding the rule's
 * position (prio). A frame builds its key once and looks it up, masked,
 * once per mask: the hit of lowest prio decides. The masks are kept in the
 * order of their best rule, so the search stops at the first mask that
 * cannot beat the hit in hand. Its cost grows with the number of rule
 * shapes, not of rules: a thousand rules of one shape are one lookup.
 *
 * A rule set belongs to one copy of its bridge (lib/maps.h): a reload
 * writes the copy no frame reads, then flips, so a frame is judged by the
 * old rules or by the new, never by a mix.
 *
 * The key reads IPv6 through up to TR_FILTER_EXTHDRS extension headers to
 * the transport header. A non-first fragment has no transport header (l4
 * TR_L4_NONE): it matches only rules without port or ICMP keys, as in pf and
 * nftables; its first fragment was judged by its ports. A frame whose
 * transport header should be there and cannot be read (too many headers,
 * one past TR_FILTER_L4_MAX, one cut short by the frame or by the IP
 * datagram's length: a tiny first fragment) fails closed: TR_L4_UNREADABLE,
 * which no pass rule with ports matches and every block rule that names a
 * protocol, ports or an ICMP type blocks, if its other keys match
 * (TR_DROP_UNREADABLE). Both are counted by why (filter_unread).
 *
 * Keep state: a frame a keep_state rule passes records its connection, one
 * entry for both directions; a frame of a known connection passes before
 * any rule is looked at. The tables are trestle's own, not the kernel's
 * conntrack (docs/filter.md says why). A connection is keyed by its bridge
 * and VLAN too. A new connection goes into its bridge's own LRU in
 * filter_halfopen (a flood of new ones evicts the least recently used of
 * that bridge's, conntrack's early drop); once seen both ways (TCP: the
 * handshake's ACK) it moves to filter_states, if its bridge and the port
 * that opened it are under their bounds. Entries age by the timeouts of
 * enum tr_state_timeouts, checked here and removed by the control plane.
 *
 * Like every optional stage, it is in the programs only while some bridge
 * has its filter on (filter_on, a load-time constant, lib/stages.h: architecture.md rule 6), and
 * the code is in global functions, verified once.
 */
#ifndef TRESTLE_FILTER_H
#define TRESTLE_FILTER_H

#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include "maps.h"
#include "fdb.h"
#include "parse.h"
#include "ctx.h"
#include "stages.h"

/* Rule sets, by the index of the bridge copy (bridges map) that names them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * (TR_MAX_BRIDGES + 1));
	__type(key, __u32);
	__type(value, struct tr_filter_set);
} filter_sets SEC(".maps");

/* Masked key -> the best rule of one mask with those values. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TR_FILTER_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tr_filter_key);
	__type(value, struct tr_filter_hit);
} filter_rules SEC(".maps");

/* Rule counters, by the index the control plane gives each rule. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TR_FILTER_COUNTERS);
	__type(key, __u32);
	__type(value, struct tr_filter_count);
} filter_counts SEC(".maps");

/* Established connections of every bridge (TR_STATE_ESTABLISHED), each
 * bridge's and each port's counted in filter_state_counts and bounded by
 * its rule set's max_states and max_port_states. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TR_FILTER_STATES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tr_state_key);
	__type(value, struct tr_state);
} filter_states SEC(".maps");

/* Connections not (yet) established, and those a bridge or port had no
 * room for: an LRU for each bridge that keeps state, by bridge id (the
 * control plane makes it), so that a new one always finds room, the one its
 * bridge used least recently goes (conntrack's early drop of unassured
 * entries), and a flood of new connections in one bridge evicts none of
 * another's. */
struct tr_halfopen {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TR_FILTER_OPENING);
	__type(key, struct tr_state_key);
	__type(value, struct tr_state);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, TR_MAX_BRIDGES + 1);
	__type(key, __u32);
	__array(values, struct tr_halfopen);
} filter_halfopen SEC(".maps");

/* Established connections by bridge id, then (from TR_STATE_COUNT_PORT) by
 * the slot of the port that opened them: the datapath adds one, atomically,
 * to both when it establishes a connection; the control plane counts them
 * again at each sweep, when it removes some. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_STATE_COUNT_PORT + TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} filter_state_counts SEC(".maps");

/* Frames whose transport header could not be read, by bridge id and
 * enum tr_filter_unread (bridge * TR_UNREAD__MAX + reason), counted each
 * time the filter judges one. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, (TR_MAX_BRIDGES + 1) * TR_UNREAD__MAX);
	__type(key, __u32);
	__type(value, __u64);
} filter_unread SEC(".maps");

/* Each CPU's cache of decisions (an exact-match cache in front of the
 * classifier, as Open vSwitch's datapath has): the last frame key seen at
 * each slot, its rule set's gen when it was decided, and the decision. A
 * frame of a flow seen just before on this CPU costs a hash of its key and
 * a compare instead of a lookup per shape (a hash lookup here is 40-60 ns).
 * A write of the rule set changes its gen, and so ends its decisions. */
struct tr_filter_memo {
	struct tr_filter_key k;
	__u32 gen;
	struct tr_filter_hit hit; /* prio ~0: no rule matched, the default decided */
	__u64 expires; /* TR_MEMO_STATE: the frame's connection is tracked, and known live before this tick (tr_tick) */
};

/* A memo's hit.flags: not a rule's decision, but a frame of a tracked
 * connection, which passes without a lookup of the state table until the
 * memo's expiry (a second after the lookup that refreshed the connection:
 * an active connection is looked up, and so kept alive, once a second on
 * each CPU it passes). */
#define TR_MEMO_STATE 0x8000

/* Each CPU's working space (the entry points leave too little stack) and
 * its cache, in one value: one lookup. A frame's filtering runs start to
 * end on one CPU, in softirq. */
struct tr_filter_cpu {
	struct tr_filter_key k;
	struct tr_filter_key mk;
	struct tr_state_key sk;
	struct tr_state ns;
	struct tr_filter_hit hit;
	__u32 a_src; /* tr_state_key_of's */
	__u8 tcp;    /* tr_filter_key_of's */
	__u8 hb[16];  /* a header's bytes, loaded (tr_filter_exthdrs, tr_filter_l4_far) */
	__u32 xoff;   /* tr_filter_exthdrs': the next header's offset */
	__u32 xnh;    /* and its type */
	__u32 iend;   /* tr_filter_key_of's: where the IP datagram ends (its length field's), from the Ethernet header */
	__u32 bid;    /* x->sk's bridge, the key of its table of unestablished connections (here, not on the stack) */
	__u32 wire;   /* tr_filter's: kept here, not in a register, across its helper calls */
	__u64 tick;   /* tr_state_pass': tr_tick() */
	__u64 now;    /* and the clock of seen_ns */
	struct tr_filter_memo memo[TR_FILTER_CACHE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tr_filter_cpu);
} filter_cpu SEC(".maps");

/* The drop reason tr_filter returned, bounded where the verifier sees it:
 * a returned value is a scalar it cannot bound, and the compiler's copies
 * of it (each zero-extended on its own) lose a bound checked on another
 * copy. One branch, as the choice between two constant reasons it replaces
 * was: a second, in the walk's loop over the ports, took the verifier past
 * its 8192 pending branches. */
static __always_inline __u32 tr_filter_reason(__u32 r)
{
	__u64 v = r;

	asm volatile("if %0 < %1 goto +1\n\t%0 = %2" : "+r"(v) : "i"(TR_DROP__MAX), "i"(TR_DROP_FILTERED));
	return v;
}

#define TR_TCP_FIN 0x01
#define TR_TCP_SYN 0x02
#define TR_TCP_RST 0x04
#define TR_ICMP_ECHO_REPLY 0
#define TR_ICMP_ECHO 8
#define TR_ICMP6_ECHO 128
#define TR_ICMP6_ECHO_REPLY 129

static __always_inline void tr_filter_count(__u32 counter, __u32 wire)
{
	struct tr_filter_count *c = bpf_map_lookup_elem(&filter_counts, &counter);

	if (c) {
		c->packets++;
		c->bytes += wire;
	}
}

#define TR_IPV6_HOPOPTS 0
#define TR_IPV6_ROUTING 43
#define TR_IPV6_FRAGMENT 44
#define TR_IPV6_AH 51
#define TR_IPV6_DSTOPTS 60

static __always_inline int tr_ipv6_exthdr(__u8 nh)
{
	return nh == TR_IPV6_HOPOPTS || nh == TR_IPV6_ROUTING || nh == TR_IPV6_FRAGMENT || nh == TR_IPV6_AH ||
	       nh == TR_IPV6_DSTOPTS;
}

/* The bytes of a protocol's transport header the filter reads (TCP: to its
 * flags, RFC 1858's minimum for a first fragment), 0 for those it does not. */
static __always_inline __u32 tr_l4_need(__u8 proto)
{
	if (proto == IPPROTO_TCP)
		return 16;
	if (proto == IPPROTO_UDP || proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6)
		return 8;
	return 0;
}

/* The transport header at b, for protocol k->proto, into the key: ports
 * (ICMP echo: the id in both, so that a ping is a connection) or ICMP type,
 * and k->l4 = TR_L4_READ; *tcp gets a TCP segment's flags. 0: read, or no transport
 * header the rules read; -1: it does not end before end. b is the frame's
 * bytes (the common case) or a copy of them. */
static __always_inline int tr_filter_l4_at(__u8 *b, void *end, struct tr_filter_key *k, __u8 *tcp)
{
	switch (k->proto) {
	case IPPROTO_TCP:
		if ((void *)(b + 16) > end)
			return -1;
		*tcp = b[13];
		break;
	case IPPROTO_UDP:
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if ((void *)(b + 8) > end)
			return -1;
		break;
	default:
		return 0;
	}
	if (k->proto == IPPROTO_ICMP || k->proto == IPPROTO_ICMPV6) {
		k->icmp_type = b[0];
		if ((k->proto == IPPROTO_ICMP && (b[0] == TR_ICMP_ECHO || b[0] == TR_ICMP_ECHO_REPLY)) ||
		    (k->proto == IPPROTO_ICMPV6 && (b[0] == TR_ICMP6_ECHO || b[0] == TR_ICMP6_ECHO_REPLY))) {
			k->sport = (__u16)b[4] << 8 | b[5];
			k->dport = k->sport;
		}
	} else {
		k->sport = (__u16)b[0] << 8 | b[1];
		k->dport = (__u16)b[2] << 8 | b[3];
	}
	k->l4 = TR_L4_READ;
	return 0;
}

/* The transport header at x->xoff when it lies past the bytes the program
 * sees (a tc frame whose headers tc did not pull into the linear area; an
 * XDP frame in fragments): loaded into x->hb with the context's helper.
 * Everything it needs is in x and ctx, so that its caller keeps few values
 * alive across the helper call (the stack of the deepest chain of calls
 * has no room for their spills). 0: read; else enum tr_filter_unread, plus
 * one. */
static __always_inline int tr_filter_l4_far(void *ctx, const int xdp, struct tr_filter_cpu *x)
{
	const __u32 n = x->k.proto == IPPROTO_TCP ? 16 : 8;
	long r;

	/* Each call with a constant length, which the verifier bounds. */
	if (n == 16)
		r = tr_load_bytes(ctx, xdp, x->xoff, x->hb, 16);
	else
		r = tr_load_bytes(ctx, xdp, x->xoff, x->hb, 8);
	if (r || tr_filter_l4_at(x->hb, x->hb + n, &x->k, &x->tcp))
		return TR_UNREAD_TRUNCATED + 1;
	return 0;
}

/* The IPv6 extension headers from x->xoff, x->xnh the first's type, read
 * with the context's load helper (they are rare: the common frame never
 * comes here). Leaves in x->xoff and x->xnh the transport header's offset
 * and type, or where the walk stopped and the type there (a non-first
 * fragment: what the fragments carry, as nftables' meta l4proto). Returns
 * 0, or why the transport header cannot be read (enum tr_filter_unread,
 * plus one). The walk's state lives in x, never in registers: so that
 * whichever way it ends, the verifier sees the code after it in one state
 * (from map memory, every offset is the same unknown), not once a path;
 * and it is inline, not a call: a call's frame (32 bytes at least) would
 * take the deepest chain of calls over its 512 bytes of stack. */
static __always_inline int tr_filter_exthdrs(void *ctx, const int xdp, struct tr_filter_cpu *x)
{
	for (int i = 0; i < TR_FILTER_EXTHDRS + 1; i++) {
		__u32 was = x->xnh;

		if (!tr_ipv6_exthdr(was))
			return 0;
		if (i == TR_FILTER_EXTHDRS || x->xoff > TR_FILTER_L4_MAX)
			return TR_UNREAD_EXTHDRS + 1;
		if (tr_load_bytes(ctx, xdp, x->xoff, x->hb, 4))
			return TR_UNREAD_TRUNCATED + 1;
		x->xnh = x->hb[0];
		if (was == TR_IPV6_FRAGMENT) {
			if ((x->hb[2] << 8 | x->hb[3]) & 0xfff8)
				return TR_UNREAD_FRAGMENT + 1;
			x->xoff += 8;
		} else if (was == TR_IPV6_AH) {
			x->xoff += ((__u32)x->hb[1] + 2) * 4;
		} else {
			x->xoff += ((__u32)x->hb[1] + 1) * 8;
		}
	}
	return TR_UNREAD_EXTHDRS + 1;
}

/* The frame's key: addresses, EtherType after up to two tags, and for IP
 * its protocol (IPv6: the header after up to TR_FILTER_EXTHDRS extension
 * headers: hop-by-hop, routing, fragment, destination options, AH), its
 * addresses, and ports or ICMP type, with l4 = TR_L4_READ once those were
 * read. Fields the frame does not have stay 0. A frame whose transport
 * header cannot be read (a non-first fragment, too many extension headers,
 * a header cut short by the frame or by the IP datagram's length) is left
 * without ports, never read as port 0; the return says why (enum
 * tr_filter_unread, plus one), and tr_filter sets its l4; 0: read, or not
 * IP; -1: the transport header is at x->xoff, past the bytes seen, for
 * tr_filter_l4_far. */
static __always_inline int tr_filter_key_of(void *ctx, const int xdp, void *data, void *data_end,
					    struct tr_filter_cpu *x)
{
	struct tr_filter_key *k = &x->k;
	struct ethhdr *eth = data;
	__u32 off = sizeof(*eth);
	__u16 proto;

	if ((void *)(eth + 1) > data_end)
		return 0;
	__builtin_memcpy(k->dmac, eth->h_dest, 6);
	__builtin_memcpy(k->smac, eth->h_source, 6);
	proto = eth->h_proto;
#pragma unroll
	for (int i = 0; i < TR_MAX_VLAN_TAGS; i++) {
		struct tr_vlan_hdr *vh = data + off;

		if (!tr_is_vlan(bpf_ntohs(proto)))
			break;
		if ((void *)(vh + 1) > data_end)
			return 0;
		proto = vh->proto;
		off += TR_VLAN_HLEN;
	}
	k->ethertype = bpf_ntohs(proto);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + off;
		__u32 ihl;

		if ((void *)(ip + 1) > data_end)
			return 0;
		k->proto = ip->protocol;
		__builtin_memcpy(k->src, &ip->saddr, 4);
		__builtin_memcpy(k->dst, &ip->daddr, 4);
		ihl = (ip->ihl & 0xf) * 4;
		if (ip->frag_off & bpf_htons(0x1fff))
			return TR_UNREAD_FRAGMENT + 1;
		if (ihl < sizeof(*ip))
			return TR_UNREAD_TRUNCATED + 1;
		/* A length of 0 is a GSO packet's past 64 KiB (BIG TCP): no bound. */
		x->iend = ip->tot_len ? off + bpf_ntohs(ip->tot_len) : ~0u;
		off += ihl;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + off;
		int r;

		if ((void *)(ip6 + 1) > data_end)
			return 0;
		k->proto = ip6->nexthdr;
		__builtin_memcpy(k->src, &ip6->saddr, 16);
		__builtin_memcpy(k->dst, &ip6->daddr, 16);
		x->iend = ip6->payload_len ? off + sizeof(*ip6) + bpf_ntohs(ip6->payload_len) : ~0u;
		off += sizeof(*ip6);
		if (tr_ipv6_exthdr(k->proto)) {
			x->xoff = off;
			x->xnh = k->proto;
			r = tr_filter_exthdrs(ctx, xdp, x);
			k->proto = x->xnh;
			if (r)
				return r;
			off = x->xoff;
		}
	} else {
		return 0;
	}
	/* Within the datagram, not the frame's padding: a first fragment too
	 * short for the header (RFC 1858's tiny fragment) is not read from
	 * bytes that are not its own. */
	if (off + tr_l4_need(k->proto) > x->iend)
		return TR_UNREAD_TRUNCATED + 1;
	asm volatile("" : "+r"(off)); /* the bound checked here, on the register the access uses */
	if (off > TR_FILTER_L4_MAX)
		return TR_UNREAD_EXTHDRS + 1;
	if (!tr_filter_l4_at(data + off, data_end, k, &x->tcp))
		return 0;
	x->xoff = off;
	return -1; /* the transport header is at x->xoff, past the bytes seen: tr_filter_l4_far loads it */
}

#define TR_FILTER_KEY_WORDS (sizeof(struct tr_filter_key) / 8)
_Static_assert(sizeof(struct tr_filter_key) == 64, "filter keys are 8 words");
_Static_assert(sizeof(struct tr_filter_tuple) % 8 == 0, "masks 8-byte aligned");

/* The first rule of the set that matches k, in *hit; 0: none does. */
static __always_inline int tr_classify(const struct tr_filter_set *fs, const struct tr_filter_key *k,
				       struct tr_filter_key *mk, struct tr_filter_hit *hit)
{
	const __u64 *kw = (const void *)k;
	__u64 *mw = (void *)mk;
	__u32 best = ~0u;

	for (__u32 i = 0; i < TR_FILTER_TUPLES; i++) {
		const struct tr_filter_tuple *t;
		const __u64 *tw;
		struct tr_filter_hit *h;

		if (i >= fs->ntuples)
			break;
		t = &fs->tuples[i];
		if (t->min_prio >= best)
			break; /* no rule of this mask or a later one comes first */
		if (t->unreadable && k->l4 != TR_L4_UNREADABLE)
			continue; /* a lookup that cannot hit: not one a readable frame pays */
		tw = (const void *)&t->mask;
#pragma unroll
		for (__u32 j = 0; j < TR_FILTER_KEY_WORDS; j++)
			mw[j] = kw[j] & tw[j];
		mk->set |= i << 8;
		h = bpf_map_lookup_elem(&filter_rules, mk);
		if (h && h->prio < best) {
			best = h->prio;
			*hit = *h;
		}
	}
	return best != ~0u;
}

/* The cache slot of a key: its words folded, each rotated in, so that the
 * two directions of a flow (addresses and ports swapped) differ. */
static __always_inline __u32 tr_filter_slot(const struct tr_filter_key *k)
{
	const __u64 *kw = (const void *)k;
	__u64 h = 0;

#pragma unroll
	for (__u32 j = 0; j < TR_FILTER_KEY_WORDS; j++)
		h = ((h << 9) | (h >> 55)) ^ kw[j];
	h ^= h >> 32;
	return ((__u32)h * 0x9e3779b1u) >> 24; /* TR_FILTER_CACHE = 256 */
}

static __always_inline int tr_same_key(const struct tr_filter_key *a, const struct tr_filter_key *b)
{
	const __u64 *x = (const void *)a, *y = (const void *)b;
	__u64 d = 0;

#pragma unroll
	for (__u32 j = 0; j < TR_FILTER_KEY_WORDS; j++)
		d |= x[j] ^ y[j];
	return d == 0;
}

/* The cache slot of x->k. The barrier keeps the compiler from holding the
 * key's words in registers (and spilling them) from the hash to the
 * compare: the stack of the walk's deepest calls has no room for them. */
static __always_inline struct tr_filter_memo *tr_memo_of(struct tr_filter_cpu *x)
{
	__u32 slot = tr_filter_slot(&x->k) & (TR_FILTER_CACHE - 1);

	asm volatile("" ::: "memory");
	return &x->memo[slot];
}

/* tr_classify of x->k through this CPU's cache of decisions (m, x->k's
 * slot), into x->hit. */
static __always_inline int tr_decide(const struct tr_filter_set *fs, struct tr_filter_cpu *x,
				     struct tr_filter_memo *m)
{
	int found;

	if (m->gen == fs->gen && !(m->hit.flags & TR_MEMO_STATE) && tr_same_key(&m->k, &x->k)) {
		x->hit = m->hit;
		return x->hit.prio != ~0u;
	}
	found = tr_classify(fs, &x->k, &x->mk, &x->hit);
	m->k = x->k;
	m->gen = fs->gen;
	m->hit = x->hit;
	if (!found)
		m->hit.prio = ~0u;
	return found;
}

/* A frame of a tracked connection that this CPU passed less than a second
 * ago (and that does not end the connection): it passes again. */
static __always_inline int tr_state_memo_hit(const struct tr_filter_set *fs, struct tr_filter_cpu *x,
					     struct tr_filter_memo *m, __u64 tick)
{
	return m->gen == fs->gen && (m->hit.flags & TR_MEMO_STATE) && tick < m->expires &&
	       !(x->tcp & (TR_TCP_FIN | TR_TCP_RST)) && tr_same_key(&m->k, &x->k);
}

static __always_inline void tr_state_memo_set(const struct tr_filter_set *fs, struct tr_filter_cpu *x,
					      struct tr_filter_memo *m, __u64 tick)
{
	m->k = x->k;
	m->gen = fs->gen;
	m->hit.prio = ~0u;
	m->hit.counter = fs->state_counter;
	m->hit.flags = TR_MEMO_STATE;
	m->expires = tick + tr_ticks(TR_STATE_REFRESH_MS * 1000000ULL);
}

/* The connection of a frame with key k in bridge, both directions one key;
 * *a_src: the frame comes from endpoint a. 0: not a connection (not TCP,
 * UDP or ICMP over IP, or its transport header unread). */
static __always_inline int tr_state_key_of(const struct tr_filter_key *k, __u16 bridge,
					   struct tr_state_key *sk, __u32 *a_src)
{
	const __u32 *s = (const void *)k->src, *d = (const void *)k->dst;
	int lower = 0; /* src sorts below dst */

	if (k->l4 != TR_L4_READ)
		return 0; /* no ports read: not a connection's frame we can tell */
	switch (k->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		break;
	default:
		return 0;
	}
	if (k->ethertype == ETH_P_IP)
		sk->family = 4;
	else if (k->ethertype == ETH_P_IPV6)
		sk->family = 6;
	else
		return 0;
	sk->bridge = bridge;
	sk->vlan = k->vlan;
	sk->proto = k->proto;
	/* Any fixed order will do: word by word, then ports. */
	if (s[0] != d[0])
		lower = s[0] < d[0];
	else if (s[1] != d[1])
		lower = s[1] < d[1];
	else if (s[2] != d[2])
		lower = s[2] < d[2];
	else if (s[3] != d[3])
		lower = s[3] < d[3];
	else
		lower = k->sport <= k->dport;
	if (lower) {
		__builtin_memcpy(sk->a, k->src, 16);
		__builtin_memcpy(sk->b, k->dst, 16);
		sk->aport = k->sport;
		sk->bport = k->dport;
	} else {
		__builtin_memcpy(sk->a, k->dst, 16);
		__builtin_memcpy(sk->b, k->src, 16);
		sk->aport = k->dport;
		sk->bport = k->sport;
	}
	*a_src = lower;
	return 1;
}

/* How long a connection lives after its last frame. */
static __always_inline __u64 tr_state_timeout(__u8 proto, __u32 flags)
{
	__u64 s;

	if (proto == IPPROTO_TCP) {
		if (flags & TR_STATE_CLOSING)
			s = TR_STATE_TCP_CLOSING;
		else if (flags & TR_STATE_ESTABLISHED)
			s = TR_STATE_TCP_ESTABLISHED;
		else
			s = TR_STATE_TCP_OPENING;
	} else if (proto == IPPROTO_UDP) {
		s = TR_STATE_UDP;
	} else {
		s = TR_STATE_ICMP;
	}
	return s * 1000000000ULL;
}

/* A frame (x) of a tracked connection (st): refresh it. 1: the connection
 * is live. A frame back counts as a reply only from another port than the
 * opener's (a tenant cannot answer itself); the connection is established
 * once seen both ways, and for TCP only at the opener's first segment
 * without SYN after the reply (the handshake's ACK), as conntrack's
 * ASSURED: a half-open handshake keeps the opening timeout. */
static __always_inline int tr_state_hit(struct tr_state *st, const struct tr_filter_cpu *x)
{
	__u32 flags = st->flags, want = flags;
	__u8 proto = x->k.proto, tcp = x->tcp;
	int opener = !!(flags & TR_STATE_A_OPENED) == !!x->a_src;

	if (x->now - st->seen_ns > tr_state_timeout(proto, flags))
		return 0; /* expired; the control plane has not removed it yet */
	if (!opener && x->k.in != st->port)
		want |= TR_STATE_REPLIED;
	if ((want & TR_STATE_REPLIED) && (proto != IPPROTO_TCP || (opener && !(tcp & TR_TCP_SYN))))
		want |= TR_STATE_ESTABLISHED;
	if (tcp & (TR_TCP_FIN | TR_TCP_RST))
		want |= TR_STATE_CLOSING;
	if (want != flags)
		st->flags = want; /* one writer may lose another's bit: aging is only sooner or later */
	/* x->now read again here, not held in a register from the expiry
	 * check above: its spill took the deepest chain of calls to 512
	 * bytes of stack. */
	asm volatile("" ::: "memory");
	if (x->now - st->seen_ns > TR_STATE_REFRESH_MS * 1000000ULL)
		st->seen_ns = x->now;
	return 1;
}

/* x->sk's bridge's table of unestablished connections. Its key is in x,
 * not on the stack, and reached through an opaque copy of x at each call
 * site, so that the compiler does not keep one key address alive (spilled)
 * across the calls between them: the stack of the deepest chain of calls
 * has no room for it. */
static __always_inline void *tr_halfopen_of(struct tr_filter_cpu *x)
{
	struct tr_filter_cpu *y = x;

	asm volatile("" : "+r"(y));
	y->bid = y->sk.bridge;
	return bpf_map_lookup_elem(&filter_halfopen, &y->bid);
}

/* An opening connection now established: into filter_states, if its
 * bridge and the port that opened it have room (else it stays where it
 * is, live, and is tried again at its next lookup). */
static __always_inline void tr_state_promote(const struct tr_filter_set *fs, struct tr_filter_cpu *x,
					     const struct tr_state *st)
{
	void *ho;

	__u32 bi, pi;
	__u32 *bc, *pc;

	x->ns = *st;
	bi = x->sk.bridge;
	pi = TR_STATE_COUNT_PORT + x->ns.port;
	bc = bpf_map_lookup_elem(&filter_state_counts, &bi);
	if (!bc || *bc >= fs->max_states)
		return;
	pi = TR_STATE_COUNT_PORT + x->ns.port;
	pc = bpf_map_lookup_elem(&filter_state_counts, &pi);
	if (!pc || *pc >= fs->max_port_states)
		return;
	if (bpf_map_update_elem(&filter_states, &x->sk, &x->ns, BPF_NOEXIST))
		return; /* another CPU did, or the table is full */
	__sync_fetch_and_add(bc, 1);
	__sync_fetch_and_add(pc, 1);
	/* Looked up again, not kept across the calls above: the stack of the
	 * deepest chain of calls has no room for its spill. */
	ho = tr_halfopen_of(x);
	if (ho)
		bpf_map_delete_elem(ho, &x->sk);
}

/* Whether the frame (x, its connection x->sk; this CPU's memo of it, m,
 * missed at tick x->tick) passes as part of a tracked connection: found
 * among the established connections, then its bridge's others (promoted
 * once established). */
static __always_inline int tr_state_pass(const struct tr_filter_set *fs, struct tr_filter_cpu *x,
					 struct tr_filter_memo *m)
{
	struct tr_state *st;
	void *ho;

	x->now = jiffies_hz ? bpf_ktime_get_coarse_ns() : x->tick;
	st = bpf_map_lookup_elem(&filter_states, &x->sk);
	if (!st || !tr_state_hit(st, x)) {
		ho = tr_halfopen_of(x);
		if (!ho)
			return 0;
		st = bpf_map_lookup_elem(ho, &x->sk);
		if (!st || !tr_state_hit(st, x))
			return 0;
		if (st->flags & TR_STATE_ESTABLISHED)
			tr_state_promote(fs, x, st);
	}
	tr_state_memo_set(fs, x, m, x->tick);
	return 1;
}

/*
 * The filter stage for one frame (or, with an egress port, one copy of it):
 * 0 when it passes, else the drop reason (filtered, state_full or
 * unreadable: tr_filter_reason bounds it for its callers). set: the rule
 * set; ports: ingress slot, and egress slot in the high half (0: the frame,
 * not a copy); vlan: its VLAN; wire: its length on the wire, for the
 * counters.
 */
static __always_inline int tr_filter(void *ctx, const int xdp, __u32 set, __u32 ports, __u32 vlan,
				     __u32 wire)
{
	const struct tr_filter_set *fs;
	struct tr_filter_cpu *x;
	struct tr_filter_memo *m;
	struct tr_filter_key *k;
	int stateful = 0, unread;
	__u32 zero = 0;

	if (!ctx)
		return TR_DROP_FILTERED;
	if (!set)
		return 0; /* the bridge's filter is off */
	fs = bpf_map_lookup_elem(&filter_sets, &set);
	x = bpf_map_lookup_elem(&filter_cpu, &zero);
	if (!fs || !x)
		return TR_DROP_FILTERED; /* the control plane names a set it has not written: fail closed */
	k = &x->k;
	__builtin_memset(k, 0, sizeof(*k));
	k->set = set;
	k->in = ports & 0xffff;
	k->out = ports >> 16;
	k->vlan = vlan;
	x->tcp = 0;
	x->wire = wire;
	unread = tr_filter_key_of(ctx, xdp, tr_ctx_data(ctx, xdp), tr_ctx_data_end(ctx, xdp), x);
	if (unread < 0)
		unread = tr_filter_l4_far(ctx, xdp, x);
	if (unread > 0) {
		__u32 i = (k->set >> 1) * TR_UNREAD__MAX + (unread - 1);
		__u64 *n = bpf_map_lookup_elem(&filter_unread, &i);

		if (n)
			(*n)++;
		/* A fragment has no transport header; the others should. */
		if (unread != TR_UNREAD_FRAGMENT + 1)
			k->l4 = TR_L4_UNREADABLE;
	}
	m = tr_memo_of(x);
	/* Only a frame whose transport header was read (TCP, UDP, ICMP over
	 * IP) can be a connection's. A frame this CPU passed as one in the
	 * last second passes before its connection's key is even made. */
	if ((fs->flags & TR_FILTER_KEEP_STATE) && k->l4 == TR_L4_READ) {
		x->tick = tr_tick();
		if (tr_state_memo_hit(fs, x, m, x->tick)) {
			tr_filter_count(fs->state_counter, x->wire);
			return 0;
		}
		__builtin_memset(&x->sk, 0, sizeof(x->sk));
		x->a_src = 0;
		stateful = tr_state_key_of(k, k->set >> 1, &x->sk, &x->a_src);
		if (stateful && tr_state_pass(fs, x, m)) {
			tr_filter_count(fs->state_counter, x->wire);
			return 0;
		}
	}
	if (!tr_decide(fs, x, m)) {
		tr_filter_count(fs->def_counter, x->wire);
		return (fs->flags & TR_FILTER_BLOCK) ? TR_DROP_FILTERED : 0;
	}
	tr_filter_count(x->hit.counter, x->wire);
	if (x->hit.flags & TR_FILTER_BLOCK)
		return (x->hit.flags & TR_FILTER_UNREAD) ? TR_DROP_UNREADABLE : TR_DROP_FILTERED;
	if ((x->hit.flags & TR_FILTER_KEEP_STATE) && stateful) {
		struct tr_state *ns = &x->ns;
		void *ho;

		__builtin_memset(ns, 0, sizeof(*ns));
		ns->created_ns = bpf_ktime_get_ns();
		ns->seen_ns = bpf_ktime_get_coarse_ns();
		ns->flags = x->a_src ? TR_STATE_A_OPENED : 0;
		if (x->tcp & (TR_TCP_FIN | TR_TCP_RST))
			ns->flags |= TR_STATE_CLOSING;
		ns->rule = x->hit.prio;
		ns->port = k->in;
		/* A new connection starts unestablished, in its bridge's LRU:
		 * over an expired entry, or one another CPU made just now. A
		 * bridge with no LRU (the control plane makes it before it
		 * writes a set that keeps state) cannot track it: blocked. */
		ho = tr_halfopen_of(x);
		if (!ho || bpf_map_update_elem(ho, &x->sk, ns, BPF_ANY))
			return TR_DROP_STATE_FULL;
	}
	return 0;
}

/* The entry points' calls: global functions, verified once (tr_filter_xdp,
 * tr_filter_tc). */
TR_TWIN(tr_filter, (__u32 set, __u32 ports, __u32 vlan, __u32 wire), (set, ports, vlan, wire))

#endif
