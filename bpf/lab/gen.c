/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The traffic generator: an XDP program run with BPF_PROG_RUN and
 * BPF_F_TEST_XDP_LIVE_FRAMES, so that every XDP_TX it returns is a frame sent
 * out of the device (the way xdp-trafficgen works). Each run is one frame:
 * it paces itself (returning XDP_DROP when it is too early, which sends
 * nothing), picks the next flow and frame size, writes the flow's headers,
 * the test header (magic, flow, seq, timestamp) and the UDP checksum.
 *
 * Live frames reuse pages, so every run rewrites everything that varies.
 * The payload after the test header is zeros and never changes.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "types.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set before load. */
const volatile __u32 hdr_len = 42;     /* 42 IPv4, 46 IPv4+VLAN, 62 IPv6, 66 IPv6+VLAN */
const volatile __u32 nsizes = 1;       /* templates per flow */
const volatile __u32 pattern_len = 1;  /* slots of the size mix */
const volatile __u32 max_size = 60;    /* size of the frame handed to BPF_PROG_RUN */
const volatile __u64 max_burst_ns = 0; /* how far pacing may catch up after a stall */
const volatile __u32 clock_every = 1;  /* frames per clock reading, >= 1 */
/* Ranges of MAC addresses, for address learning and caching tests (RFC
 * 2889): frame k of a thread takes the next address of each range, the
 * template's address plus an offset added to its low 24 bits. 1: no range. */
const volatile __u32 src_macs = 1;
const volatile __u32 dst_macs = 1;
/* 1: frame k takes offset mac_mix24(k) instead of k, so a range's addresses
 * are scattered over the 24 bits in an order that looks random (a MAC flood
 * from random sources), each still taken once a cycle. */
const volatile __u32 random_macs = 0;

/* Set by the control plane while running, to stop every sending CPU. */
__u32 stop_all = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* resized to flows * sizes before load */
	__type(key, __u32);
	__type(value, struct tr_gen_tmpl);
} templates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* resized to flows before load */
	__type(key, __u32);
	__type(value, __u32);
} seqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_GEN_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct tr_gen_cpu);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_GEN_MAX_PATTERN);
	__type(key, __u32);
	__type(value, __u32);
} pattern SEC(".maps");

static __always_inline __u32 csum_add16(__u32 sum, __u64 v, int words)
{
	for (int i = 0; i < words; i++) {
		sum += v & 0xffff;
		v >>= 16;
	}
	return sum;
}

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/* Add off to the low 24 bits of a MAC address (the template's), wrapping
 * within them so the vendor part stays. */
static __always_inline void set_mac_low24(__u8 *mac, __u32 off)
{
	__u32 v = ((__u32)mac[3] << 16 | (__u32)mac[4] << 8 | mac[5]) + off;

	mac[3] = v >> 16;
	mac[4] = v >> 8;
	mac[5] = v;
}

/* A permutation of the 24-bit numbers: multiplying by an odd number and
 * xor-shifting right are each one-to-one on 24 bits, so N offsets give N
 * distinct addresses. internal/lab/gen's MACOffset mirrors it. */
static __always_inline __u32 mac_mix24(__u32 k)
{
	__u32 x = (k * 0x9e3779b1u) & 0xffffff;

	x ^= x >> 13;
	x = (x * 0x5bd1e995u) & 0xffffff;
	x ^= x >> 11;
	return x;
}

static __always_inline __u32 mac_offset(__u32 k)
{
	return random_macs ? mac_mix24(k) : k;
}

/* Copy a template's headers; the length is one of four constants so that
 * the copy unrolls and the verifier sees fixed bounds. */
#define COPY_HDR(n)                                                   \
	do {                                                          \
		if (data + (n) + TR_TEST_HDR_LEN > data_end)          \
			return XDP_ABORTED;                           \
		__builtin_memcpy(data, t->hdr, (n));                  \
		th = data + (n);                                      \
		csum = data + (n) - 2;                                \
	} while (0)

SEC("xdp")
int trestle_gen(struct xdp_md *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct tr_gen_cpu *st = bpf_map_lookup_elem(&cpus, &cpu);
	struct tr_gen_tmpl *t;
	__u32 flow, key, sidx = 0, *seqp, seq, sum, len;
	__u64 now;
	void *data, *data_end;
	__u8 *th;
	__u16 *csum, c;

	if (!st || !st->nflows)
		return XDP_DROP;
	if (*(volatile __u32 *)&stop_all || (st->limit && st->sent >= st->limit))
		return XDP_DROP;

	if (st->credit) {
		/* Reading the clock costs about as much as building the frame
		 * (measured: docs/performance.md), so a run that finds frames
		 * due grants itself up to clock_every of them, and the frames
		 * sent on that credit carry the time of that reading. */
		st->credit--;
		now = st->clock_ns;
	} else {
		__u64 due = clock_every;

		now = bpf_ktime_get_ns();
		if (!st->first_ns) {
			/* The clock starts at the first frame, not at the call:
			 * setting up a live-frames run takes a while. */
			st->first_ns = now;
			st->next_ns = now;
		}
		if (st->duration_ns && now - st->first_ns >= st->duration_ns)
			return XDP_DROP;
		if (st->interval_ns) {
			if (now < st->next_ns) {
				st->declined++;
				return XDP_DROP;
			}
			/* After a stall, catch up at most max_burst_ns worth. */
			if (now - st->next_ns > max_burst_ns)
				st->next_ns = now - max_burst_ns;
			due = (now - st->next_ns) / st->interval_ns + 1;
			if (due > clock_every)
				due = clock_every;
			st->next_ns += due * st->interval_ns;
		}
		st->credit = due - 1;
		st->clock_ns = now;
	}

	flow = st->flow_first + st->cursor * st->flow_step;
	if (++st->cursor >= st->nflows)
		st->cursor = 0;
	if (pattern_len > 1) {
		__u32 pc = st->pat_cursor, *ps;

		if (++st->pat_cursor >= pattern_len)
			st->pat_cursor = 0;
		ps = bpf_map_lookup_elem(&pattern, &pc);
		if (ps)
			sidx = *ps;
	}
	key = flow * nsizes + sidx;
	t = bpf_map_lookup_elem(&templates, &key);
	seqp = bpf_map_lookup_elem(&seqs, &flow);
	if (!t || !seqp)
		return XDP_ABORTED;

	/* Live frames start each run at max_size; size from what the frame
	 * is, not from that, so a frame that was not reset is sized right too. */
	len = ctx->data_end - ctx->data;
	if (len != t->size && bpf_xdp_adjust_tail(ctx, (int)t->size - (int)len))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;

	switch (hdr_len) {
	case 42:
		COPY_HDR(42);
		break;
	case 46:
		COPY_HDR(46);
		break;
	case 62:
		COPY_HDR(62);
		break;
	case 66:
		COPY_HDR(66);
		break;
	default:
		return XDP_ABORTED;
	}

	if (src_macs > 1) {
		set_mac_low24((__u8 *)data + 6, mac_offset(st->src_mac_cursor));
		st->src_mac_cursor += st->mac_step;
		if (st->src_mac_cursor >= src_macs)
			st->src_mac_cursor -= src_macs;
	}
	if (dst_macs > 1) {
		set_mac_low24(data, mac_offset(st->dst_mac_cursor));
		st->dst_mac_cursor += st->mac_step;
		if (st->dst_mac_cursor >= dst_macs)
			st->dst_mac_cursor -= dst_macs;
	}

	seq = *seqp;
	*seqp = seq + 1;
	*(__u16 *)th = bpf_htons(TR_TEST_MAGIC);
	/* The template's flow id: the flow's index plus the run's base. */
	*(__u16 *)(th + 2) = bpf_htons((__u16)t->flow);
	*(__u32 *)(th + 4) = bpf_htonl(seq);
	*(__u64 *)(th + 8) = bpf_cpu_to_be64(now);

	/* The template's sum had zeros where seq and the timestamp go; add
	 * their 16-bit words (the order of one's-complement addition does not
	 * matter, and big-endian words are what the wire carries). */
	sum = t->csum_base;
	sum = csum_add16(sum, seq, 2);
	sum = csum_add16(sum, now, 4);
	c = ~csum_fold(sum);
	if (c == 0)
		c = 0xffff;
	*csum = bpf_htons(c);

	st->sent++;
	st->bytes += t->size;
	st->last_ns = now;
	return XDP_TX;
}

/* Enums reach BTF, and so bpf2go, only through a typed object; never used. */
enum tr_gen_limits _btf_gen_limits __attribute__((unused));
