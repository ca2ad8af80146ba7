package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// VXLAN encapsulation in the datapath (bpf/lib/overlay.h, tr_vxlan_encap in
// XDP, tr_vxlan_encap_tc at tc): a known unicast frame to a station behind
// an overlay port, whose outer headers the control plane wrote here, is
// encapsulated by the datapath and redirected straight into the underlay
// device; a station without an entry is reached through the overlay port's
// xdp way in (XDP) or its vxlan device (tc), as before. The datapath writes
// each frame's IPv4 tot_len and check, and the UDP source port (a hash of
// the inner headers) and length; the rest of the header is the entry's.

// EncapHdrLen is the outer header's length: Ethernet (14), IPv4 (20, no
// options), UDP (8), VXLAN (8), as bpf/types.h says (TR_ENCAP_HLEN).
const EncapHdrLen = tbpf.EncapHdrLen

// Offsets in the outer header of the fields the datapath writes per frame.
const (
	encapIP       = 14
	encapTotLen   = encapIP + 2
	encapIPCheck  = encapIP + 10
	encapUDP      = encapIP + 20
	encapUDPSport = encapUDP
	encapUDPLen   = encapUDP + 4
	encapUDPCheck = encapUDP + 6
)

// Encap is how a frame to one station leaves encapsulated: Hdr, written in
// front of the frame, into the underlay device Ifindex. Hdr's IPv4 tot_len
// and check, and its UDP source port, length and check, are the datapath's
// to write: SetEncap stores them as 0, and Encaps reads them so. NoXDP:
// the device takes no XDP redirect (a veth whose peer has neither GRO nor
// an XDP program), so only tc encapsulates (an skb redirect goes to any
// device); frames from xdp ports take the way in.
type Encap struct {
	Ifindex uint32
	Hdr     [EncapHdrLen]byte
	NoXDP   bool
}

// EncapKey is a station behind an overlay port as the FDB keys it: its
// bridge, VLAN (0 in a bridge that is not VLAN-aware) and address.
type EncapKey struct {
	Bridge, VLAN uint16
	MAC          [6]byte
}

// ErrEncapHeader: an Encap whose header is not Ethernet, IPv4 without
// options, UDP.
var ErrEncapHeader = errors.New("not an outer header of Ethernet, IPv4 (no options) and UDP")

// encapKey is the FDB's key of the station (fdbKey), as encaps keys it.
func encapKey(bridge, vlan uint16, mac net.HardwareAddr) (tbpf.TrestleTrEncapKey, error) {
	k, err := fdbKey(bridge, vlan, mac)
	return tbpf.TrestleTrEncapKey{Bridge: k.Bridge, Vlan: k.Vlan, Mac: k.Mac}, err
}

// encapSum is the one's-complement sum, not folded, of the IPv4 header's
// 16-bit big-endian words with tot_len and check taken as 0 (hdr's are):
// the datapath adds each frame's tot_len, folds, and complements.
func encapSum(hdr *[EncapHdrLen]byte) uint32 {
	var sum uint32
	for i := encapIP; i < encapUDP; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(hdr[i:]))
	}
	return sum
}

// SetEncap writes the outer header of frames to mac in the bridge's vlan
// (0: not VLAN-aware), replacing any. The header must be Ethernet with
// type IPv4, IPv4 of 20 bytes carrying UDP; its per-frame fields are
// cleared here, whatever e holds in them.
func (d *Datapath) SetEncap(bridge, vlan uint16, mac net.HardwareAddr, e Encap) (err error) {
	k, err := encapKey(bridge, vlan, mac)
	if err != nil {
		return err
	}
	h := e.Hdr
	if binary.BigEndian.Uint16(h[12:]) != 0x0800 || h[encapIP] != 0x45 || h[encapIP+9] != 17 {
		return fmt.Errorf("encap for %s in bridge %d VLAN %d: %w", mac, bridge, vlan, ErrEncapHeader)
	}
	if e.Ifindex == 0 {
		return fmt.Errorf("encap for %s in bridge %d VLAN %d: no underlay device (ifindex 0)", mac, bridge, vlan)
	}
	for _, off := range []int{encapTotLen, encapIPCheck, encapUDPSport, encapUDPLen, encapUDPCheck} {
		h[off], h[off+1] = 0, 0
	}
	v := tbpf.TrestleTrEncap{Ifindex: e.Ifindex, Csum: encapSum(&h)}
	copy(v.Hdr[:], h[:])
	if e.NoXDP {
		v.Flags = uint16(tbpf.TrestleTrEncapFlagsTR_ENCAP_NO_XDP)
	}
	var was tbpf.TrestleTrEncap
	err = d.objs.Encaps.Lookup(&k, &was)
	switch {
	case err == nil && was == v:
		return nil // as it is: the control plane rewrites its entries often
	case errors.Is(err, ebpf.ErrKeyNotExist):
		// A new station: the decision memo (bpf/lib/memo.h) may hold a
		// stream to it through the way in, which would stay there. Every
		// memo is forgotten (cfg_gen); a changed entry is read by each
		// frame, none is remembered.
		d.configChanging()
		defer d.configChanged(&err)
	case err != nil:
		return fmt.Errorf("read encap for %s in bridge %d VLAN %d: %w", mac, bridge, vlan, err)
	}
	if err = d.objs.Encaps.Update(&k, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write encap for %s in bridge %d VLAN %d: %w", mac, bridge, vlan, err)
	}
	return nil
}

// DelEncap removes the outer header of frames to mac in the bridge's vlan:
// its frames take the way in again. One that is not there is no error.
func (d *Datapath) DelEncap(bridge, vlan uint16, mac net.HardwareAddr) error {
	k, err := encapKey(bridge, vlan, mac)
	if err != nil {
		return err
	}
	if err := d.objs.Encaps.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete encap for %s in bridge %d VLAN %d: %w", mac, bridge, vlan, err)
	}
	return nil
}

// Encaps reads every station's outer header, as SetEncap stored it.
func (d *Datapath) Encaps() (map[EncapKey]Encap, error) {
	out := map[EncapKey]Encap{}
	var k tbpf.TrestleTrEncapKey
	var v tbpf.TrestleTrEncap
	it := d.objs.Encaps.Iterate()
	for it.Next(&k, &v) {
		e := Encap{Ifindex: v.Ifindex, NoXDP: v.Flags&uint16(tbpf.TrestleTrEncapFlagsTR_ENCAP_NO_XDP) != 0}
		copy(e.Hdr[:], v.Hdr[:])
		out[EncapKey{Bridge: k.Bridge, VLAN: k.Vlan, MAC: k.Mac}] = e
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read encaps: %w", err)
	}
	return out, nil
}
