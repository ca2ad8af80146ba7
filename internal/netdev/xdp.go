// Package netdev tells what the daemon needs to know of a network device
// before it attaches to it: its type, whether it is a physical NIC, whether
// it is up and running, and what XDP actions its driver supports, as the
// kernel reports them (netlink's netdev family, the same source as
// `ynl --family netdev --dump dev-get`), never guessed from the device type.
package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// XDPFeatures are the XDP actions a driver supports (enum netdev_xdp_act in
// include/uapi/linux/netdev.h).
type XDPFeatures uint64

const (
	XDPBasic    XDPFeatures = 1 << 0 // XDP_ABORTED, DROP, PASS, TX: a native XDP program runs
	XDPRedirect XDPFeatures = 1 << 1 // the program may redirect frames it receives
	XDPNdoXmit  XDPFeatures = 1 << 2 // frames redirected at XDP into this device are sent (ndo_xdp_xmit)
	XDPZeroCopy XDPFeatures = 1 << 3 // AF_XDP zero copy
	XDPOffload  XDPFeatures = 1 << 4 // programs run on the NIC
	XDPRxSG     XDPFeatures = 1 << 5 // multi-buffer frames at receive
	XDPXmitSG   XDPFeatures = 1 << 6 // multi-buffer frames through ndo_xdp_xmit
)

var featureNames = []string{"basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg"}

func (f XDPFeatures) String() string {
	if f == 0 {
		return "none"
	}
	s := ""
	for i, n := range featureNames {
		if f&(1<<i) != 0 {
			if s != "" {
				s += ","
			}
			s += n
		}
	}
	return s
}

// Has says whether every feature of want is in f.
func (f XDPFeatures) Has(want XDPFeatures) bool { return f&want == want }

// The netdev generic netlink family (include/uapi/linux/netdev.h).
const (
	netdevFamily      = "netdev"
	netdevCmdDevGet   = 1
	netdevAttrIfindex = 1
	netdevAttrXDPFeat = 3

	nlaFNested       = 1 << 15
	nlaFNetByteorder = 1 << 14
)

// ErrNoNetdevFamily: the kernel predates the netdev family (6.3), so XDP
// features cannot be read.
var ErrNoNetdevFamily = errors.New("the kernel has no netdev netlink family (Linux 6.3 or later reports XDP features)")

var family struct {
	sync.Mutex
	id uint16
}

func familyID() (uint16, error) {
	family.Lock()
	defer family.Unlock()
	if family.id != 0 {
		return family.id, nil
	}
	f, err := netlink.GenlFamilyGet(netdevFamily)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, ErrNoNetdevFamily
		}
		return 0, fmt.Errorf("look up the netdev netlink family: %w", err)
	}
	family.id = f.ID
	return f.ID, nil
}

// ReadXDPFeatures asks the kernel what XDP actions the device with ifindex
// supports, in the calling thread's network namespace. A veth reports
// ndo-xmit only while its peer can receive the frames (an XDP program or GRO
// on the peer), so read it again after preparing a peer.
func ReadXDPFeatures(ifindex int) (XDPFeatures, error) {
	id, err := familyID()
	if err != nil {
		return 0, err
	}
	// NLM_F_ACK: the library reads until an ack or an error, and a doit
	// request without it gets its answer and no end marker.
	req := nl.NewNetlinkRequest(int(id), unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	req.AddData(genlHeader{cmd: netdevCmdDevGet, version: 1})
	req.AddData(nl.NewRtAttr(netdevAttrIfindex, nl.Uint32Attr(uint32(ifindex))))
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return 0, fmt.Errorf("read XDP features of ifindex %d: %w", ifindex, err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		if v, ok := findAttr(m[nl.SizeofGenlmsg:], netdevAttrXDPFeat); ok && len(v) >= 8 {
			return XDPFeatures(binary.NativeEndian.Uint64(v)), nil
		}
	}
	return 0, fmt.Errorf("read XDP features of ifindex %d: the kernel's answer has none", ifindex)
}

// findAttr walks netlink attributes (struct nlattr: u16 length, u16 type,
// payload, padded to 4 bytes) and returns the payload of the first of type
// typ. A short or malformed tail ends the walk.
func findAttr(b []byte, typ uint16) ([]byte, bool) {
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) &^ (nlaFNested | nlaFNetByteorder)
		if n < 4 || n > len(b) {
			return nil, false
		}
		if t == typ {
			return b[4:n], true
		}
		n = (n + 3) &^ 3
		if n > len(b) {
			return nil, false
		}
		b = b[n:]
	}
	return nil, false
}

// genlHeader is struct genlmsghdr with its reserved field zero. (The
// library's Genlmsg serializes 4 bytes from a 2-byte struct, so the reserved
// field carries whatever follows it in memory, and the kernel's strict
// validation then refuses the request now and then with EINVAL.)
type genlHeader struct{ cmd, version uint8 }

func (h genlHeader) Len() int          { return nl.SizeofGenlmsg }
func (h genlHeader) Serialize() []byte { return []byte{h.cmd, h.version, 0, 0} }
