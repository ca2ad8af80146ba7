/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The context shim: the few operations on a frame that differ between the
 * two attach modes, each one call with an XDP and a tc implementation (as
 * cilium's ctx/xdp.h and ctx/skb.h). Everything above it is written once.
 *
 * The mode is the constant xdp each entry point passes down (1: an
 * xdp_md, 0: an __sk_buff); every function here is inlined, so the
 * compiler folds the choice and each program holds one side only. Code
 * outside this header asks the mode only where the two modes do a thing
 * differently by design, not by API: a flood (one broadcast redirect, or a
 * clone to each port) and the walk's copies (chosen then sent, or sent as
 * chosen).
 *
 * xdp: the frame is its bytes; a VLAN tag is pushed or popped by moving
 *      the addresses; a port is a slot of the tx_ports devmap.
 * tc:  the skb keeps its GSO and checksum state, and the kernel may hold
 *      the outer tag outside the bytes; a port is its ifindex.
 */
#ifndef TRESTLE_CTX_H
#define TRESTLE_CTX_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "maps.h"
#include "parse.h"

#define TR_XDP 1
#define TR_TC 0

/* Headers the pipeline may read; tc pulls them into the linear area if needed. */
#define TR_PULL_LEN 64

/* What the entry point sees of a frame. */
struct tr_pkt {
	void *data;
	void *data_end;
	__u32 len;     /* whole frame, including any non-linear part */
	__u32 wire;    /* its length on the wire: len and a tag held in metadata */
	__u32 ifindex; /* ingress */
	int meta_vlan; /* outer VID held in metadata, or -1 (see tr_parse) */
	__be16 meta_proto; /* that tag's TPID; 0: no tag in metadata */
	__u16 meta_tci;
};

static __always_inline void tr_read(void *ctx, const int xdp, struct tr_pkt *p)
{
	if (xdp) {
		struct xdp_md *x = ctx;

		p->data = (void *)(long)x->data;
		p->data_end = (void *)(long)x->data_end;
		p->len = p->data_end - p->data;
		p->wire = p->len;
		p->ifindex = x->ingress_ifindex;
		p->meta_vlan = -1;
		p->meta_proto = 0;
		p->meta_tci = 0;
		return;
	}
	struct __sk_buff *skb = ctx;

	if ((long)skb->data_end - (long)skb->data < TR_PULL_LEN && skb->len > skb->data_end - skb->data)
		bpf_skb_pull_data(skb, skb->len < TR_PULL_LEN ? skb->len : TR_PULL_LEN);
	p->data = (void *)(long)skb->data;
	p->data_end = (void *)(long)skb->data_end;
	p->len = skb->len;
	p->ifindex = skb->ifindex;
	if (skb->vlan_present) {
		p->meta_vlan = skb->vlan_tci & 0x0fff;
		p->meta_proto = skb->vlan_proto;
		p->meta_tci = skb->vlan_tci;
		p->wire = p->len + TR_VLAN_HLEN;
	} else {
		p->meta_vlan = -1;
		p->meta_proto = 0;
		p->meta_tci = 0;
		p->wire = p->len;
	}
}

/* The frame's bytes as the context holds them now (a tag pushed or popped
 * moves them). */
static __always_inline void *tr_ctx_data(void *ctx, const int xdp)
{
	if (xdp)
		return (void *)(long)((struct xdp_md *)ctx)->data;
	return (void *)(long)((struct __sk_buff *)ctx)->data;
}

static __always_inline void *tr_ctx_data_end(void *ctx, const int xdp)
{
	if (xdp)
		return (void *)(long)((struct xdp_md *)ctx)->data_end;
	return (void *)(long)((struct __sk_buff *)ctx)->data_end;
}

/* The frame's n bytes from off into buf (n bounded by the caller), as
 * cilium's ctx_load_bytes: where the program does not see them directly
 * (past what tc pulled into the linear area, in an XDP frame's fragments)
 * too. 0: read. */
static __always_inline long tr_load_bytes(void *ctx, const int xdp, __u32 off, void *buf, __u32 n)
{
	if (xdp)
		return bpf_xdp_load_bytes(ctx, off, buf, n);
	return bpf_skb_load_bytes(ctx, off, buf, n);
}

/* The frame's n bytes at off from buf, in either mode. l3: the bytes are
 * past the Ethernet header, where a tc frame's checksum of the whole
 * (CHECKSUM_COMPLETE) covers them and is kept right; the header is not in
 * it at tc ingress. 0: written. */
static __always_inline long tr_store_bytes(void *ctx, const int xdp, __u32 off, const void *buf, __u32 n,
					   const int l3)
{
	if (xdp)
		return bpf_xdp_store_bytes(ctx, off, (void *)buf, n);
	return bpf_skb_store_bytes(ctx, off, buf, n, l3 ? BPF_F_RECOMPUTE_CSUM : 0);
}

/* The frame's length in bytes (a tag tc holds outside them not counted). */
static __always_inline __u32 tr_ctx_len(void *ctx, const int xdp)
{
	if (xdp)
		return tr_ctx_data_end(ctx, xdp) - tr_ctx_data(ctx, xdp);
	return ((struct __sk_buff *)ctx)->len;
}

/* Cuts or grows the frame to len bytes (from len, as tr_ctx_len said). 0: done. */
static __always_inline long tr_ctx_resize(void *ctx, const int xdp, __u32 from, __u32 len)
{
	if (xdp)
		return bpf_xdp_adjust_tail(ctx, (int)len - (int)from);
	return bpf_skb_change_tail(ctx, len, 0);
}

/* XDP: the tag is in the bytes, after the two addresses. */
static __always_inline int tr_xdp_push(struct xdp_md *ctx, __u16 tci)
{
	void *data, *data_end;
	__u32 *w;

	if (bpf_xdp_adjust_head(ctx, -TR_VLAN_HLEN))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + ETH_HLEN + TR_VLAN_HLEN > data_end)
		return -1;
	w = data;
	/* The addresses move 4 bytes to the front; word by word, front first,
	 * each read before it is overwritten. */
	w[0] = w[1];
	w[1] = w[2];
	w[2] = w[3];
	((__be16 *)data)[6] = bpf_htons(ETH_P_8021Q);
	((__be16 *)data)[7] = bpf_htons(tci);
	return 0;
}

static __always_inline int tr_xdp_pop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 *w = data;

	if (data + ETH_HLEN + TR_VLAN_HLEN > data_end)
		return -1;
	/* The addresses move 4 bytes back over the tag, back first. */
	w[3] = w[2];
	w[2] = w[1];
	w[1] = w[0];
	return bpf_xdp_adjust_head(ctx, TR_VLAN_HLEN) ? -1 : 0;
}

static __always_inline int tr_xdp_set(struct xdp_md *ctx, __u16 tci)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;

	if (data + ETH_HLEN + TR_VLAN_HLEN > data_end)
		return -1;
	((__be16 *)data)[7] = bpf_htons(tci);
	return 0;
}

/* Push, pop or rewrite the frame's outermost 802.1Q tag, in either mode. A
 * pushed tag goes outside any tag already there (an 802.1ad frame's). */
static __always_inline int tr_tag_push(void *ctx, const int xdp, __u16 tci)
{
	if (xdp)
		return tr_xdp_push(ctx, tci);
	return bpf_skb_vlan_push(ctx, bpf_htons(ETH_P_8021Q), tci) ? -1 : 0;
}

static __always_inline int tr_tag_pop(void *ctx, const int xdp)
{
	if (xdp)
		return tr_xdp_pop(ctx);
	return bpf_skb_vlan_pop(ctx) ? -1 : 0;
}

static __always_inline int tr_tag_set(void *ctx, const int xdp, __u16 tci)
{
	if (xdp)
		return tr_xdp_set(ctx, tci);
	if (bpf_skb_vlan_pop(ctx))
		return -1;
	return bpf_skb_vlan_push(ctx, bpf_htons(ETH_P_8021Q), tci) ? -1 : 0;
}

/* The verdicts: the frame is dropped; the frame was redirected. */
static __always_inline int tr_verdict_drop(const int xdp)
{
	return xdp ? XDP_DROP : TC_ACT_SHOT;
}

static __always_inline int tr_verdict_redirect(const int xdp)
{
	return xdp ? XDP_REDIRECT : TC_ACT_REDIRECT;
}

/* XDP: sends the frame to every port of bridge's flood set in sets (an
 * array of devmaps by bridge id: floods, vlan_floods, patch_floods,
 * reach_floods) but the one it came in by. Returns XDP_REDIRECT, or
 * TR_NO_SET when the bridge has no set, or TR_REFUSED when the kernel
 * refused: the caller drops the frame (either) or goes another way (no
 * set). A set that holds only the ingress frees the frame without a word:
 * the caller knows its bridge has another port first. */
#define TR_NO_SET -1
#define TR_REFUSED -2

static __always_inline long tr_broadcast(void *sets, __u32 bridge)
{
	void *set = bpf_map_lookup_elem(sets, &bridge);

	if (!set)
		return TR_NO_SET;
	if (bpf_redirect_map(set, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS) != XDP_REDIRECT)
		return TR_REFUSED;
	return XDP_REDIRECT;
}

/* Sends the frame out of one port (ifindex, slot): XDP through the
 * tx_ports devmap by the port's slot, tc by its ifindex. Returns the
 * verdict, or -1 when the port could not take it (XDP: no such entry;
 * tc's bpf_redirect fails only on flags, and these are 0, so the caller's
 * check folds away). */
static __always_inline long tr_redirect_port(const int xdp, __u32 ifindex, __u32 slot)
{
	if (xdp) {
		long r = bpf_redirect_map(&tx_ports, slot, 0);

		return r == XDP_REDIRECT ? r : -1;
	}
	bpf_redirect(ifindex, 0);
	return TC_ACT_REDIRECT;
}

/*
 * Global functions take the context by its own type (the verifier reads it
 * from BTF): TR_TWIN makes the XDP and the tc one, name_xdp and name_tc,
 * from one inline body name(ctx, xdp, ...), and TR_CALL calls the mode's.
 * Each is verified once, not at each of its calls. params and args are
 * parenthesized lists: TR_TWIN(tr_hop, (struct tr_walk *w, __u32 slot),
 * (w, slot)).
 */
#define TR_UNPAREN(...) __VA_ARGS__
#define TR_TWIN(name, params, args)                                                          \
	__attribute__((noinline)) int name##_xdp(struct xdp_md *ctx, TR_UNPAREN params)      \
	{                                                                                    \
		return name(ctx, TR_XDP, TR_UNPAREN args);                                   \
	}                                                                                    \
	__attribute__((noinline)) int name##_tc(struct __sk_buff *ctx, TR_UNPAREN params)    \
	{                                                                                    \
		return name(ctx, TR_TC, TR_UNPAREN args);                                    \
	}
#define TR_CALL(xdp, name, ctx, ...) ((xdp) ? name##_xdp(ctx, __VA_ARGS__) : name##_tc(ctx, __VA_ARGS__))

#endif
