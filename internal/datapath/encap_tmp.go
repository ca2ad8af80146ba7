package datapath

// TEMPORARY stand-in for the datapath half (branch encap); removed at merge.

import "net"

type EncapKey struct {
	Bridge, VLAN uint16
	MAC          [6]byte
}

type Encap struct {
	Ifindex uint32
	Hdr     [50]byte
}

func (d *Datapath) SetEncap(bridge, vlan uint16, mac net.HardwareAddr, e Encap) error { return nil }
func (d *Datapath) DelEncap(bridge, vlan uint16, mac net.HardwareAddr) error          { return nil }
func (d *Datapath) Encaps() (map[EncapKey]Encap, error)                               { return nil, nil }
