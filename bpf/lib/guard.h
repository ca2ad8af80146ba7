/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The edge's guards against loops (docs/switching.md, "Loops at the
 * edge"). The datapath sees what happens and tells the daemon, which
 * blocks the port (TR_PORT_BLOCKED, written with the port's other flags):
 *
 *   - BPDU guard: a BPDU (to 01:80:c2:00:00:00, the STP, RSTP and MSTP
 *     group) on a port with TR_PORT_BPDU_GUARD is dropped (bpdu_guard) and
 *     reported (TR_EVENT_BPDU), as the Linux bridge's `guard` and Cisco's
 *     bpduguard shut such a port. Asked only of reserved destinations,
 *     which are dropped anyway: other frames pay nothing.
 *   - Loop detection: on a bridge with TR_BRIDGE_LOOP_DETECT, a frame of
 *     TR_PROBE_ETHERTYPE (ECTP's, the loopback protocol's) that carries
 *     TR_PROBE_MAGIC is a probe (struct tr_probe): dropped (loop_probe)
 *     and reported (TR_EVENT_LOOP) for the daemon to tell whether it is one
 *     of its own come back. Other frames of the type, and every frame on
 *     other bridges, go on as any frame; a frame of another type pays one
 *     compare.
 *
 * A blocked port takes nothing in (port_blocked, switch.h's step 1) and
 * sends nothing: the daemon takes it out of its bridge's flood sets, and a
 * unicast's rule refuses it (lib/door.h's tr_door_blocked, port_blocked).
 */
#ifndef TRESTLE_GUARD_H
#define TRESTLE_GUARD_H

#include <linux/if_ether.h>
#include "event.h"
#include "parse.h"
#include "ctx.h"

/*
 * Tells the daemon of a BPDU on a guarded port or of a loop probe heard
 * (lib/event.h), in the guards' own ring (edge_ring): a loop's storm of
 * moves fills the event ring, and the probe that breaks the loop is heard
 * in the storm. A global function, so that it is verified once and the
 * pipeline holds only its call, on those rare ways: mac is the frame's
 * source in memory order, type_bridge the event's type << 16 | the bridge
 * that heard it, slots the probe's port << 16 | the port that heard it,
 * probe the probe's sender << 32 | its bridge (0 for a BPDU).
 */
__attribute__((noinline)) int tr_event_edge(__u64 mac, __u32 type_bridge, __u32 slots, __u32 ifindex,
					    __u64 probe)
{
	struct tr_event *e = tr_event_new(&edge_ring, type_bridge >> 16);

	if (!e)
		return 0;
	e->bridge = type_bridge & 0xffff;
	__builtin_memcpy(e->mac, &mac, 6);
	e->from_slot = slots >> 16;
	e->to_slot = slots & 0xffff;
	e->from_ifindex = probe & 0xffff;
	e->to_ifindex = ifindex;
	e->probe = probe >> 32;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* A BPDU's destination: the STP group (a reserved address, which the caller
 * has found dst to be). */
static __always_inline int tr_is_bpdu(const __u8 *dst)
{
	return dst[5] == 0;
}

/* An address's 6 bytes as a number, in memory order (tr_event_edge's mac),
 * made in registers: a copy through a variable took 8 bytes of each entry
 * point's frame, which in the filter builds at tc is the deepest chain's
 * (512 bytes at most, architecture.md's "The door"). */
static __always_inline __u64 tr_mac64(const __u8 *m)
{
	return (__u64)m[0] | (__u64)m[1] << 8 | (__u64)m[2] << 16 | (__u64)m[3] << 24 |
	       (__u64)m[4] << 32 | (__u64)m[5] << 40;
}

/* A BPDU on a guarded port (in, of slot and ifindex): reported. */
static __always_inline void tr_bpdu_heard(const struct tr_port *in, __u32 ifindex, const __u8 *src)
{
	tr_event_edge(tr_mac64(src), (__u32)TR_EVENT_BPDU << 16 | in->bridge, in->slot, ifindex, 0);
}

/* A frame of TR_PROBE_ETHERTYPE on a loop_detect bridge's port in: a probe
 * when its payload is in the frame's bytes and carries the magic, reported
 * then (1); any other frame of the type (0) goes on as any frame. */
static __always_inline int tr_probe_heard(const struct tr_pkt *p, const struct tr_frame *f,
					  const struct tr_port *in)
{
	const struct tr_probe *pr;
	__u32 off = f->l3_off;

	if (off > 63)
		return 0;
	pr = (const void *)f->eth + (off & 63);
	if ((const void *)(pr + 1) > p->data_end || pr->magic != bpf_htonl(TR_PROBE_MAGIC))
		return 0;
	tr_event_edge(tr_mac64(f->eth->h_source), (__u32)TR_EVENT_LOOP << 16 | in->bridge,
		      (__u32)bpf_ntohs(pr->slot) << 16 | in->slot, p->ifindex,
		      (__u64)bpf_ntohl(pr->sender) << 32 | bpf_ntohs(pr->bridge));
	return 1;
}

#endif
