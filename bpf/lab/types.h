/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The types the lab's programs (gen.c, sink.c) share with Go. Go sees them
 * only through the bpf2go bindings in internal/lab/bpf: change a field here,
 * run `make generate`, and the Go side follows. The switch's types are in
 * ../types.h; nothing here is the switch's.
 */
#ifndef TRESTLE_LAB_TYPES_H
#define TRESTLE_LAB_TYPES_H

#include <linux/types.h>
#include <linux/bpf.h>

/* ---- traffic generator (gen.c) and sink (sink.c) ---- */

enum tr_gen_limits {
	TR_GEN_HDR_MAX = 96,     /* bytes of headers before the test header */
	TR_GEN_MAX_PATTERN = 64, /* slots of a frame-size mix */
	TR_GEN_MAX_CPUS = 64,
	TR_TEST_HDR_LEN = 16, /* magic, flow, seq, timestamp: see internal/lab/frame */
	TR_TEST_MAGIC = 0x7452,
};

/* One flow at one frame size: its headers, and the UDP checksum sum of the
 * template with seq and timestamp zero. */
struct tr_gen_tmpl {
	__u8 hdr[TR_GEN_HDR_MAX];
	__u16 csum_base;
	__u16 size; /* frame size without FCS */
	__u32 flow;
};

/* The state of one sending CPU; only that CPU writes it while it runs. */
struct tr_gen_cpu {
	__u64 interval_ns; /* 0: as fast as possible */
	__u64 next_ns;
	__u64 limit;    /* frames to send; 0: no limit */
	__u64 sent;
	__u64 bytes;
	__u64 declined; /* runs that sent nothing because it was too early */
	__u64 duration_ns; /* send for this long from the first frame; 0: no end */
	__u64 first_ns;    /* when the first frame was sent */
	__u64 last_ns;     /* when the last frame was sent */
	__u64 clock_ns;    /* the last clock reading: the timestamp of frames sent on credit */
	__u32 flow_first;
	__u32 flow_step;
	__u32 nflows; /* flows of this CPU: flow_first + k * flow_step */
	__u32 cursor;
	__u32 pat_cursor;
	__u32 credit; /* frames that may go before the clock is read again */
	__u32 src_mac_cursor; /* next source MAC of the range, from the thread's index */
	__u32 dst_mac_cursor;
	__u32 mac_step;       /* sending threads: each takes every mac_step-th MAC */
	__u32 pad;
};

enum tr_sink_limits {
	TR_SINK_SUB_BITS = 4, /* 16 sub-buckets per power of two: < 6.25% error */
	TR_SINK_HIST_BUCKETS = 1024,
	TR_SINK_WINDOW = 64, /* sequence numbers behind the highest one that are told apart */
};

struct tr_sink_flow {
	struct bpf_spin_lock lock;
	__u32 max_seq;
	__u64 max_ts; /* send time of max_seq: a later one below it starts a new run */
	__u64 window; /* bit i: max_seq - i was received */
	__u64 received;
	__u64 bytes;
	__s64 lost; /* gaps not (yet) filled */
	__u64 reordered;
	__u64 duplicates;
	__u64 first_ns;
	__u64 last_ns;
	__u32 seen;
	__u32 runs; /* generator runs seen: sequences that started again */
};

struct tr_sink_stats {
	__u64 packets; /* every frame */
	__u64 bytes;
	__u64 unsigned_packets; /* frames without the test header */
	__u64 unsigned_bytes;
	__u64 bad_flow; /* signed frames with a flow id beyond the sink's table */
};

#endif
