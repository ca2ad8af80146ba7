/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Ports and bridges as the datapath finds them: an interface's port, a
 * bridge's live copy, and the flags that keep a flood off a port.
 */
#ifndef TRESTLE_PORT_H
#define TRESTLE_PORT_H

#include "maps.h"
#include "ctx.h"
#include "patch.h"

/* The port of an interface, or NULL: by index for most ifindexes, by hash
 * for the rest (lib/maps.h). */
static __always_inline const struct tr_port *tr_port_of_dev(__u32 ifindex)
{
	const struct tr_port *p;

	if (ifindex < TR_PORT_DIRECT) {
		p = bpf_map_lookup_elem(&port_index, &ifindex);
		return p && p->bridge ? p : NULL;
	}
	return bpf_map_lookup_elem(&ports, &ifindex);
}

/* The port of an interface or of a patch port (TR_PATCH_IFINDEX | its
 * slot), or NULL. Where a frame arrives, tr_port_of_dev: the verifier
 * keeps the paths of a pointer into each map apart. */
static __always_inline const struct tr_port *tr_port_of(__u32 ifindex)
{
	const struct tr_port *p;

	if (ifindex < TR_PORT_DIRECT) {
		p = bpf_map_lookup_elem(&port_index, &ifindex);
		return p && p->bridge ? p : NULL;
	}
	if (tr_is_patch(ifindex)) {
		struct tr_patch *pp = tr_patch_of(ifindex & ~TR_PATCH_IFINDEX);

		return pp ? &pp->port : NULL;
	}
	return bpf_map_lookup_elem(&ports, &ifindex);
}

/* The port flags that keep a flooded frame to dst, from a port with flags
 * in_flags, off a port (port policies): the flood switch of its kind, and
 * protection when it came from a protected port. */
static __always_inline __u16 tr_flood_deny(__u16 in_flags, const __u8 *dst)
{
	__u16 deny = TR_PORT_NO_FLOOD;

	if (tr_mac_is_multicast(dst))
		deny = (dst[0] & dst[1] & dst[2] & dst[3] & dst[4] & dst[5]) == 0xff ? TR_PORT_NO_BFLOOD
										 : TR_PORT_NO_MFLOOD;
	return deny | (in_flags & TR_PORT_PROTECTED);
}

/*
 * A loop over a bridge's ports (or a reach's), the one construct of every
 * such loop: round(i, a) is its body for port i, returning 1 to end it,
 * over a struct tr_ports_loop whose n is how many rounds. A loop of at most
 * TR_INLINE_PORTS rounds runs inline, a plain loop (a global function's
 * call and bpf_loop's call a round cost a flood of the lab's 4-port bridge
 * some 25 ns, BenchmarkPipeline); a longer one calls name_far, a global
 * function (its own stack frame, verified once) that runs the rounds with
 * bpf_loop (whose callback the verifier reads once, not once for each of
 * up to TR_MAX_BRIDGE_PORTS rounds).
 *
 * TR_PORTS_LOOP(name, round, params, args, init) defines name(params), the
 * loop, with name_far and name_one, its global function and its callback.
 * params and args are parenthesized lists, as TR_TWIN's (lib/ctx.h); init
 * the designated initializers of the loop's struct from them, safe where
 * a pointer among them is NULL (a global function's may be, to the
 * verifier).
 */
#define TR_INLINE_PORTS 8

struct tr_ports_loop {
	void *ctx;
	const struct tr_bridge *br;
	const struct tr_reach *reach;
	__u32 n;       /* rounds */
	__u32 ingress; /* the port the frame came in by: no copy to it */
	__u32 wire;
	__u32 vid;     /* tc floods of VLAN-aware bridges: the frame's VLAN */
	__u32 opts;    /* and the copies' options (egress.h, tr_copy_opts) */
};

#define TR_PORTS_LOOP(name, round, params, args, init)                                   \
	static long name##_one(__u64 i, void *a)                                         \
	{                                                                                \
		return round(i, a);                                                      \
	}                                                                                \
	__attribute__((noinline)) int name##_far(TR_UNPAREN params)                      \
	{                                                                                \
		struct tr_ports_loop a = { TR_UNPAREN init };                            \
                                                                                         \
		bpf_loop(a.n, name##_one, &a, 0);                                        \
		return 0;                                                                \
	}                                                                                \
	static __always_inline void name(TR_UNPAREN params)                              \
	{                                                                                \
		struct tr_ports_loop a = { TR_UNPAREN init };                            \
                                                                                         \
		if (a.n > TR_INLINE_PORTS) {                                             \
			name##_far(TR_UNPAREN args);                                     \
			return;                                                          \
		}                                                                        \
		for (__u32 i = 0; i < TR_INLINE_PORTS; i++)                              \
			if (i >= a.n || round(i, &a))                                    \
				break;                                                   \
	}

/* The port of round i of a loop over a->br's ports, or NULL at the end. */
static __always_inline const struct tr_bridge_port *tr_loop_port(const struct tr_ports_loop *a,
								  __u64 i)
{
	const struct tr_bridge *br = a->br;

	if (!br || i >= TR_MAX_BRIDGE_PORTS || i >= br->nports)
		return NULL;
	return &br->ports[i];
}

/* The live copy of a bridge (lib/maps.h), or NULL. */
static __always_inline const struct tr_bridge *tr_bridge_of(__u32 bridge)
{
	__u32 *live = bpf_map_lookup_elem(&bridge_live, &bridge);

	if (!live || !*live)
		return NULL;
	return bpf_map_lookup_elem(&bridges, live);
}

#endif
