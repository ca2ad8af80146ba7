package bpf

import (
	"fmt"
	"net/netip"
)

// Short names for the generated types of bpf/types.h.
type (
	PortStats  = TrestleTrPortStats
	FDBKey     = TrestleTrFdbKey
	FDBVal     = TrestleTrFdbVal
	Port       = TrestleTrPort
	Bridge     = TrestleTrBridge
	BridgePort = TrestleTrBridgePort
	DropReason = TrestleTrDropReason
	PortVLANs  = TrestleTrPortVlans
	VLANEntry  = TrestleTrVlanEntry
	VLANStats  = TrestleTrVlanStats
	Patch      = TrestleTrPatch
	Storm      = TrestleTrStorm
	Mirror     = TrestleTrMirror
	Reach      = TrestleTrReach
	GuardKey   = TrestleTrGuardKey
	Neigh      = TrestleTrNeigh
	NeighKey   = TrestleTrNeighKey
	Group      = TrestleTrGroup
	GroupKey   = TrestleTrGroupKey
	SnoopMsg   = TrestleTrSnoopMsg

	FilterKey   = TrestleTrFilterKey
	FilterHit   = TrestleTrFilterHit
	FilterSet   = TrestleTrFilterSet
	FilterCount = TrestleTrFilterCount
	StateKey    = TrestleTrStateKey
	State       = TrestleTrState
)

const (
	MaxBridges     = int(TrestleTrLimitsTR_MAX_BRIDGES)
	MaxPorts       = int(TrestleTrLimitsTR_MAX_PORTS)
	MaxPortsAll    = MaxPorts - 1 // ports of all bridges together: slot 0 is no port
	MaxBridgePorts = int(TrestleTrLimitsTR_MAX_BRIDGE_PORTS)
	SelWords       = int(TrestleTrLimitsTR_SEL_WORDS)
	NumDrops       = int(TrestleTrDropReasonTR_DROP__MAX)
	PortDirect     = uint32(TrestleTrLimitsTR_PORT_DIRECT)
	NameLen        = int(TrestleTrLimitsTR_NAME_LEN)
	VLANIDs        = int(TrestleTrLimitsTR_VLAN_IDS)
	MaxVLANs       = int(TrestleTrLimitsTR_MAX_VLANS) - 1 // indexes 1..8191; 0 is no VLAN

	FDBStatic = uint16(TrestleTrFdbFlagsTR_FDB_STATIC)
	FDBUser   = uint16(TrestleTrFdbFlagsTR_FDB_USER)

	PortTrunk  = uint32(TrestleTrPortFlagsTR_PORT_TRUNK)
	BridgeVLAN = uint32(TrestleTrBridgeFlagsTR_BRIDGE_VLAN)

	PortPatch           = uint32(TrestleTrPortFlagsTR_PORT_PATCH)
	PortNoLearn         = uint32(TrestleTrPortFlagsTR_PORT_NO_LEARN)
	PortLimitForward    = uint32(TrestleTrPortFlagsTR_PORT_LIMIT_FORWARD)
	PortProtected       = uint32(TrestleTrPortFlagsTR_PORT_PROTECTED)
	PortNoFlood         = uint32(TrestleTrPortFlagsTR_PORT_NO_FLOOD)
	PortNoMcastFlood    = uint32(TrestleTrPortFlagsTR_PORT_NO_MFLOOD)
	PortNoBcastFlood    = uint32(TrestleTrPortFlagsTR_PORT_NO_BFLOOD)
	BridgePolicy        = uint32(TrestleTrBridgeFlagsTR_BRIDGE_POLICY)
	BridgePatch         = uint32(TrestleTrBridgeFlagsTR_BRIDGE_PATCH)
	PatchIfindex        = uint32(TrestleTrPatchIfindexTR_PATCH_IFINDEX)
	PortStorm           = uint32(TrestleTrPortFlagsTR_PORT_STORM)
	PortSpan            = uint32(TrestleTrPortFlagsTR_PORT_SPAN)
	PortMirrorIn        = uint32(TrestleTrPortFlagsTR_PORT_MIRROR_IN)
	PortMirrorOut       = uint32(TrestleTrPortFlagsTR_PORT_MIRROR_OUT)
	PortLocked          = uint32(TrestleTrPortFlagsTR_PORT_LOCKED)
	PortOverlay         = uint32(TrestleTrPortFlagsTR_PORT_OVERLAY)
	PortIPGuard         = uint32(TrestleTrPortFlagsTR_PORT_IP_GUARD)
	MaxGuardIPs         = int(TrestleTrLimitsTR_MAX_GUARD_IPS)
	PortNativeTagged    = uint32(TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED)
	PortQinQ            = uint32(TrestleTrPortFlagsTR_PORT_QINQ)
	PortVia             = uint32(TrestleTrPortFlagsTR_PORT_VIA)
	StormKinds          = int(TrestleTrStormKindTR_STORM_KINDS)
	MirrorVLANs         = uint16(TrestleTrMirrorFlagsTR_MIRROR_VLANS)
	BridgeMirror        = uint32(TrestleTrBridgeFlagsTR_BRIDGE_MIRROR)
	BridgeOverlay       = uint32(TrestleTrBridgeFlagsTR_BRIDGE_OVERLAY)
	BridgeLoopDetect    = uint32(TrestleTrBridgeFlagsTR_BRIDGE_LOOP_DETECT)
	PortBlocked         = PortFlag(TrestleTrPortFlagsTR_PORT_BLOCKED)
	ProbeEtherType      = uint16(TrestleTrProbeLimitsTR_PROBE_ETHERTYPE)
	ProbeMagic          = uint32(TrestleTrProbeLimitsTR_PROBE_MAGIC)
	MaxPatchChain       = int(TrestleTrLimitsTR_MAX_PATCH_CHAIN)
	FDBHeadroom         = int(TrestleTrLimitsTR_FDB_HEADROOM)
	MaxNeigh            = int(TrestleTrLimitsTR_MAX_NEIGH)
	NeighStatic         = TrestleTrNeighFlagsTR_NEIGH_STATIC
	NeighLearned        = TrestleTrNeighFlagsTR_NEIGH_LEARNED
	BridgeNeighSuppress = uint32(TrestleTrBridgeFlagsTR_BRIDGE_NEIGH_SUPPRESS)
	BridgeSnoop         = uint32(TrestleTrBridgeFlagsTR_BRIDGE_SNOOP)
	PortSnoop           = PortFlag(TrestleTrPortFlagsTR_PORT_SNOOP)
	MaxGroups           = int(TrestleTrSnoopLimitsTR_MAX_GROUPS)
	SnoopCopy           = int(TrestleTrSnoopLimitsTR_SNOOP_COPY)

	BridgeFilter    = uint32(TrestleTrBridgeFlagsTR_BRIDGE_FILTER)
	BridgeFilterOut = uint32(TrestleTrBridgeFlagsTR_BRIDGE_FILTER_OUT)
	FilterBlock     = uint16(TrestleTrFilterFlagsTR_FILTER_BLOCK)
	FilterKeepState = uint16(TrestleTrFilterFlagsTR_FILTER_KEEP_STATE)
	FilterUnread    = uint16(TrestleTrFilterFlagsTR_FILTER_UNREAD)
	L4Read          = uint8(TrestleTrFilterL4TR_L4READ)
	L4Unreadable    = uint8(TrestleTrFilterL4TR_L4UNREADABLE)
	FilterTuples    = int(TrestleTrFilterLimitsTR_FILTER_TUPLES)
	FilterEntries   = int(TrestleTrFilterLimitsTR_FILTER_ENTRIES)
	FilterCounters  = int(TrestleTrFilterLimitsTR_FILTER_COUNTERS)
	FilterStates    = int(TrestleTrFilterLimitsTR_FILTER_STATES)
	FilterOpening   = int(TrestleTrFilterLimitsTR_FILTER_OPENING)
	FilterExtHdrs   = int(TrestleTrFilterLimitsTR_FILTER_EXTHDRS)
	StateCountPort  = int(TrestleTrFilterLimitsTR_STATE_COUNT_PORT)
	// EncapHdrLen is the outer header of a frame the datapath encapsulates
	// (in XDP or at tc): Ethernet, IPv4 (no options), UDP, VXLAN.
	EncapHdrLen      = int(TrestleTrEncapLimitsTR_ENCAP_HLEN)
	UnreadReasons    = int(TrestleTrFilterUnreadTR_UNREAD__MAX)
	StateReplied     = uint32(TrestleTrStateFlagsTR_STATE_REPLIED)
	StateClosing     = uint32(TrestleTrStateFlagsTR_STATE_CLOSING)
	StateAOpened     = uint32(TrestleTrStateFlagsTR_STATE_A_OPENED)
	StateEstablished = uint32(TrestleTrStateFlagsTR_STATE_ESTABLISHED)
)

// PortFlag is a flag of a port's entry (enum tr_port_flags).
type PortFlag = TrestleTrPortFlags

// PortPolicy is what a port's keys ask of its entry in the port maps, as
// the configuration fills it and the datapath writes it, the daemon
// passing it on untouched: the flags of its keys (each row of the
// configuration's port table that sets one names it, from the enum here),
// and with TR_PORT_IP_GUARD the addresses its frames may come from.
type PortPolicy struct {
	Flags    PortFlag
	GuardIPs []netip.Addr // sorted, each once, IPv4 ones in their 4-byte form
}

// Has says whether every flag of f is set.
func (p PortPolicy) Has(f PortFlag) bool { return p.Flags&f == f }

// With is p with the flags of f set (on) or cleared.
func (p PortPolicy) With(f PortFlag, on bool) PortPolicy {
	if on {
		p.Flags |= f
	} else {
		p.Flags &^= f
	}
	return p
}

// dropNames are the drop reasons as they appear in `trestle stats` and metric
// labels. The generated enum is the source of truth; a test checks that every
// value has a name here.
var dropNames = map[DropReason]string{
	TrestleTrDropReasonTR_DROP_RUNT:             "runt",
	TrestleTrDropReasonTR_DROP_ETHERTYPE:        "bad_ethertype",
	TrestleTrDropReasonTR_DROP_BAD_SRC:          "bad_source",
	TrestleTrDropReasonTR_DROP_RESERVED:         "reserved_address",
	TrestleTrDropReasonTR_DROP_HAIRPIN:          "hairpin",
	TrestleTrDropReasonTR_DROP_MAC_LIMIT:        "mac_limit",
	TrestleTrDropReasonTR_DROP_TABLE_FULL:       "table_full",
	TrestleTrDropReasonTR_DROP_NO_PORT:          "no_port",
	TrestleTrDropReasonTR_DROP_NO_EGRESS:        "no_egress",
	TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED:    "vlan_untagged",
	TrestleTrDropReasonTR_DROP_VLAN_TAGGED:      "vlan_tagged_on_access",
	TrestleTrDropReasonTR_DROP_VLAN_NOT_CARRIED: "vlan_not_carried",
	TrestleTrDropReasonTR_DROP_VLAN_EGRESS:      "vlan_egress",
	TrestleTrDropReasonTR_DROP_NO_BRIDGE:        "no_bridge",
	TrestleTrDropReasonTR_DROP_PATCH_CHAIN:      "patch_chain",
	TrestleTrDropReasonTR_DROP_PROTECTED:        "protected",
	TrestleTrDropReasonTR_DROP_STORM_BROADCAST:  "storm_broadcast",
	TrestleTrDropReasonTR_DROP_STORM_MULTICAST:  "storm_multicast",
	TrestleTrDropReasonTR_DROP_STORM_UNKNOWN:    "storm_unknown_unicast",
	TrestleTrDropReasonTR_DROP_FILTERED:         "filtered",
	TrestleTrDropReasonTR_DROP_STATE_FULL:       "state_full",
	TrestleTrDropReasonTR_DROP_SPAN:             "span_ingress",
	TrestleTrDropReasonTR_DROP_LOCKED:           "locked",
	TrestleTrDropReasonTR_DROP_SRC_STATIC:       "src_static",
	TrestleTrDropReasonTR_DROP_OVERLAY_MTU:      "overlay_mtu",
	TrestleTrDropReasonTR_DROP_IPGUARD_ARP:      "ip_guard_arp",
	TrestleTrDropReasonTR_DROP_IPGUARD_ND:       "ip_guard_nd",
	TrestleTrDropReasonTR_DROP_IPGUARD_IP:       "ip_guard_ip",
	TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED:    "double_tagged",
	TrestleTrDropReasonTR_DROP_UNREADABLE:       "unreadable",
	TrestleTrDropReasonTR_DROP_RA_GUARD:         "ra_guard",
	TrestleTrDropReasonTR_DROP_DHCP_GUARD:       "dhcp_guard",
	TrestleTrDropReasonTR_DROP_BPDU_GUARD:       "bpdu_guard",
	TrestleTrDropReasonTR_DROP_PORT_BLOCKED:     "port_blocked",
	TrestleTrDropReasonTR_DROP_LOOP_PROBE:       "loop_probe",
}

func (r DropReason) String() string {
	if n, ok := dropNames[r]; ok {
		return n
	}
	return fmt.Sprintf("drop_%d", uint32(r))
}

// DropNames lists every drop reason's name in enum order.
func DropNames() []string {
	names := make([]string, NumDrops)
	for i := range names {
		names[i] = DropReason(i).String()
	}
	return names
}
