/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Overlay ports (docs/overlay.md): a port on a vxlan device, reached at tc
 * by redirect, and from XDP through its xdp way in (trestle_via). What leaves by one must fit the device's MTU once encapsulated: a
 * frame (or a flood's copy) whose L2 payload is longer, or a GSO frame
 * whose segments are, is dropped with TR_DROP_OVERLAY_MTU and counted on
 * the overlay port, never handed to the device to be fragmented in the
 * underlay. The MTU is the device's own, read by bpf_check_mtu as the
 * frame leaves: the control plane writes none.
 */
#ifndef TRESTLE_OVERLAY_H
#define TRESTLE_OVERLAY_H

#include "maps.h"
#include "port.h"

/*
 * Whether the frame of skb, as it is now (tagged as it will leave), may
 * not leave by the port on ifindex (slot): an overlay port, and the frame
 * too long for it (its length past the Ethernet header above the device's
 * MTU; for a GSO frame, a segment's network length). Then it is counted
 * there, and 1: the caller sends nothing. An error of the helper (no such
 * device) is 0: the redirect finds nothing there either. A global
 * function, verified once, whose frame is small: the walk's deepest chain
 * of calls reaches it, and each way out to a port of a bridge with an
 * overlay port asks it (a flag of the port or the bridge tested first).
 */
__attribute__((noinline)) int tr_overlay_too_long(struct __sk_buff *skb, __u32 ifindex, __u32 slot)
{
	const struct tr_port *o;
	__u32 mtu = 0;

	if (!skb)
		return 0;
	o = tr_port_of(ifindex);
	if (!o || !(o->flags & TR_PORT_OVERLAY))
		return 0;
	if (bpf_check_mtu(skb, ifindex, &mtu, 0, BPF_MTU_CHK_SEGS) <= 0)
		return 0;
	tr_count_drop(tr_stats(slot), TR_DROP_OVERLAY_MTU);
	return 1;
}

/*
 * trestle_via: the far end of an overlay port's xdp way in. A vxlan device
 * takes no XDP redirect, so XDP ports send the overlay's frames into a
 * veth pair of the VNI's; at its far end, the socket buffers GRO made
 * arrive here, and go on to the vxlan device, checked against its MTU as
 * tc ports' frames are (counted on the overlay port). The peer's entry in
 * the port maps (TR_PORT_VIA) holds the overlay port's slot and, in
 * max_macs, its device. Anything else arriving here is dropped.
 */
static __always_inline int tr_via(struct __sk_buff *skb)
{
	const struct tr_port *v = tr_port_of(skb->ifindex); /* at ingress: the device it arrived on */
	__u32 dev;

	if (!v || !(v->flags & TR_PORT_VIA))
		return TC_ACT_SHOT;
	dev = v->max_macs;
	if (tr_overlay_too_long(skb, dev, v->slot))
		return TC_ACT_SHOT;
	return bpf_redirect(dev, 0);
}

#endif
