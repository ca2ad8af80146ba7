/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Ports and bridges as the datapath finds them: an interface's port, a
 * bridge's live copy, and the flags that keep a flood off a port.
 */
#ifndef TRESTLE_PORT_H
#define TRESTLE_PORT_H

#include "maps.h"
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

/* The live copy of a bridge (lib/maps.h), or NULL. */
static __always_inline const struct tr_bridge *tr_bridge_of(__u32 bridge)
{
	__u32 *live = bpf_map_lookup_elem(&bridge_live, &bridge);

	if (!live || !*live)
		return NULL;
	return bpf_map_lookup_elem(&bridges, live);
}

#endif
