/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The decision memo: each CPU remembers the whole decision it made for the
 * last frame it forwarded to one port of a plain bridge (no VLANs, patches,
 * mirrors or filter), and the next frame with the same ingress, addresses
 * and VLAN is counted and sent on from it, skipping the ports, the bridge
 * and the table. It holds as long as what it was made from:
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
 */
#ifndef TRESTLE_MEMO_H
#define TRESTLE_MEMO_H

#include "maps.h"
#include "parse.h"
#include "fdb.h"

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

/* Does the memo hold the decision for this frame, parsed as f (its
 * ingress and addresses already compared)? */
static __always_inline int tr_fast_hit(const struct tr_fast *fs, const struct tr_frame *f)
{
	const struct tr_fwd_memo *m = &fs->memo->fwd;

	return m->cgen == fs->cgen && m->gen == *(volatile __u32 *)&fdb_gen &&
	       m->mgen == *(volatile __u32 *)&move_gen && m->vlan == f->vlan &&
	       tr_tick() < m->expires;
}
#endif
