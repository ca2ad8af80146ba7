/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Every map of the switch. Sizes are upper bounds (architecture.md rule 3); the
 * control plane may shrink the FDB before load to the sum of the bridges'
 * max_entries. All run-time state lives here; a stage that a bridge may not
 * use gets a volatile const instead (architecture.md rule 6: lib/stages.h).
 */
#ifndef TRESTLE_MAPS_H
#define TRESTLE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../types.h"

/* ifindex -> port, for ifindexes below TR_PORT_DIRECT: an array, so that
 * finding the ingress port is an index and not a hash lookup (the hash cost
 * about 40 ns of a forwarded frame's 190: docs/performance.md). An entry with
 * bridge 0 is no port. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_PORT_DIRECT);
	__type(key, __u32);
	__type(value, struct tr_port);
} port_index SEC(".maps");

/* ifindex -> port for ifindexes from TR_PORT_DIRECT up: a long-lived host
 * numbers new interfaces upwards. A frame from an interface in neither map
 * is not ours. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct tr_port);
} ports SEC(".maps");

/* Each CPU's memos of the learning table (lib/fdb.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tr_cpu_cache);
} cpu_cache SEC(".maps");

/* Two copies of every bridge: 2 * id and 2 * id + 1; ids start at 1. An
 * array value is written in place, so a frame on another CPU could read a
 * bridge half old and half new (a port list with holes floods into ifindex
 * 0). The control plane writes the copy no frame reads, points bridge_live
 * at it, and waits an RCU grace period before it writes the old copy again
 * (internal/datapath), so a frame sees one whole bridge or the other. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * (TR_MAX_BRIDGES + 1));
	__type(key, __u32);
	__type(value, struct tr_bridge);
} bridges SEC(".maps");

/* bridge id -> the index in bridges of its live copy; 0: no bridge. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_BRIDGES + 1);
	__type(key, __u32);
	__type(value, __u32);
} bridge_live SEC(".maps");

/* The forwarding database of every bridge; the bridge id is in the key. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct tr_fdb_key);
	__type(value, struct tr_fdb_val);
} fdb SEC(".maps");

/* Learned (non-static) addresses per port slot and per bridge, for the
 * limits, kept as two counts with one writer each, because the control plane
 * cannot add atomically to a value the datapath adds to: *_macs is what the
 * datapath learned (it adds when it learns, and moves a count with an
 * address), *_macs_del what the control plane deleted (aging, flushes, `fdb
 * del`, statics written over learned entries). An address count is the
 * difference, and no write of one side ever loses the other's. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, __s32);
} port_macs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, __s32);
} port_macs_del SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_BRIDGES + 1);
	__type(key, __u32);
	__type(value, __s32);
} bridge_macs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_BRIDGES + 1);
	__type(key, __u32);
	__type(value, __s32);
} bridge_macs_del SEC(".maps");

/* At its bridge's high-water mark, how far a port at or over its fair share
 * may learn (lib/fdb.h, tr_table_refuses): a value of its port_macs, which
 * the daemon sets to port_macs plus the port's reserve at each look while
 * the bridge is at its mark (internal/daemon/fair.go), 0 otherwise: no new
 * source at the mark. Only the daemon writes it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, __s32);
} port_hold SEC(".maps");

/* Counters per port slot and CPU; slot 0 counts frames from unknown interfaces. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct tr_port_stats);
} stats SEC(".maps");

/* XDP unicast egress: port slot -> ifindex. Indexed by the slot the FDB
 * entry already holds, so the redirect is an array access, not a hash. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

/* XDP flooding: one devmap of ports per bridge, broadcast with the ingress excluded. */
struct tr_flood_ports {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, TR_MAX_BRIDGE_PORTS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, TR_MAX_BRIDGES + 1);
	__type(key, __u32);
	__array(values, struct tr_flood_ports);
} floods SEC(".maps");

/* ---- the VLAN stage (lib/vlan.h) ---- */

/* Trunk ports' VLANs, by port slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct tr_port_vlans);
} port_vlans SEC(".maps");

/* bridge * TR_VLAN_IDS + VID -> the VLAN: an array, so that classifying a
 * frame is an index and never a hash lookup or a map write. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, (TR_MAX_BRIDGES + 1) * TR_VLAN_IDS);
	__type(key, __u32);
	__type(value, struct tr_vlan_entry);
} vlans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TR_MAX_VLANS);
	__type(key, __u32);
	__type(value, struct tr_vlan_stats);
} vlan_stats SEC(".maps");

/* Flood sets whose entries each run a devmap program on the copy to their
 * port: per bridge, a devmap of up to n interfaces with struct
 * bpf_devmap_val values, in an array of maps by bridge id. */
#define TR_PROG_FLOODS(name, n)                                       \
	struct name##_ports {                                         \
		__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);               \
		__uint(max_entries, n);                               \
		__uint(key_size, sizeof(__u32));                      \
		__uint(value_size, sizeof(struct bpf_devmap_val));    \
	};                                                            \
	struct {                                                      \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);             \
		__uint(max_entries, TR_MAX_BRIDGES + 1);              \
		__type(key, __u32);                                   \
		__array(values, struct name##_ports);                 \
	} name SEC(".maps")

/* XDP flooding in a VLAN-aware bridge: its ports, each entry with the
 * program that keeps the copy to that port in the VLAN (trestle_vlan_egress:
 * drop where the VLAN is not carried, untag where it leaves untagged). */
TR_PROG_FLOODS(vlan_floods, TR_MAX_BRIDGE_PORTS);

/* ---- patch ports (lib/patch.h) ---- */

/* Patch ports by slot. They have no interface, so they are in neither
 * port_index nor ports: tr_port_of() finds them here by their pseudo ifindex. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct tr_patch);
} patches SEC(".maps");

/* XDP flooding across patch ports: for each bridge with patch ports, the
 * interface ports of every bridge its patches join it to, each entry with
 * trestle_patch_egress, which lets through the copies to the ports the walk
 * chose (their slots travel in the frame's metadata). */
TR_PROG_FLOODS(patch_floods, TR_MAX_PORTS);

/* ---- mirrors ---- */

/* A mirrored port's mirror, by port slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct tr_mirror);
} mirrors SEC(".maps");

/* The VLANs a VLAN-selective mirror copies, by the mirrored port's slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct tr_port_vlans);
} mirror_vlans SEC(".maps");

/* ---- events ---- */

/* Records for the daemon (struct tr_event): what it logs and `trestle
 * events` shows. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TR_EVENT_RING);
} event_ring SEC(".maps");

/* The guards' records (lib/guard.h: a BPDU on a guarded port, a loop probe
 * heard), in a ring of their own: a loop's storm of moves fills the event
 * ring, and the probe's report, the one that breaks the loop, must not wait
 * behind them or be lost for want of room. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TR_EDGE_RING);
} edge_ring SEC(".maps");

/* Records the ring had no room for, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} event_lost SEC(".maps");

/* ---- the overlay (lib/overlay.h) ---- */

/* The outer headers of the stations behind overlay ports, by the FDB's
 * bridge, VLAN and address: a known unicast frame to one is encapsulated
 * by the datapath and sent into the underlay (tr_vxlan_encap in XDP, unless
 * the entry is tc's alone; tr_vxlan_encap_tc at tc). The control plane
 * writes them; a frame to a station without one takes the overlay port's
 * xdp way in (XDP) or its vxlan device (tc). 65,536 at most, not grown with
 * the table by a resize: a station the map has no room for takes the way
 * in (the daemon says how many it could not write). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct tr_encap_key);
	__type(value, struct tr_encap);
} encaps SEC(".maps");

/* ---- port counters ---- */

static __always_inline struct tr_port_stats *tr_stats(__u32 slot)
{
	return bpf_map_lookup_elem(&stats, &slot);
}

/* The addresses of ip_guard ports (lib/ipguard.h), written by the daemon
 * before the port's TR_PORT_IP_GUARD and removed after it; the value is
 * unused (1). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TR_MAX_GUARD_IPS);
	__type(key, struct tr_guard_key);
	__type(value, __u8);
} guard_ips SEC(".maps");

/* The neighbour table (lib/neigh.h): IP -> MAC in one VLAN of a bridge,
 * written by the daemon (the ports' allowed_ips and allowed_macs), read by
 * the suppression of a bridge with TR_BRIDGE_NEIGH_SUPPRESS. Bounded: at
 * most TR_MAX_NEIGH entries of all bridges together (the configuration is
 * checked against it), allocated as they are written: a switch without
 * neighbours pays no memory for the room. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TR_MAX_NEIGH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tr_neigh_key);
	__type(value, struct tr_neigh);
} neigh SEC(".maps");

/* ---- multicast snooping (lib/snoop.h) ---- */

/* The group table: which ports a group's frames go to, by bridge, VLAN
 * and group. The daemon writes it from the IGMP and MLD messages it reads
 * from snoop_ring; frames only read it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TR_MAX_GROUPS);
	__type(key, struct tr_group_key);
	__type(value, struct tr_group);
} groups SEC(".maps");

/* The ports of the frame this CPU floods to a group (tr_snoop): the tc
 * copies' door reads them (TR_COPY_GROUP), one bit a copy. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tr_group);
} group_cur SEC(".maps");

/* IGMP, MLD and PIM messages for the daemon (struct tr_snoop_msg): a ring
 * of their own, so that a flood of reports crowds out no other event. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TR_SNOOP_RING);
} snoop_ring SEC(".maps");

/* Messages the snoop ring had no room for, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} snoop_lost SEC(".maps");

#endif
