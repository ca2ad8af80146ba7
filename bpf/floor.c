/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The floor: the lab's DUT `floor`, a bare XDP program that sends every
 * frame arriving on a port out of one other port, through a devmap. No
 * parsing, no table, no counter: it is the least an XDP bridge must do with
 * a frame on the lab's topology (one veth hop into the bridge, one redirect
 * out), so no XDP bridge can be faster there, and a bridge's ratio to it is
 * what the bridge's own work costs.
 *
 * Each port gets its own copy of the program and of the map (the lab loads
 * it once per port), whose one entry is the port its frames leave by: the
 * redirect is an array access at a constant index, the cheapest a devmap
 * offers. A devmap rather than bpf_redirect() because that is how an XDP
 * bridge sends (trestle's unicast egress is a devmap too), and it batches
 * the transmit.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32); /* the egress ifindex */
} egress SEC(".maps");

SEC("xdp")
int trestle_floor(struct xdp_md *ctx)
{
	/* The entry is written before the program is attached, so the
	 * lookup cannot miss; if it did, XDP_ABORTED shows in the
	 * xdp:xdp_exception tracepoint instead of vanishing. */
	return bpf_redirect_map(&egress, 0, XDP_ABORTED);
}
