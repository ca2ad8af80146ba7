/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The only types shared between the datapath and the control plane. Go sees
 * them solely through the bpf2go bindings in internal/bpf (architecture.md rule 4):
 * change a field here, run `make generate`, and the Go side follows.
 */
#ifndef TRESTLE_TYPES_H
#define TRESTLE_TYPES_H

#include <linux/types.h>
#include <linux/bpf.h>

enum tr_limits {
	TR_MAX_BRIDGES = 64,      /* bridge ids 1..64; 0 is never used */
	TR_MAX_PORTS = 4097,      /* port slots 1..4096; slot 0 counts frames from no port */
	TR_MAX_BRIDGE_PORTS = 1024, /* ports of one bridge (the Linux bridge's BR_MAX_PORTS) */
	TR_SEL_WORDS = 65,        /* 64-bit words of a set of slots: (TR_MAX_PORTS + 63) / 64 */
	TR_PORT_DIRECT = 65536,   /* ifindexes below this find their port by index */
	TR_NAME_LEN = 16,         /* a bridge's name, NUL-terminated (IFNAMSIZ) */
	TR_VLAN_IDS = 4096,       /* 802.1Q VIDs 0..4095; 1..4094 are VLANs */
	TR_MAX_VLANS = 8192,      /* VLANs of all bridges together, indexes 1..8191 */
	TR_MAX_PATCH_CHAIN = 16,  /* bridges one frame may cross through patch ports in one run */
	TR_MAX_GUARD_IPS = 16384, /* addresses bound to ip_guard ports, all ports together (lib/ipguard.h) */
	TR_FDB_HEADROOM = 16,     /* a bridge's table keeps max_entries / this (rounded up) for ports under their fair share (lib/fdb.h) */
	TR_MAX_NEIGH = 65536,     /* neighbour entries (IP -> MAC) of all bridges together (lib/neigh.h) */
};

/* A patch port has no interface: the datapath names it by this pseudo
 * ifindex, its slot with the top bit set, which no interface's ifindex (a
 * positive int) ever has. FDB entries on a patch port hold it. */
enum tr_patch_ifindex {
	TR_PATCH_IFINDEX = 0x80000000u,
};

/*
 * Why a frame was dropped. Every drop in the datapath goes through one helper
 * with one of these, and each is a per-CPU counter of the ingress port.
 * New reasons go at the end: a pinned datapath's counters are carried into a
 * newer build by field and index (internal/datapath/layout.go), so a reason
 * moved to another index would take another's count.
 */
enum tr_drop_reason {
	TR_DROP_RUNT = 0,      /* shorter than the headers it announces */
	TR_DROP_ETHERTYPE,     /* type/length field is neither (1501..1535) or overruns the frame */
	TR_DROP_BAD_SRC,       /* multicast or all-zero source address */
	TR_DROP_RESERVED,      /* IEEE 802.1D reserved group address 01:80:c2:00:00:0x */
	TR_DROP_HAIRPIN,       /* destination was learned on the ingress port */
	TR_DROP_MAC_LIMIT,     /* new source address over the port's max_macs */
	TR_DROP_TABLE_FULL,    /* no longer counted (issue 29): a source the full table cannot take is forwarded, counted unlearned_full */
	TR_DROP_NO_PORT,       /* ingress interface is not a port of any bridge */
	TR_DROP_NO_EGRESS,     /* the egress port could not take the frame */
	TR_DROP_NO_BRIDGE,     /* port names a bridge the daemon has not set up */
	TR_DROP_VLAN_UNTAGGED, /* untagged (or 802.1ad) frame on a trunk without a native VLAN */
	TR_DROP_VLAN_TAGGED,   /* frame with a nonzero VID on an access port */
	TR_DROP_VLAN_NOT_CARRIED, /* tagged frame of a VLAN its trunk does not carry */
	TR_DROP_VLAN_EGRESS,   /* the egress port does not carry the frame's VLAN, or its tag could not be written */
	TR_DROP_PATCH_CHAIN,   /* crossing this patch would take the frame through more than TR_MAX_PATCH_CHAIN bridges */
	TR_DROP_PROTECTED,     /* known unicast from a protected port to another protected port */
	TR_DROP_STORM_BROADCAST, /* broadcast over the port's storm control rate */
	TR_DROP_STORM_MULTICAST, /* multicast over the port's storm control rate */
	TR_DROP_STORM_UNKNOWN,   /* unknown unicast over the port's storm control rate */
	TR_DROP_SPAN,          /* arrived on a span port, which only sends mirrored copies */
	TR_DROP_FILTERED,      /* the bridge's filter blocked it: a block rule, or the default action */
	TR_DROP_STATE_FULL,    /* a keep_state rule passed it, and the state table is full */
	TR_DROP_LOCKED,        /* on a locked port, a source not bound to it (no static entry of the port in the frame's VLAN) */
	TR_DROP_SRC_STATIC,    /* a source that is a static entry of another port */
	TR_DROP_OVERLAY_MTU,   /* longer than the overlay port's MTU allows (its vxlan device's): never fragmented; counted on the overlay port */
	TR_DROP_IPGUARD_ARP,   /* ip_guard: an ARP frame whose sender address is not the port's (nor an RFC 5227 probe for one) */
	TR_DROP_IPGUARD_ND,    /* ip_guard: a neighbour advertisement (or DAD solicitation) whose target is not the port's, or ICMPv6 hidden past the extension headers read */
	TR_DROP_IPGUARD_IP,    /* ip_guard: an IPv4 or IPv6 frame whose source is not the port's (nor 0.0.0.0 DHCP, nor :: DAD/MLD) */
	TR_DROP_DOUBLE_TAGGED, /* on an access port that is no qinq port, a second tag behind a priority tag or an S-tag */
	TR_DROP_UNREADABLE,    /* the filter: a block rule that names a protocol, ports or an ICMP type met a frame whose transport header it could not read (past TR_FILTER_EXTHDRS extension headers or TR_FILTER_L4_MAX bytes, or cut short, a tiny first fragment among them) */
	TR_DROP_RA_GUARD,      /* ra_guard: an ICMPv6 router advertisement or redirect, or ICMPv6 hidden past the extension headers read */
	TR_DROP_DHCP_GUARD,    /* dhcp_guard: a DHCP server's message (UDP 67 -> 68; DHCPv6 ADVERTISE, REPLY, RECONFIGURE or RELAY-REPL from port 547) */
	TR_DROP_BPDU_GUARD,    /* bpdu_guard: a BPDU (to 01:80:c2:00:00:00) on a guarded port, which it blocks (lib/guard.h) */
	TR_DROP_PORT_BLOCKED,  /* came in by a blocked port (bpdu_guard, loop_detect), or a known unicast to one */
	TR_DROP_LOOP_PROBE,    /* loop_detect: a loop probe (TR_PROBE_ETHERTYPE with TR_PROBE_MAGIC), reported to the daemon, never forwarded (lib/guard.h) */
	TR_DROP__MAX,
};

/*
 * Per-port counters, one copy per CPU, summed by the control plane. Each is
 * an index of tr_port_stats.c: the control plane takes the counters' names
 * from this enum (TR_CNT_RX_PACKETS is "rx_packets" in `trestle stats`, the
 * metric trestle_port_rx_packets_total), so a new counter is one line here.
 * New counters go at the end, as new drop reasons do.
 */
enum tr_counter {
	TR_CNT_RX_PACKETS = 0,
	TR_CNT_RX_BYTES,
	TR_CNT_TX_PACKETS,
	TR_CNT_TX_BYTES,
	TR_CNT_FLOODED,   /* frames this port sent to every other port of its bridge */
	TR_CNT_LEARNED,   /* new addresses learned on this port */
	TR_CNT_MOVED,     /* addresses that moved to this port from another */
	TR_CNT_UNLEARNED, /* frames from new sources forwarded without learning them (mac_limit_action "forward" at max_macs) */
	TR_CNT_TX_DROPPED, /* copies of flooded frames for this port that could not be sent: a tc clone the kernel refused (longer than the port's MTU allows, say) */
	TR_CNT_UNLEARNED_FULL, /* of unlearned: new sources forwarded without learning them because the bridge's table was full, or past its high-water mark with this port at its fair share (lib/fdb.h, issue 29) */
	TR_CNT_ENCAP,     /* of tx: frames this overlay port sent encapsulated by the datapath (in XDP or at tc), straight into the underlay (lib/overlay.h), not through its vxlan device */
	TR_CNT_SUPPRESSED, /* ARP requests and neighbour solicitations from this port that the switch answered itself (neigh_suppress, lib/neigh.h): sent back, flooded nowhere */
	TR_CNT_GROUPED,    /* of flooded: multicast frames from this port sent only to their group's members and the multicast router ports (multicast_snooping, lib/snoop.h) */
	TR_CNT__MAX,
};

struct tr_port_stats {
	__u64 c[TR_CNT__MAX];      /* enum tr_counter */
	__u64 drops[TR_DROP__MAX]; /* enum tr_drop_reason */
};

/* FDB key: a MAC address in one VLAN of one bridge. */
struct tr_fdb_key {
	__u16 bridge;
	__u16 vlan; /* 0: untagged */
	__u8 mac[6];
};

enum tr_fdb_flags {
	TR_FDB_STATIC = 1, /* never aged, never overwritten by learning; a frame from another port with it as its source is dropped */
	TR_FDB_USER = 2,   /* with STATIC: added by `trestle fdb add`, not by the config */
};

struct tr_fdb_val {
	__u32 ifindex;
	__u16 slot;    /* port slot of ifindex, so forwarding needs no second lookup */
	__u16 flags;   /* enum tr_fdb_flags */
	__u64 seen_ns; /* CLOCK_MONOTONIC_COARSE of the last refresh */
};

/* A bridge port, keyed by ifindex. bridge 0: no port (an empty slot of the
 * port_index array). */
struct tr_port {
	__u16 bridge;
	__u16 slot;
	__u32 max_macs; /* 0: unlimited */
	__u16 pvid;     /* VLAN-aware bridge: the VLAN of untagged frames (access or native); 0: none */
	__u16 pad;
	__u32 flags;    /* enum tr_port_flags: 32 bits since issue 29 took the last of 16 (a
			 * pinned port of 16 bits is copied over by its field's name) */
	__u32 via_dev;  /* a TR_PORT_VIA entry: the interface of the port whose way in it is an
			 * end of (the overlay port's vxlan device), where trestle_via sends; 0 in a
			 * port's own entry */
};

enum tr_port_flags {
	TR_PORT_TRUNK = 1, /* carries the VLANs of its port_vlans bits tagged (pvid untagged) */
	TR_PORT_PATCH = 2, /* a patch port: frames sent to it continue in its peer's bridge (lib/patch.h) */
	TR_PORT_NO_LEARN = 4,      /* learning = false: no source is learned on it */
	TR_PORT_LIMIT_FORWARD = 8, /* at max_macs, a new source's frame goes on unlearned (else it is dropped) */
	TR_PORT_PROTECTED = 16,    /* exchanges no frame with another protected port */
	TR_PORT_NO_FLOOD = 32,     /* flood = false: no unknown unicast flooded out of it */
	TR_PORT_NO_MFLOOD = 64,    /* mcast_flood = false: no multicast flooded out of it */
	TR_PORT_NO_BFLOOD = 128,   /* bcast_flood = false: no broadcast flooded out of it */
	TR_PORT_STORM = 256,       /* its floods pass storm control (struct tr_storm) */
	TR_PORT_SPAN = 512,        /* a mirror's span port: sends copies, takes nothing in */
	TR_PORT_MIRROR_IN = 1024,  /* what it receives is copied to its mirror's span port */
	TR_PORT_MIRROR_OUT = 2048, /* what its bridge sends out of it is copied too */
	TR_PORT_LOCKED = 4096,     /* locked = true: takes only sources bound to it (its static entries), learns none */
	TR_PORT_IP_GUARD = 8192,   /* ip_guard = true: ARP, ND and IP sources must be its addresses (lib/ipguard.h) */
	TR_PORT_OVERLAY = 16384,   /* an overlay port (a vxlan device, docs/overlay.md): what leaves by it must fit its MTU (lib/overlay.h) */
	TR_PORT_NATIVE_TAGGED = 32768, /* native_tagged = true: a trunk sends its native VLAN (pvid) tagged too */
	TR_PORT_QINQ = 65536,      /* qinq = true: an access port takes frames with a second tag behind a priority tag or an S-tag */
	TR_PORT_VIA = 131072,      /* not a port: an end of an overlay port's xdp way in (docs/overlay.md), under the port's value: the end XDP copies go into (for the devmap programs' tr_port_of(egress_ifindex)) and its peer (trestle_via's ingress) */
	TR_PORT_RA_GUARD = 262144,   /* ra_guard = true: router advertisements and redirects from it are dropped (lib/ipguard.h) */
	TR_PORT_DHCP_GUARD = 524288, /* dhcp_guard = true: DHCP and DHCPv6 server messages from it are dropped (lib/ipguard.h) */
	TR_PORT_BPDU_GUARD = 1048576, /* bpdu_guard = true: a BPDU arriving blocks the port (lib/guard.h) */
	TR_PORT_BLOCKED = 2097152, /* blocked by the daemon (bpdu_guard, loop_detect): takes nothing in, sends nothing */
	TR_PORT_FAST_LEAVE = 4194304, /* fast_leave = true: a leave (IGMP, MLD) ends its membership at once; the daemon's, the datapath never reads it */
	TR_PORT_MCAST_ROUTER = 8388608, /* multicast_router = true: always a multicast router port of its snooping bridge; the daemon's, the datapath never reads it */
	TR_PORT_SNOOP = 16777216, /* made by the daemon: its bridge snoops (TR_BRIDGE_SNOOP), so the copies of its multicast floods ask the group table (lib/snoop.h) */
};

/* Storm control: the kinds of flood a port's ingress limits, each its own
 * rate; the limiter of (slot, kind) is at slot * TR_STORM_KINDS + kind of
 * the storm array. */
enum tr_storm_kind {
	TR_STORM_BROADCAST = 0,
	TR_STORM_MULTICAST = 1,
	TR_STORM_UNKNOWN = 2, /* unknown unicast */
	TR_STORM_KINDS = 3,
};

/* One limiter: the generic cell rate algorithm (a token bucket kept as one
 * time). A frame passes when the theoretical arrival time tat is at most
 * burst_ns ahead of now, and moves tat interval_ns on. interval_ns 0: no
 * limit. The control plane writes interval_ns and burst_ns; the datapath
 * tat, under the lock, which only floods of limited ports take. */
struct tr_storm {
	struct bpf_spin_lock lock;
	__u32 rate; /* frames a second, as configured: the control plane's; the datapath never reads it */
	__u64 tat;
	__u64 interval_ns;
	__u64 burst_ns;
};

/* A patch port, by slot: the port as a frame that enters its bridge through
 * it sees it, and the slot of its peer, the patch port of the other bridge.
 * port.bridge 0: no patch port. */
struct tr_patch {
	struct tr_port port;
	__u16 peer;
	__u16 pad;
};

/* What each CPU remembers of the learning table: the last source it found
 * in place and the last destination it looked up (see lib/fdb.h). A memo
 * holds only while the table's generations are those it was made under. */
struct tr_src_memo {
	__u8 mac[6];
	__u16 vlan;
	__u16 bridge;
	__u16 pad;
	__u32 ifindex; /* the port the source was found on */
	__u32 gen;     /* fdb_gen when made */
	__u32 mgen;    /* move_gen when made */
	__u64 expires; /* and before this: the entry's timestamp needs refreshing (struct tr_table_view's tick) */
};

struct tr_dst_memo {
	__u8 mac[6];
	__u16 vlan;
	__u16 bridge;
	__u16 slot;
	__u32 ifindex; /* where the destination lives */
	__u32 gen;
	__u32 mgen;
	__u32 hit; /* the last lookup that found a destination (tr_fdb_find) found it here, 0: in the table; a stream (lib/memo.h) */
};

/* A path across patch ports this CPU found a frame to take, from the
 * first patch it crossed to the port it left by (lib/patch.h). */
struct tr_path_memo {
	__u8 src[6];
	__u8 dst[6];
	__u16 vlan;
	__u16 first;    /* slot of the patch the frame left its first bridge by */
	__u16 out_slot; /* where it left the last one */
	__u16 nhops;    /* patches crossed */
	__u32 out_ifindex;
	__u32 gen;
	__u32 mgen;
	__u32 pad;
	__u64 expires;  /* learning along the path is refreshed from this tick on */
	__u16 hops[TR_MAX_PATCH_CHAIN]; /* the patches crossed, by the slot left by */
};

/* The whole decision for the last frame this CPU forwarded to one port of
 * a plain bridge, VLAN-aware or not (lib/memo.h): valid while nothing it
 * was made from has changed. */
struct tr_fwd_memo {
	__u8 src[6];
	__u8 dst[6];
	__u16 vlan;     /* the frame's outer VID as parsed (struct tr_frame's); TR_MEMO_NEIGH above it (lib/memo.h) */
	__u16 in_slot;
	__u32 ifindex;  /* ingress; 0: empty */
	__u32 out_slot;
	__u32 out_ifindex;
	__u32 cgen;     /* cfg_gen when made */
	__u32 gen;
	__u32 mgen;
	__u64 expires;  /* the source memo's: learning needs a look from then on */
	/* A VLAN-aware bridge's (tag not TR_MEMO_PLAIN): what the frame's tag
	 * becomes, the VLAN's counters, and whether its outer tag is 802.1Q. */
	__u16 tci;      /* TR_MEMO_PUSH: the tag pushed */
	__u16 vstats;   /* the VLAN's counters (struct tr_vlan_entry's idx) */
	__u8 tag;       /* enum tr_memo_tag (lib/memo.h) */
	__u8 ctag;      /* the frame came with an outer 802.1Q tag */
	__u16 pad;
};

/* What a frame's memos are made with and checked against (lib/fdb.h's
 * struct tr_table_view): the table's generations and the clock, as the
 * frame first read them. Kept in per-CPU memory (the cpu_cache value, a
 * walk's entry), not on the stack: as four values in registers they were
 * spilled across the pipeline's calls, in the frame at the head of the
 * walk's deepest chain of calls (docs/performance.md, "The stack"). */
struct tr_table_stamp {
	__u32 gen;  /* fdb_gen */
	__u32 mgen; /* move_gen */
	__u64 now;  /* CLOCK_MONOTONIC_COARSE, read when first needed: 0 until then */
	__u64 tick; /* what memos expire by (tr_tick) */
};

struct tr_cpu_cache {
	struct tr_fwd_memo fwd;
	struct tr_src_memo src;
	struct tr_dst_memo dst;
	/* Two paths, so that both directions of a conversation (TCP's data
	 * and its ACKs, on one CPU) stay remembered; a new one replaces the
	 * one not written last. */
	struct tr_path_memo path[2];
	__u32 path_next; /* the one to replace next */
	__u32 pad;
	struct tr_table_stamp at; /* the frame's (lib/fdb.h's tr_view_init), not a memo */
};

struct tr_bridge_port {
	__u32 ifindex;
	__u32 slot;
};

/* A bridge. The port list drives flooding in tc mode. Each bridge has two
 * copies in the bridges map and bridge_live says which one frames read: the
 * control plane writes the other and flips (lib/maps.h). The name is the
 * control plane's, so that pinned maps say which bridge is which after a
 * restart; the datapath never reads it. */
struct tr_bridge {
	__u32 nports;
	__u32 max_entries;
	__u32 flags; /* enum tr_bridge_flags */
	__u32 filter_set; /* TR_BRIDGE_FILTER: its rule set in filter_sets (the index of this copy) */
	struct tr_bridge_port ports[TR_MAX_BRIDGE_PORTS];
	char name[TR_NAME_LEN];
};

enum tr_bridge_flags {
	TR_BRIDGE_VLAN = 1,  /* VLAN-aware: frames are classified into its ports' VLANs */
	TR_BRIDGE_PATCH = 2, /* has patch ports: its floods may continue in other bridges */
	TR_BRIDGE_POLICY = 4, /* a port is protected or refuses a kind of flood: floods check each port */
	TR_BRIDGE_MIRROR = 8, /* a port is mirrored: its frames go through the walk (lib/patch.h), which adds the span ports */
	TR_BRIDGE_FILTER = 16, /* its filter is on: frames pass its rule set (lib/filter.h) */
	TR_BRIDGE_FILTER_OUT = 32, /* a rule matches the egress port: its floods take the walk, which filters each copy */
	TR_BRIDGE_OVERLAY = 64, /* has an overlay port: each address it learns is reported (TR_EVENT_LEARN), for FRR */
	TR_BRIDGE_LOOP_DETECT = 128, /* loop_detect: its ports' loop probes are recognised, dropped and reported (TR_EVENT_LOOP) */
	TR_BRIDGE_NEIGH_SUPPRESS = 256, /* neigh_suppress: ARP requests and neighbour solicitations its neighbour table knows the target of are answered by the switch (lib/neigh.h) */
	TR_BRIDGE_SNOOP = 512, /* multicast_snooping: IGMP and MLD messages are copied to the daemon, and multicast to a group in the group table goes to its ports only (lib/snoop.h) */
};

/* A mirrored port's mirror, by the port's slot: where the copies of what it
 * receives (TR_PORT_MIRROR_IN) and sends (TR_PORT_MIRROR_OUT) go. */
struct tr_mirror {
	__u32 span_ifindex;
	__u16 span_slot;
	__u16 flags; /* enum tr_mirror_flags */
};

enum tr_mirror_flags {
	TR_MIRROR_VLANS = 1, /* only frames of the VLANs in mirror_vlans (by the mirrored port's slot) */
};

/* The interface ports a walked bridge's copies may reach (its reach: the
 * ports of every bridge its patches join, with their mirrors' span ports),
 * by bridge id. When the walk chose all of them but the ingress and no copy
 * changes its tag (a mirrored frame in a 3-port bridge: the way out and the
 * span port), XDP sends the copies in one broadcast over the bridge's
 * reach_floods devmap, which runs no program (bpf/walk.h). Every bit 0: the
 * bridge has no such set (being written, or more than TR_MAX_BRIDGE_PORTS
 * ports), and the walk's copies go the general way. */
struct tr_reach {
	__u64 sel[TR_SEL_WORDS];          /* the ports, a bit each by slot */
	__u32 n;                          /* how many */
	__u32 pad;
	__u16 slots[TR_MAX_BRIDGE_PORTS]; /* their slots, where the copies are counted */
};

/* The VLANs a trunk port carries, one bit per VID, by port slot. */
struct tr_port_vlans {
	__u64 bits[TR_VLAN_IDS / 64];
};

/* A VLAN of a VLAN-aware bridge, at bridge * TR_VLAN_IDS + VID of the vlans
 * array: idx 0 is no VLAN. idx numbers its counters (vlan_stats); members is
 * how many up ports carry it, so a flood that reaches none is counted. */
struct tr_vlan_entry {
	__u16 idx;
	__u16 members;
};

/* Per-VLAN counters, one copy per CPU, by the VLAN's idx. */
/* A VLAN's counters, one copy per CPU, by index as the port counters are. */
enum tr_vlan_counter {
	TR_VCNT_RX_PACKETS = 0, /* frames classified into the VLAN */
	TR_VCNT_RX_BYTES,
	TR_VCNT_TX_PACKETS,     /* copies sent out of a port in the VLAN */
	TR_VCNT_TX_BYTES,
	TR_VCNT_FLOODED,        /* frames flooded within the VLAN */
	TR_VCNT__MAX,
};

struct tr_vlan_stats {
	__u64 c[TR_VCNT__MAX]; /* enum tr_vlan_counter */
};

/* ---- the filter stage (lib/filter.h) ---- */

enum tr_filter_limits {
	TR_FILTER_TUPLES = 32,      /* masks (rule shapes) of one rule set */
	TR_FILTER_ENTRIES = 65536,  /* classifier entries of all rule sets: a rule is one per port prefix it expands to */
	TR_FILTER_COUNTERS = 16384, /* rule counters of all rule sets */
	TR_FILTER_STATES = 262144,  /* established connections of all bridges (each bridge and port bounded within it: tr_filter_set) */
	TR_FILTER_OPENING = 8192,   /* connections not yet established, of each bridge that keeps state (its own LRU): least recently used goes first when full */
	TR_FILTER_EXTHDRS = 6,      /* IPv6 extension headers the filter reads through to the transport header */
	TR_FILTER_L4_MAX = 512,     /* the transport header's furthest offset the filter reads (from the Ethernet header) */
	TR_FILTER_CACHE = 256,      /* decisions each CPU remembers, by a hash of the frame's key */
	TR_STATE_COUNT_PORT = TR_MAX_BRIDGES + 1, /* filter_state_counts: a bridge's count at its id, a port's at this + its slot */
};

/* What the classifier matches a frame on; a rule's match is a mask over it
 * and the masked values. Addresses in network order (IPv4 in the first 4
 * bytes), everything else in host order; 0 where the frame has no such
 * field (ports of a frame that is not TCP or UDP). The rule set is part of
 * the key and never masked. */
struct tr_filter_key {
	__u16 set;       /* the rule set (the index of the bridge copy that names it); in a classifier entry, with its mask's index in the high byte, so that two masks' entries never meet */
	__u16 in;        /* ingress port slot */
	__u16 out;       /* egress port slot; 0: a flood, before any copy */
	__u16 ethertype; /* after VLAN tags */
	__u16 vlan;      /* the frame's VLAN (VLAN-aware bridges) */
	__u8 proto;      /* IP protocol (IPv6: the header after the extension headers) */
	__u8 icmp_type;
	__u16 sport;
	__u16 dport;
	__u8 smac[6];
	__u8 dmac[6];
	__u8 src[16];
	__u8 dst[16];
	__u8 l4;   /* enum tr_filter_l4: whether the transport header was read */
	__u8 pad[3]; /* to 64 bytes: the datapath masks, hashes and compares keys 8 bytes at a time */
};

/* A frame key's l4. A rule with port or ICMP keys matches only frames whose
 * transport header was read (TR_L4_READ); a block rule that names a
 * protocol, ports or an ICMP type is also one entry more, without them, that
 * matches TR_L4_UNREADABLE frames and blocks them (TR_FILTER_UNREAD): a
 * frame the filter cannot read is never passed by a port rule's silence. */
enum tr_filter_l4 {
	TR_L4_NONE = 0,       /* no transport header the rules read: not TCP, UDP or ICMP, or a non-first fragment (the first fragment carries it) */
	TR_L4_READ = 1,       /* read: ports, ICMP type */
	TR_L4_UNREADABLE = 2, /* one should be there and could not be read: TR_UNREAD_EXTHDRS, TR_UNREAD_TRUNCATED */
};

/* Why a frame's transport header could not be read, counted per bridge in
 * filter_unread. */
enum tr_filter_unread {
	TR_UNREAD_FRAGMENT = 0, /* a non-first IPv4 or IPv6 fragment */
	TR_UNREAD_EXTHDRS,      /* more than TR_FILTER_EXTHDRS IPv6 extension headers, or past TR_FILTER_L4_MAX */
	TR_UNREAD_TRUNCATED,    /* a header cut short, by the frame or by the IP datagram's length (a first fragment too short for it: RFC 1858's tiny fragment), or beyond what the datapath can load */
	TR_UNREAD__MAX,
};

/* A rule as the classifier holds it, at the masked key of each tuple it
 * is in: the lowest prio of the rules with that key decides. */
struct tr_filter_hit {
	__u32 prio;    /* the rule's position, from 0 */
	__u16 counter; /* its counters' index in filter_counts */
	__u16 flags;   /* enum tr_filter_flags */
};

enum tr_filter_flags {
	TR_FILTER_BLOCK = 1,      /* rule: blocks; set: the default blocks */
	TR_FILTER_KEEP_STATE = 2, /* rule: a frame it passes opens a connection; set: some rule does */
	TR_FILTER_UNREAD = 4,     /* rule: the entry of a block rule that matches frames whose transport header could not be read (TR_L4_UNREADABLE); it drops them as TR_DROP_UNREADABLE */
};

/* One mask of a rule set, with the lowest prio of its rules: a search in
 * prio order stops at the first tuple that cannot beat the best hit. */
struct tr_filter_tuple {
	struct tr_filter_key mask;
	__u32 min_prio;
	__u32 unreadable; /* its entries match only TR_L4_UNREADABLE frames (TR_FILTER_UNREAD): no other frame looks it up; and each mask 8-byte aligned */
};

/* A bridge's rule set, by the index of the bridge copy that names it, so
 * that a frame sees the rules of the bridge it reads, whole (lib/maps.h). */
struct tr_filter_set {
	__u32 ntuples;
	__u16 flags;       /* enum tr_filter_flags: what the default does; whether state is kept */
	__u16 def_counter; /* the default action's counters */
	__u16 state_counter; /* frames passed as part of a tracked connection */
	__u16 pad;
	__u32 gen;         /* changes with every write of the set: what each CPU's cache of decisions was made under */
	struct tr_filter_tuple tuples[TR_FILTER_TUPLES];
	__u32 max_states;      /* established connections of the bridge, at most */
	__u32 max_port_states; /* established connections opened from one port of it, at most */
};

struct tr_filter_count {
	__u64 packets;
	__u64 bytes;
};

/* A tracked connection, the same key for both directions: the endpoint
 * (address, port) that sorts lower is a. ICMP echo: both ports the id. */
struct tr_state_key {
	__u16 bridge;
	__u8 proto;
	__u8 family; /* 4 or 6 */
	__u16 aport;
	__u16 bport;
	__u8 a[16];
	__u8 b[16];
	__u16 vlan;  /* the frame's VLAN: the same addresses in another VLAN are another connection */
	__u16 pad;
};

/* How long a connection lives after its last frame, in seconds (pf's
 * defaults, rounded); seen_ns is refreshed at most every
 * TR_STATE_REFRESH_MS. */
enum tr_state_timeouts {
	TR_STATE_TCP_OPENING = 30,        /* not established: the handshake not seen both ways */
	TR_STATE_TCP_ESTABLISHED = 86400, /* TR_STATE_ESTABLISHED */
	TR_STATE_TCP_CLOSING = 60,        /* after a FIN or RST */
	TR_STATE_UDP = 60,
	TR_STATE_ICMP = 20,
	TR_STATE_REFRESH_MS = 1000,
};

enum tr_state_flags {
	TR_STATE_REPLIED = 1, /* a frame went the other way */
	TR_STATE_CLOSING = 2, /* TCP: a FIN or RST was seen */
	TR_STATE_A_OPENED = 4, /* a is the endpoint that opened it */
	TR_STATE_ESTABLISHED = 8, /* seen both ways (conntrack's ASSURED): TCP, the opener's ACK after the reply; a reply counts only from another port than the opener's */
};

struct tr_state {
	__u64 created_ns; /* bpf_ktime_get_ns() */
	__u64 seen_ns;    /* the last frame's, coarse (refreshed at most each TR_STATE_REFRESH_NS) */
	__u64 packets;    /* frames passed as part of it, both ways (the first included) */
	__u64 bytes;
	__u32 flags;      /* enum tr_state_flags */
	__u32 rule;       /* prio of the rule that opened it */
	__u16 port;       /* the slot of the port it was opened from */
	__u16 pad;
	__u32 pad2;
};

/* ---- capture (lib/capture.h, `trestle capture`) ---- */

enum tr_capture_limits {
	TR_CAPTURE_SNAP = 16384, /* bytes of a frame a capture keeps, at most */
};

/* Which frames of the port a capture takes: what it received from its host
 * (in), what the bridge sent out of it (out). A record has one of them. */
enum tr_capture_dir {
	TR_CAPTURE_IN = 1,
	TR_CAPTURE_OUT = 2,
};

/* What became of a captured frame. */
enum tr_capture_verdict {
	TR_CAPTURE_FORWARDED = 1, /* to one port (egress) */
	TR_CAPTURE_FLOODED = 2,   /* to the ports its flood reached */
	TR_CAPTURE_DROPPED = 3,   /* reason says why */
};

/* How an out frame's outer 802.1Q tag differs from the bytes it came in
 * with (a VLAN-aware bridge tags per egress port, lib/vlan.h). */
enum tr_capture_tag {
	TR_CAPTURE_TAG_KEEP = 0,  /* it leaves as it came */
	TR_CAPTURE_TAG_UNTAG = 1, /* without its outer 802.1Q tag, if it has one */
	TR_CAPTURE_TAG_VID = 2,   /* with an outer 802.1Q tag of VID vid: the tag it had, VID rewritten, or a new one with PCP 0 */
};

/* The running capture, written by the control plane; read only by the
 * programs loaded with capture_on. */
struct tr_capture_conf {
	__u32 ifindex; /* the port captured; 0: none */
	__u32 snaplen; /* bytes kept of each frame, at most TR_CAPTURE_SNAP */
	__u16 bridge;  /* its bridge */
	__u8 dirs;     /* enum tr_capture_dir bits */
	__u8 walks;    /* its bridge has patch ports: frames of other bridges may reach it */
};

/* One captured frame in the capture ring, followed by caplen bytes: the
 * frame as it came in (a tag the kernel held outside them not included). */
struct tr_capture_rec {
	__u64 ts_ns;   /* bpf_ktime_get_ns() when the frame came in */
	__u32 len;     /* the frame's bytes as it came in */
	__u32 caplen;  /* of them, the first caplen follow */
	__u32 egress;  /* forwarded: the ifindex it left by */
	__u16 meta_tci;   /* tc: a tag the kernel held outside the bytes, which */
	__be16 meta_proto; /* belongs after the addresses; TPID 0: none */
	__u16 vid;     /* tag TR_CAPTURE_TAG_VID: the VID it leaves with */
	__u8 dir;      /* enum tr_capture_dir: one of them */
	__u8 verdict;  /* enum tr_capture_verdict */
	__u8 reason;   /* dropped: enum tr_drop_reason (TR_DROP__MAX: none was noted) */
	__u8 tag;      /* out: enum tr_capture_tag */
	__u8 beyond;   /* dropped: in a bridge beyond a patch port, counted on the patch port it entered by */
	__u8 pad;
};

/* ---- events (lib/fdb.h; the daemon's log and `trestle events`) ---- */

/* ---- multicast snooping (lib/snoop.h) ---- */

enum tr_snoop_limits {
	TR_SNOOP_COPY = 512,        /* bytes of an IGMP or MLD message's IP packet copied to the daemon */
	TR_SNOOP_RING = 256 * 1024, /* bytes of the snoop ring: some 480 messages of slack for the daemon */
	TR_MAX_GROUPS = 16384,      /* group table entries of all bridges together */
};

/* A multicast group in one VLAN of a bridge (the VLAN as the FDB keys it).
 * addr: an IPv6 group, or an IPv4 one as ::ffff:a.b.c.d; unspecified
 * (:: for MLD, ::ffff:0.0.0.0 for IGMP): not a group but where the
 * bridge's messages of that protocol other than queries go once a querier
 * of it has been seen (its router ports). */
struct tr_group_key {
	__u16 bridge;
	__u16 vlan;
	__u8 addr[16];
};

/* The ports a group's frames go to, a bit each by slot: its members and
 * the bridge's multicast router ports, folded in by the daemon. */
struct tr_group {
	__u64 sel[TR_SEL_WORDS];
};

/* What a copy on the snoop ring is for. */
enum tr_snoop_kind {
	TR_SNOOP_GROUP = 0, /* an IGMP, MLD or PIM message of a snooping bridge (lib/snoop.h) */
	TR_SNOOP_NEIGH = 1, /* an ARP, ND or DHCP server message of a neigh_suppress bridge (lib/neigh.h, tr_neigh_copy) */
};

/* A control frame as it came in by a port, copied to the daemon: an IGMP,
 * MLD or PIM message of a snooping bridge, or an ARP, neighbour discovery
 * or DHCP server message of a neigh_suppress bridge: its Ethernet
 * addresses, and its payload after the tags (the ARP message, the IP
 * packet), the first len bytes (at most TR_SNOOP_COPY). */
struct tr_snoop_msg {
	__u16 bridge;
	__u16 vlan; /* the frame's FDB VLAN */
	__u16 slot; /* the port it came in by */
	__u16 len;  /* bytes of data */
	__u64 ts_ns; /* CLOCK_MONOTONIC_COARSE */
	__u16 proto; /* the payload's EtherType (ETH_P_ARP, ETH_P_IP, ETH_P_IPV6) */
	__u8 kind;   /* enum tr_snoop_kind */
	__u8 pad;
	__u8 eth[12]; /* the frame's destination and source MACs */
	__u8 data[TR_SNOOP_COPY];
};

enum tr_event_limits {
	TR_EVENT_RING = 256 * 1024, /* bytes of the event ring: 6,553 records of slack for the daemon */
	TR_EDGE_RING = 16 * 1024,   /* bytes of the edge ring (BPDUs, loop probes): 341 records, apart from the moves */
};

enum tr_event_type {
	TR_EVENT_MOVE = 1, /* a learned address moved to another port of its bridge */
	TR_EVENT_LEARN = 2, /* a new address learned in a bridge with an overlay port (from_slot 0) */
	TR_EVENT_BPDU = 3,  /* a BPDU on a bpdu_guard port (to_slot, to_ifindex; mac: its source) */
	TR_EVENT_LOOP = 4,  /* a loop probe heard on port to_slot (to_ifindex) of bridge: it left port from_slot of bridge from_ifindex of daemon probe */
};

/* One record of the event ring. Only the rare paths write one (a move, a
 * new address in a bridge with an overlay port), never the common one. */
struct tr_event {
	__u64 ts_ns;   /* CLOCK_MONOTONIC_COARSE, the learning table's clock */
	__u16 type;    /* enum tr_event_type */
	__u16 bridge;
	__u16 vlan;    /* 0: untagged */
	__u8 mac[6];
	__u16 from_slot; /* the port the address was on */
	__u16 to_slot;   /* and the one it is on now */
	__u32 from_ifindex;
	__u32 to_ifindex;
	__u32 probe;     /* TR_EVENT_LOOP: the probe's sender (struct tr_probe's) */
	__u32 pad;
};

/* ---- loop detection (lib/guard.h) ---- */

enum tr_probe_limits {
	TR_PROBE_ETHERTYPE = 0x9000, /* ECTP's, the loopback protocol's (as Cisco's keepalive loop detection): not 802's local experimental types, which tests and tools use */
	TR_PROBE_MAGIC = 0x74724c50, /* "trLP" */
};

/* A loop probe's payload, after its Ethernet header: the daemon sends one
 * out of each port of a loop_detect bridge every second (a packet socket on
 * the port's interface); a port that hears one its own daemon sent, of its
 * own bridge, is in a loop. Big-endian, as on the wire. */
struct tr_probe {
	__be32 magic;  /* TR_PROBE_MAGIC */
	__be32 sender; /* the daemon that sent it: a random number of each daemon */
	__be16 bridge; /* the bridge it left */
	__be16 slot;   /* by the port of this slot */
};

/* An address bound to an ip_guard port (lib/ipguard.h): the port's slot
 * and the address, IPv6 or IPv4 in its IPv4-mapped form (::ffff:a.b.c.d). */
struct tr_guard_key {
	__u32 slot;
	__u8 addr[16];
};

/* ---- the neighbour table (lib/neigh.h, `trestle neigh show`) ---- */

/* An IP address in one VLAN of one bridge: the VLAN as the FDB keys it (0
 * in a bridge that is not VLAN-aware, untagged). */
struct tr_neigh_key {
	__u16 bridge;
	__u16 vlan;
	__u8 family;   /* 4 or 6 */
	__u8 pad[3];
	__u8 addr[16]; /* IPv4: the first 4 bytes, the rest 0 */
};

/* Where an entry came from. */
enum tr_neigh_flags {
	TR_NEIGH_STATIC = 1,  /* the control plane's: a port's allowed_ips with its allowed_macs */
	TR_NEIGH_LEARNED = 2, /* seen in the port's ARP, neighbour discovery or DHCP (the daemon's, from the copies tr_neigh_copy sends it) */
};

/* The station that holds the address: its MAC and the port it is on. */
struct tr_neigh {
	__u8 mac[6];
	__u16 slot;    /* its port's slot: a request from that port is not answered */
	__u32 flags;   /* enum tr_neigh_flags */
	__u64 seen_ns; /* CLOCK_MONOTONIC_COARSE: when written (static) or last seen (learned) */
};

/* ---- VXLAN encapsulation in the datapath, XDP and tc (lib/overlay.h) ---- */

/* A remote station behind an overlay port: the FDB key's bridge, VLAN (0
 * in a bridge that is not VLAN-aware) and address. */
struct tr_encap_key {
	__u16 bridge;
	__u16 vlan;
	__u8 mac[6];
	__u16 pad;
};

/* The outer header's length: Ethernet (14), IPv4 (20, no options), UDP (8),
 * VXLAN (8); an enum so that the Go side reads it from here (bpf2go), as
 * the overlay's device MTU does (internal/overlay). */
enum tr_encap_limits {
	TR_ENCAP_HLEN = 50,
};

/* An encapsulation's flags. */
enum tr_encap_flags {
	/* The underlay device takes no XDP redirect (a veth whose peer has
	 * neither GRO nor an XDP program): frames from xdp ports take the way
	 * in; tc's, a socket buffer redirected, are encapsulated all the same. */
	TR_ENCAP_NO_XDP = 1,
};

/* How a frame to it leaves: the outer headers, written in front of the
 * frame, and the underlay device they go to. */
struct tr_encap {
	__u32 ifindex; /* the underlay device to redirect into */
	__u32 csum;    /* the outer IPv4 header's one's-complement sum of its 16-bit words
			* (big-endian, as on the wire) with tot_len and check 0, not folded:
			* the datapath adds tot_len per frame */
	__u8 hdr[TR_ENCAP_HLEN]; /* Ethernet, IPv4 (tot_len, check 0), UDP (source, len, check 0), VXLAN */
	__u16 flags;             /* enum tr_encap_flags */
};

#endif
