/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Storm control: a port's ingress accepts at most so many broadcast,
 * multicast and unknown-unicast frames a second, each kind its own rate;
 * the excess is dropped and counted with its kind's reason.
 *
 * Only floods meet the limiter: the pipeline asks it at the flood step of a
 * port flagged TR_PORT_STORM, after the known-unicast lookup has missed, so
 * a frame to a known station never touches it. One limiter serves every CPU
 * (a per-CPU bucket would let N CPUs pass N times the rate): its state is one
 * time, moved under a spin lock held for a compare and an add.
 */
#ifndef TRESTLE_STORM_H
#define TRESTLE_STORM_H

#include "maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_PORTS * TR_STORM_KINDS);
	__type(key, __u32);
	__type(value, struct tr_storm);
} storm SEC(".maps");

/* The kind of flood a frame to dst is. */
static __always_inline __u32 tr_storm_kind(const __u8 *dst)
{
	if (!(dst[0] & 1))
		return TR_STORM_UNKNOWN;
	if ((dst[0] & dst[1] & dst[2] & dst[3] & dst[4] & dst[5]) == 0xff)
		return TR_STORM_BROADCAST;
	return TR_STORM_MULTICAST;
}

/* Whether a flood of kind from port slot is within its rate: 1 passes (and
 * is counted against the rate), 0 is over it. */
static __always_inline int tr_storm_pass(__u32 slot, __u32 kind)
{
	__u32 key = slot * TR_STORM_KINDS + kind;
	struct tr_storm *s = bpf_map_lookup_elem(&storm, &key);
	__u64 now, tat;
	int pass;

	if (!s || !s->interval_ns)
		return 1;
	now = bpf_ktime_get_ns();
	bpf_spin_lock(&s->lock);
	tat = s->tat > now ? s->tat : now;
	pass = tat - now <= s->burst_ns;
	if (pass)
		s->tat = tat + s->interval_ns;
	bpf_spin_unlock(&s->lock);
	return pass;
}

#endif
