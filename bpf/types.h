/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The only types shared between the datapath and the control plane. Go sees
 * them solely through the bpf2go bindings in internal/bpf (DESIGN.md rule 4):
 * change a field here, run `make generate`, and the Go side follows.
 */
#ifndef TRESTLE_TYPES_H
#define TRESTLE_TYPES_H

#include <linux/types.h>

enum tr_limits {
	TR_MAX_BRIDGES = 64,      /* bridge ids 1..64; 0 is never used */
	TR_MAX_PORTS = 256,       /* port slots 1..255; slot 0 counts frames from no port */
	TR_MAX_BRIDGE_PORTS = 64, /* ports of one bridge */
};

/*
 * Why a frame was dropped. Every drop in the datapath goes through one helper
 * with one of these, and each is a per-CPU counter of the ingress port.
 */
enum tr_drop_reason {
	TR_DROP_RUNT = 0,      /* shorter than the headers it announces */
	TR_DROP_ETHERTYPE,     /* type/length field is neither (1501..1535) or overruns the frame */
	TR_DROP_BAD_SRC,       /* multicast or all-zero source address */
	TR_DROP_RESERVED,      /* IEEE 802.1D reserved group address 01:80:c2:00:00:0x */
	TR_DROP_HAIRPIN,       /* destination was learned on the ingress port */
	TR_DROP_MAC_LIMIT,     /* new source address over the port's max_macs */
	TR_DROP_TABLE_FULL,    /* new source address and the bridge's table is full */
	TR_DROP_NO_PORT,       /* ingress interface is not a port of any bridge */
	TR_DROP_NO_EGRESS,     /* the egress port could not take the frame */
	TR_DROP_NO_BRIDGE,     /* port names a bridge the daemon has not set up */
	TR_DROP__MAX,
};

/* Per-port counters, one copy per CPU, summed by the control plane. */
struct tr_port_stats {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 tx_bytes;
	__u64 flooded;  /* frames this port sent to every other port of its bridge */
	__u64 learned;  /* new addresses learned on this port */
	__u64 moved;    /* addresses that moved to this port from another */
	__u64 drops[TR_DROP__MAX];
};

/* FDB key: a MAC address in one VLAN of one bridge. */
struct tr_fdb_key {
	__u16 bridge;
	__u16 vlan; /* 0: untagged */
	__u8 mac[6];
};

enum tr_fdb_flags {
	TR_FDB_STATIC = 1, /* from config: never aged, never overwritten by learning */
};

struct tr_fdb_val {
	__u32 ifindex;
	__u16 slot;    /* port slot of ifindex, so forwarding needs no second lookup */
	__u16 flags;   /* enum tr_fdb_flags */
	__u64 seen_ns; /* CLOCK_MONOTONIC_COARSE of the last refresh */
};

/* A bridge port, keyed by ifindex. */
struct tr_port {
	__u16 bridge;
	__u16 slot;
	__u32 max_macs; /* 0: unlimited */
};

struct tr_bridge_port {
	__u32 ifindex;
	__u32 slot;
};

/* A bridge, indexed by bridge id. The port list drives flooding in tc mode. */
struct tr_bridge {
	__u32 nports;
	__u32 max_entries;
	struct tr_bridge_port ports[TR_MAX_BRIDGE_PORTS];
};

#endif
