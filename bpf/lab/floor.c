/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The floors: the lab's DUT `floor` and its variants, bare XDP programs
 * that do the least an XDP bridge must do with a frame on the lab's
 * topology, so that no XDP bridge can be faster there and a bridge's ratio
 * to its floor is what the bridge's own work costs.
 *
 * - trestle_floor (`floor`): every frame arriving on a port out of one other
 *   port, through a devmap. No parsing, no table, no counter.
 * - trestle_floor_mirror (`floor@mirror`): every frame out of the two other
 *   ports of a mirror's bridge at once (the way out and the span port), one
 *   devmap broadcast with BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS: the least
 *   an XDP mirror must do, since each frame becomes two.
 * - trestle_floor_push and trestle_floor_pop (`floor@vlan`): from the access
 *   port, push the access VLAN's 802.1Q tag and redirect; from the trunk,
 *   drop what is not tagged with that VLAN, take the tag off the rest and
 *   redirect: the least a bridge with VLANs must do between an access port
 *   and a trunk (the lab's check that VLAN 20 stays apart holds for it).
 * - trestle_floor_tc (`floor:tc`) and its variants trestle_floor_tc_mirror,
 *   trestle_floor_tc_push and trestle_floor_tc_pop (`floor:tc@mirror`,
 *   `floor:tc@vlan`): the same at tc ingress, the least a bridge attached
 *   at tc must do, each as trestle's tc mode does it: bpf_redirect() to the
 *   egress ifindex; for the mirror one bpf_clone_redirect() to the span port
 *   first (tc has no broadcast: every copy is a clone); for VLANs
 *   bpf_skb_vlan_push() and bpf_skb_vlan_pop(), which set and clear the
 *   skb's tag beside the frame (a tagged frame arrives untagged into
 *   skb->vlan_tci before tc ingress, so the pop reads no bytes).
 *
 * Each port gets its own copy of the program and of the maps (the lab loads
 * the object once per port), so the redirect is an array access at a
 * constant index, the cheapest a devmap offers. A devmap rather than
 * bpf_redirect() because that is how an XDP bridge sends (trestle's unicast
 * egress and its floods are devmaps too), and it batches the transmit.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define FLOOR_VLAN_HLEN 4

/* The access VLAN's tag control (VID and priority), set before load. */
const volatile __u16 push_tci = 0;

/* tc: the egress ifindex and the mirror's span port's, set before load
 * (constants of this port's copy, as the devmaps are for XDP). */
const volatile __u32 tc_out = 0;
const volatile __u32 tc_span = 0;

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32); /* the egress ifindex */
} egress SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32); /* the two egress ifindexes of a mirror's bridge */
} copies SEC(".maps");

SEC("xdp")
int trestle_floor(struct xdp_md *ctx)
{
	/* The entry is written before the program is attached, so the
	 * lookup cannot miss; if it did, XDP_ABORTED shows in the
	 * xdp:xdp_exception tracepoint instead of vanishing. */
	return bpf_redirect_map(&egress, 0, XDP_ABORTED);
}

SEC("xdp")
int trestle_floor_mirror(struct xdp_md *ctx)
{
	return bpf_redirect_map(&copies, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
}

SEC("xdp")
int trestle_floor_push(struct xdp_md *ctx)
{
	void *data, *data_end;
	__u32 *w;

	if (bpf_xdp_adjust_head(ctx, -FLOOR_VLAN_HLEN))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + ETH_HLEN + FLOOR_VLAN_HLEN > data_end)
		return XDP_ABORTED;
	/* The addresses move 4 bytes to the front, word by word, front first. */
	w = data;
	w[0] = w[1];
	w[1] = w[2];
	w[2] = w[3];
	((__be16 *)data)[6] = bpf_htons(ETH_P_8021Q);
	((__be16 *)data)[7] = bpf_htons(push_tci);
	return bpf_redirect_map(&egress, 0, XDP_ABORTED);
}

SEC("xdp")
int trestle_floor_pop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 *w = data;

	if (data + ETH_HLEN + FLOOR_VLAN_HLEN > data_end ||
	    ((__be16 *)data)[6] != bpf_htons(ETH_P_8021Q) ||
	    (((__be16 *)data)[7] & bpf_htons(0x0fff)) != bpf_htons(push_tci & 0x0fff))
		return XDP_DROP;
	/* The addresses move 4 bytes back over the tag, back first. */
	w[3] = w[2];
	w[2] = w[1];
	w[1] = w[0];
	if (bpf_xdp_adjust_head(ctx, FLOOR_VLAN_HLEN))
		return XDP_ABORTED;
	return bpf_redirect_map(&egress, 0, XDP_ABORTED);
}

SEC("tc")
int trestle_floor_tc(struct __sk_buff *skb)
{
	return bpf_redirect(tc_out, 0);
}

SEC("tc")
int trestle_floor_tc_mirror(struct __sk_buff *skb)
{
	if (bpf_clone_redirect(skb, tc_span, 0))
		return TC_ACT_SHOT;
	return bpf_redirect(tc_out, 0);
}

SEC("tc")
int trestle_floor_tc_push(struct __sk_buff *skb)
{
	if (bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), push_tci))
		return TC_ACT_SHOT;
	return bpf_redirect(tc_out, 0);
}

SEC("tc")
int trestle_floor_tc_pop(struct __sk_buff *skb)
{
	if (!skb->vlan_present || (skb->vlan_tci & 0x0fff) != (push_tci & 0x0fff))
		return TC_ACT_SHOT;
	if (bpf_skb_vlan_pop(skb))
		return TC_ACT_SHOT;
	return bpf_redirect(tc_out, 0);
}
