/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The traffic sink: an XDP program that counts frames, and for frames that
 * carry trestle's test header (see internal/lab/frame) tracks each flow's
 * sequence numbers to tell loss, reordering and duplicates apart exactly
 * within a window of TR_SINK_WINDOW, and records one-way latency (generator
 * and sink read the same CLOCK_MONOTONIC) in a log-linear histogram.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "types.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 verdict = XDP_DROP; /* XDP_PASS with --pass */
/* A flow's state is updated under its lock only when frames can arrive on
 * several receive queues at once. On one queue (a veth's default) NAPI runs
 * this program for one frame at a time, and the lock would only cost: it
 * was a third of the program's time (docs/performance.md). */
const volatile __u32 locked = 1;
/* Latency of one frame in latency_every (a power of two, by sequence
 * number): reading the clock is the largest cost left, and a sample still
 * gives the percentiles (RFC 2544 samples one frame a trial). Set while
 * running (the lab samples throughput trials and not latency trials), so it
 * is a variable, not a load-time constant. */
__u32 latency_mask = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct tr_sink_flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tr_sink_stats);
} totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TR_SINK_HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} latency SEC(".maps");

struct tr_vlan {
	__be16 tci;
	__be16 proto;
};

/* Offset of the UDP payload, or -1. */
static __always_inline int udp_payload(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	__u32 off = sizeof(*eth);
	__u16 proto;

	if ((void *)(eth + 1) > data_end)
		return -1;
	proto = bpf_ntohs(eth->h_proto);
#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct tr_vlan *v = data + off;

		if (proto != ETH_P_8021Q && proto != ETH_P_8021AD)
			break;
		if ((void *)(v + 1) > data_end)
			return -1;
		proto = bpf_ntohs(v->proto);
		off += sizeof(*v);
	}
	if (proto == ETH_P_IP) {
		struct iphdr *ip = data + off;

		if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_UDP || ip->ihl < 5)
			return -1;
		off += ip->ihl * 4;
	} else if (proto == ETH_P_IPV6) {
		struct ipv6hdr *ip6 = data + off;

		if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != IPPROTO_UDP)
			return -1;
		off += sizeof(*ip6);
	} else {
		return -1;
	}
	if (off > 256)
		return -1;
	return off + sizeof(struct udphdr);
}

/* Bucket of a latency in ns: exact below 16, then 16 sub-buckets per power of two
 * (internal/lab/sink mirrors this to turn buckets back into nanoseconds). */
static __always_inline __u32 latency_bucket(__u64 d)
{
	__u32 e = 0;
	__u64 v = d;

	if (d < (1 << TR_SINK_SUB_BITS))
		return d;
	if (v >> 32) { e += 32; v >>= 32; }
	if (v >> 16) { e += 16; v >>= 16; }
	if (v >> 8) { e += 8; v >>= 8; }
	if (v >> 4) { e += 4; v >>= 4; }
	if (v >> 2) { e += 2; v >>= 2; }
	if (v >> 1) { e += 1; }
	/* e >= 4: bucket = (e - 3) * 16 + the 4 bits below the top one */
	return (e - 3) * (1 << TR_SINK_SUB_BITS) + ((d >> (e - TR_SINK_SUB_BITS)) & ((1 << TR_SINK_SUB_BITS) - 1));
}

/* A flow's sequence numbers rise with its send times, because one generator
 * thread sends each flow. So a frame below the highest sequence number but
 * sent after it is from a new run of the generator, which starts at 0 again:
 * the flow's window starts over there, and the counts carry on. */
static __always_inline void track(struct tr_sink_flow *f, __u32 seq, __u64 ts, __u32 len, __u64 now)
{
	__s32 ahead = (__s32)(seq - f->max_seq);

	f->received++;
	f->bytes += len;
	if (now)
		f->last_ns = now;
	if (!f->seen || (ahead <= 0 && ts > f->max_ts)) {
		/* Sequences start at 0: anything below the first one seen is lost. */
		if (!f->seen)
			f->first_ns = now;
		f->seen = 1;
		f->runs++;
		f->max_seq = seq;
		f->max_ts = ts;
		f->window = 1;
		f->lost += seq;
	} else if (ahead > 0) {
		f->window = ahead >= TR_SINK_WINDOW ? 0 : f->window << ahead;
		f->window |= 1;
		f->lost += ahead - 1;
		f->max_seq = seq;
		f->max_ts = ts;
	} else {
		__u32 back = -ahead;

		if (back >= TR_SINK_WINDOW) {
			/* Too old to tell a late frame from a copy: call it late. */
			f->reordered++;
			f->lost--;
		} else if (f->window & (1ULL << back)) {
			f->duplicates++;
		} else {
			f->window |= 1ULL << back;
			f->reordered++;
			f->lost--;
		}
	}
}

SEC("xdp")
int trestle_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 len = data_end - data, zero = 0, flow, seq, bucket;
	struct tr_sink_stats *tot = bpf_map_lookup_elem(&totals, &zero);
	struct tr_sink_flow *f;
	__u64 now = 0, ts, *h;
	__u8 *th;
	int off;

	if (!tot)
		return verdict;
	tot->packets++;
	tot->bytes += len;

	off = udp_payload(data, data_end);
	if (off < 0)
		goto unsigned_frame;
	th = data + off;
	if ((void *)(th + TR_TEST_HDR_LEN) > data_end || bpf_ntohs(*(__u16 *)th) != TR_TEST_MAGIC)
		goto unsigned_frame;

	flow = bpf_ntohs(*(__u16 *)(th + 2));
	seq = bpf_ntohl(*(__u32 *)(th + 4));
	ts = bpf_be64_to_cpu(*(__u64 *)(th + 8));
	f = bpf_map_lookup_elem(&flows, &flow);
	if (!f) {
		tot->bad_flow++;
		return verdict;
	}
	/* The first frame of a flow always reads the clock: it starts the
	 * flow's receive window. */
	if (!(seq & latency_mask) || !f->seen)
		now = bpf_ktime_get_ns();
	if (locked) {
		bpf_spin_lock(&f->lock);
		track(f, seq, ts, len, now);
		bpf_spin_unlock(&f->lock);
	} else {
		track(f, seq, ts, len, now);
	}
	if (!now || (seq & latency_mask))
		return verdict;

	bucket = latency_bucket(now > ts ? now - ts : 0);
	if (bucket >= TR_SINK_HIST_BUCKETS)
		bucket = TR_SINK_HIST_BUCKETS - 1;
	h = bpf_map_lookup_elem(&latency, &bucket);
	if (h)
		(*h)++;
	return verdict;

unsigned_frame:
	tot->unsigned_packets++;
	tot->unsigned_bytes += len;
	return verdict;
}

/* Enums reach BTF, and so bpf2go, only through a typed object; never used. */
enum tr_sink_limits _btf_sink_limits __attribute__((unused));
