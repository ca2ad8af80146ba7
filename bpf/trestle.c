/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The two attach points of the switch. Both run tr_pipeline() from switch.h;
 * they differ only in how a frame is read and how a decision is carried out.
 *
 * xdp: packet-rate mode. Unicast through the tx_ports devmap (by port slot), flooding through
 *      the bridge's devmap with BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS.
 * tc:  stack-friendly mode (tcx ingress). The skb keeps its GSO and checksum
 *      state; unicast with bpf_redirect(), flooding by cloning to each port.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "switch.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Enums reach BTF, and so bpf2go, only through a typed object; these are never used. */
enum tr_drop_reason _btf_drop_reason __attribute__((unused));
enum tr_limits _btf_limits __attribute__((unused));
enum tr_fdb_flags _btf_fdb_flags __attribute__((unused));


SEC("xdp")
int trestle_xdp(struct xdp_md *ctx)
{
	struct tr_pkt p = {
		.data = (void *)(long)ctx->data,
		.data_end = (void *)(long)ctx->data_end,
		.ifindex = ctx->ingress_ifindex,
		.meta_vlan = -1,
	};
	struct tr_decision d = {};
	void *flood;
	long ret;

	p.len = p.data_end - p.data;
	tr_pipeline(&p, &d);

	switch (d.action) {
	case TR_ACT_FORWARD:
		ret = bpf_redirect_map(&tx_ports, d.egress_slot, 0);
		if (ret != XDP_REDIRECT) {
			tr_drop(&d, d.in_st, TR_DROP_NO_EGRESS);
			return XDP_DROP;
		}
		tr_count_tx(tr_stats(d.egress_slot), p.len);
		return XDP_REDIRECT;
	case TR_ACT_FLOOD:
		flood = bpf_map_lookup_elem(&floods, &d.bridge);
		/* A broadcast to a set holding only the ingress frees the frame
		 * without a word: count it instead. */
		if (!flood || !d.br || d.br->nports < 2) {
			tr_drop(&d, d.in_st, TR_DROP_NO_EGRESS);
			return XDP_DROP;
		}
		ret = bpf_redirect_map(flood, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
		if (ret != XDP_REDIRECT) {
			tr_drop(&d, d.in_st, TR_DROP_NO_EGRESS);
			return XDP_DROP;
		}
		tr_count_flood_tx(d.br, p.ifindex, p.len);
		return XDP_REDIRECT;
	default:
		return XDP_DROP;
	}
}

/* Headers the pipeline may read; tc pulls them into the linear area if needed. */
#define TR_PULL_LEN 64

SEC("tc")
int trestle_tc(struct __sk_buff *skb)
{
	struct tr_pkt p;
	struct tr_decision d = {};
	__u32 last;

	if ((long)skb->data_end - (long)skb->data < TR_PULL_LEN && skb->len > skb->data_end - skb->data)
		bpf_skb_pull_data(skb, skb->len < TR_PULL_LEN ? skb->len : TR_PULL_LEN);
	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	p.len = skb->len;
	p.ifindex = skb->ifindex;
	p.meta_vlan = skb->vlan_present ? (int)(skb->vlan_tci & 0x0fff) : -1;
	tr_pipeline(&p, &d);

	switch (d.action) {
	case TR_ACT_FORWARD:
		tr_count_tx(tr_stats(d.egress_slot), p.len);
		return bpf_redirect(d.egress_ifindex, 0);
	case TR_ACT_FLOOD:
		if (!d.br)
			return TC_ACT_SHOT;
		/* Clone to every other port; the original goes to the last one.
		 * Finding the last without a loop keeps the verifier's work linear. */
		if (d.br->nports < 2 || d.br->nports > TR_MAX_BRIDGE_PORTS) {
			tr_count_drop(d.in_st, TR_DROP_NO_EGRESS); /* nowhere to flood */
			return TC_ACT_SHOT;
		}
		/* The masks are no-ops after the check above; they show the verifier the bound. */
		last = (d.br->nports - 1) & (TR_MAX_BRIDGE_PORTS - 1);
		if (d.br->ports[last].ifindex == p.ifindex)
			last = (last - 1) & (TR_MAX_BRIDGE_PORTS - 1);
		for (__u32 i = 0; i < TR_MAX_BRIDGE_PORTS; i++) {
			__u32 ifindex;

			if (i >= last)
				break;
			ifindex = d.br->ports[i].ifindex;
			if (ifindex == p.ifindex)
				continue;
			if (bpf_clone_redirect(skb, ifindex, 0))
				tr_count_drop(d.in_st, TR_DROP_NO_EGRESS);
			else
				tr_count_tx(tr_stats(d.br->ports[i].slot), p.len);
		}
		tr_count_tx(tr_stats(d.br->ports[last].slot), p.len);
		return bpf_redirect(d.br->ports[last].ifindex, 0);
	default:
		return TC_ACT_SHOT;
	}
}
