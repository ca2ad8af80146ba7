/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The event ring: what the datapath alone sees happen, told to the control
 * plane (struct tr_event): a move or a new address (lib/fdb.h), a BPDU on a
 * guarded port or a loop probe come back (lib/guard.h, in a ring of its
 * own, edge_ring, that a storm of moves cannot fill). Only rare paths
 * write a record, and the datapath never waits for the daemon: a record the
 * ring has no room for (the daemon behind, or not running) is counted in
 * event_lost.
 */
#ifndef TRESTLE_EVENT_H
#define TRESTLE_EVENT_H

#include "maps.h"

/* A record of type in ring (event_ring, or the guards' edge_ring), its time
 * and type written and the rest zero, or NULL (counted lost). The caller
 * fills it and submits it. */
static __always_inline struct tr_event *tr_event_new(void *ring, __u16 type)
{
	struct tr_event *e = bpf_ringbuf_reserve(ring, sizeof(*e), 0);
	__u32 zero = 0;
	__u64 *lost;

	if (!e) {
		lost = bpf_map_lookup_elem(&event_lost, &zero);
		if (lost)
			(*lost)++;
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = bpf_ktime_get_coarse_ns();
	e->type = type;
	return e;
}

#endif
