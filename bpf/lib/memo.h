/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The decision memo: each CPU remembers the whole decision it made for the
 * last frame it forwarded to one port of a plain bridge (no patches,
 * mirrors or filter; VLAN-aware or not), and the next frame with the same
 * ingress, addresses and outer tag is counted, tagged and sent on from it,
 * skipping the ports, the bridge, the VLAN's classification and the table.
 * It holds as long as what it was made from:
 *
 *   - the configuration: cfg_gen is a seqlock's count, odd while the
 *     control plane writes the ports, the bridges, the patches, the mirrors
 *     or the stage, and moved on to a new even count after; no memo is made
 *     at an odd count, so none is made from a half-written configuration
 *     and each is void from a write's start. The count also moves on after
 *     every interface is moved to another program (which may have been
 *     another build's, with generations of its own);
 *   - the table: fdb_gen and move_gen, as the learning memos (lib/fdb.h);
 *   - learning: it is made only while the source memo vouches for the
 *     source, and expires with it, so the entry's timestamp stays fresh.
 *
 * A frame is parsed all the same: a runt with a known pair of addresses is
 * still a runt.
 *
 * In a bridge with neigh_suppress the memo is marked (TR_MEMO_NEIGH), and
 * a frame that may be an ARP, ND or DHCP server message, which the
 * pipeline copies to the daemon for the neighbour table, is decided by the
 * pipeline: a reply in a stream's midst is seen, the stream is not slowed.
 *
 * In a VLAN-aware bridge (the VLAN stage in the build) the memo holds the
 * classification too: the frame's VLAN follows from its ingress port and
 * its outer tag (the kind and the VID), both in the memo's key, and the
 * ports' VLANs and the bridge's are configuration, under cfg_gen. So it
 * also keeps what the tag becomes (kept, pushed or taken off, as tr_forward
 * did to the frame it was made from) and the VLAN's counters. A frame with
 * a priority tag (VID 0) is not remembered: the tag it would get keeps its
 * priority, which the key does not hold.
 */
#ifndef TRESTLE_MEMO_H
#define TRESTLE_MEMO_H

#include "maps.h"
#include "parse.h"
#include "fdb.h"
#include "ctx.h"
#include "vlan.h"
#include "door.h"
#include "neigh.h"

/* The configuration's generation, a seqlock's count: odd while the
 * control plane writes (internal/datapath, configChanging), even and new
 * after (configChanged). */
__u32 cfg_gen = 0;

struct tr_fast {
	struct tr_cpu_cache *memo;
	__u32 cgen; /* read before anything else the frame reads */
};

/* Reads this CPU's memo and the configuration's generation, first thing. */
static __always_inline void tr_fast_init(struct tr_fast *fs)
{
	__u32 zero = 0;

	fs->cgen = *(volatile __u32 *)&cfg_gen;
	fs->memo = bpf_map_lookup_elem(&cpu_cache, &zero);
}

/* Does the frame come with an outer 802.1Q tag (in its bytes, or in its
 * metadata at tc), as tr_vlan_ingress reads it? 3 for an outer 802.1ad tag,
 * which no memo's ctag matches: an S-tagged frame is decided by the
 * pipeline, which drops one with a second tag on an access port
 * (double_tagged), where a memo of an untagged frame would hold it (an
 * S-tag of VID 0 has the untagged frame's key). */
static __always_inline int tr_frame_ctag(const struct tr_pkt *p, const struct ethhdr *eth)
{
	__be16 proto = p->meta_proto ? p->meta_proto : eth->h_proto;

	if (proto == bpf_htons(ETH_P_8021AD))
		return 3;
	return proto == bpf_htons(ETH_P_8021Q);
}

/* struct tr_fwd_memo's tag: the bridge is VLAN-aware, and the frame leaves
 * with an 802.1Q tag (TR_MEMO_OUT_CTAG) or without. 0: not VLAN-aware. */
#define TR_MEMO_VLAN 1
#define TR_MEMO_OUT_CTAG 2
/* struct tr_fwd_memo's ctag, beside 0 and 1: the frame came with a priority
 * tag (VID 0), which no frame matches. */
#define TR_MEMO_PRIO 2

/* struct tr_fwd_memo's vlan, above the VID's 12 bits: made in a bridge
 * with neigh_suppress, of a port whose ARP, ND and DHCP server messages
 * are copied to the daemon (trestle.c, tr_neigh_learn). */
#define TR_MEMO_NEIGH 0x8000

/* A memo with TR_MEMO_NEIGH holds a frame of its VID that can be none of
 * the messages the pipeline copies (lib/neigh.h, tr_neigh_may_copy): an
 * ARP reply, an advertisement or a DHCPACK in a stream's midst is
 * decided, and copied, by the pipeline, every other frame sent from the
 * memo. Asked only when the VID alone does not match the memo's, so that
 * a memo of another bridge pays nothing for it. */
static __always_inline int tr_fast_neigh_hit(const struct tr_fwd_memo *m, const struct tr_pkt *p,
					     const struct tr_frame *f)
{
	return m->vlan == (f->vlan | TR_MEMO_NEIGH) && !tr_neigh_may_copy(p->data + f->l3_off, p->data_end, f->proto);
}

/* Does the memo hold the decision for frame p, parsed as f (its ingress
 * and addresses already compared)? In a VLAN-aware bridge its outer tag
 * must be of the same kind too (the VID is f's vlan). */
static __always_inline int tr_fast_hit(const struct tr_fast *fs, const struct tr_pkt *p,
				       const struct tr_frame *f)
{
	const struct tr_fwd_memo *m = &fs->memo->fwd;

	return m->cgen == fs->cgen && m->gen == *(volatile __u32 *)&fdb_gen &&
	       m->mgen == *(volatile __u32 *)&move_gen && (m->vlan == f->vlan || tr_fast_neigh_hit(m, p, f)) &&
	       tr_tick() < m->expires &&
	       (!vlan_aware || !(m->tag & TR_MEMO_VLAN) || m->ctag == tr_frame_ctag(p, f->eth));
}

/*
 * The memo's work on a frame of a VLAN-aware bridge, after its port
 * counted it, as the pipeline's: the frame counted in its VLAN (wire: its
 * length as it came). *vs: the VLAN's counters, for the frame's tx at the
 * door (NULL in a bridge that is not VLAN-aware). Returns what the door
 * does to its tag as the door did to the frame the memo was made from:
 * TR_RETAG_PUSH, TR_RETAG_POP, or 0 (kept, lib/door.h).
 */
static __always_inline __u8 tr_fast_tag(const struct tr_fwd_memo *m, __u32 wire,
					struct tr_vlan_stats **vs)
{
	__u8 out;

	*vs = NULL;
	if (!vlan_aware || !(m->tag & TR_MEMO_VLAN))
		return 0;
	*vs = tr_vlan_stats_of(m->vstats);
	if (*vs) {
		(*vs)->c[TR_VCNT_RX_PACKETS]++;
		(*vs)->c[TR_VCNT_RX_BYTES] += wire;
	}
	out = m->tag >> 1;
	if (out == m->ctag) /* a hit's ctag is 0 or 1 */
		return 0;
	return out ? TR_RETAG_PUSH : TR_RETAG_POP;
}

/*
 * The memo's tag half, for a frame forwarded with tag t (as tr_forward left
 * it: tr_tag_to changed its ctag and tci as it tagged the frame); vlan: the
 * frame's FDB VLAN. Returns the VLAN of the memo's key. Written without a
 * branch on t: a branch on a constant of the frame's path makes the
 * verifier tell the paths apart from there on, and the tc build with the
 * VLAN stage went over its million instructions.
 */
static __always_inline __u16 tr_fast_tag_remember(struct tr_fwd_memo *m, const struct tr_tag *t,
						  __u16 vlan)
{
	if (!vlan_aware)
		return vlan;
	m->tag = t->on | t->ctag << 1;
	/* TR_MEMO_PRIO when in_ctag and in_vlan is 0 (in_vlan - 1 wraps) */
	m->ctag = t->in_ctag | (t->in_ctag & (((__u32)t->in_vlan - 1) >> 31)) << 1;
	m->tci = t->tci;
	m->vstats = t->idx;
	return t->in_vlan;
}
#endif
