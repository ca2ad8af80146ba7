package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab/sink"
	"github.com/trestle/trestle/internal/netnsutil"
)

// The @vlan variant's set-up, seed 002's: h1's port is an access port of
// VLANAccess (h1 sends and receives untagged frames), h2's a trunk carrying
// VLANTrunk (h2's frames are tagged VLANAccess on the wire both ways); any
// further host is on an access port of VLANAccess. VLAN 20 is on the trunk
// so that a DUT must tell VLANs apart there, not just tag everything.
const VLANAccess = 10

// VLANTrunk is what the @vlan set-up's trunk carries.
var VLANTrunk = []uint16{10, 20}

// PortVLAN is a DUT port's place in VLANs: an access port of one VLAN
// (untagged on the wire) or a trunk carrying several (tagged).
type PortVLAN struct {
	Access uint16
	Trunk  []uint16
}

func (p PortVLAN) String() string {
	if p.Access != 0 {
		return fmt.Sprintf("access port of VLAN %d (untagged)", p.Access)
	}
	return "trunk carrying " + joinVIDs(p.Trunk, ", ") + " (tagged)"
}

func joinVIDs(vids []uint16, sep string) string {
	var s []string
	for _, v := range vids {
		s = append(s, fmt.Sprint(v))
	}
	return strings.Join(s, sep)
}

// SetVLANs gives a one-bridge topology the @vlan set-up: it records each
// DUT port's place (t.VLANs, for the DUT to configure) and makes h2 a host
// on the trunk. Such a kernel has no 802.1Q devices (CONFIG_VLAN_8021Q), so
// h2's stack cannot tag by itself: small tc programs on its interface tag
// what it sends and untag what it receives (TagHost), and its interface's
// tx-vlan-hw-insert goes off, so that a tag is in the frame's bytes on the
// wire and not only in the socket buffer's metadata, which a veth peer's
// XDP program (the DUT's, or Open vSwitch's AF_XDP socket) would not see.
func (t *Topo) SetVLANs() error {
	if t.DUT == nil || len(t.Bridges) != 1 || len(t.Hosts) < 2 {
		return errors.New("vlan: needs one bridge with a port for each host (not the straight path, not a chain)")
	}
	t.VLANs = map[string]PortVLAN{}
	for i, h := range t.Hosts {
		if i != 1 {
			t.VLANs[h.Port] = PortVLAN{Access: VLANAccess}
			continue
		}
		t.VLANs[h.Port] = PortVLAN{Trunk: VLANTrunk}
		if err := h.NS.Features(h.If, map[string]bool{"tx-vlan-hw-insert": false}); err != nil {
			return fmt.Errorf("vlan: tags in the frame bytes of %s: %w", h.NS.Name, err)
		}
		c, err := TagHost(h.NS.Path, h.If, VLANAccess)
		if err != nil {
			return fmt.Errorf("vlan: %s: %w", h.NS.Name, err)
		}
		t.Net.hold(c)
		h.VLAN = VLANAccess
	}
	return nil
}

// VLANSettings describes t's VLANs for a unit's record.
func (t *Topo) VLANSettings() string {
	var parts []string
	for _, h := range t.Hosts {
		pv, ok := t.VLANs[h.Port]
		if !ok {
			continue
		}
		s := fmt.Sprintf("%s (%s) %s", h.Port, h.NS.Name[strings.LastIndex(h.NS.Name, "-")+1:], pv)
		if h.VLAN != 0 {
			s += fmt.Sprintf("; its host tags its frames %d (tx-vlan-hw-insert off; tc programs push the tag on egress, pop it on ingress)", h.VLAN)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// tcxNext is TCX_NEXT: the packet goes on as if no program had run.
const tcxNext = -1

// __sk_buff's fields the tagging programs read.
const (
	skbVLANPresent = 20
	skbVLANTCI     = 24
)

// be16 is a 16-bit value as a program's native load of its network-order
// bytes reads it (htons).
func be16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

// tagPrograms are the egress program, which tags every frame not already
// tagged with vid, and the ingress one, which takes vid's tag off (the
// stack has moved it into the socket buffer's metadata by then; frames of
// other VLANs keep theirs, and the stack drops them as for another host).
func tagPrograms(vid uint16) (egress, ingress asm.Instructions) {
	egress = asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R1, skbVLANPresent, asm.Word),
		asm.JNE.Imm(asm.R2, 0, "next"),
		// A tag in the bytes (a frame sent tagged on purpose) stays alone.
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 12),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -8),
		asm.Mov.Imm(asm.R4, 2),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "next"),
		asm.LoadMem(asm.R2, asm.RFP, -8, asm.Half),
		asm.JEq.Imm(asm.R2, be16(unix.ETH_P_8021Q), "next"),
		asm.JEq.Imm(asm.R2, be16(unix.ETH_P_8021AD), "next"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, be16(unix.ETH_P_8021Q)),
		asm.Mov.Imm(asm.R3, int32(vid)),
		asm.FnSkbVlanPush.Call(),
		asm.Mov.Imm(asm.R0, tcxNext).WithSymbol("next"),
		asm.Return(),
	}
	ingress = asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R1, skbVLANPresent, asm.Word),
		asm.JEq.Imm(asm.R2, 0, "next"),
		asm.LoadMem(asm.R2, asm.R1, skbVLANTCI, asm.Word),
		asm.And.Imm(asm.R2, 0x0fff),
		asm.JNE.Imm(asm.R2, int32(vid), "next"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnSkbVlanPop.Call(),
		asm.Mov.Imm(asm.R0, tcxNext).WithSymbol("next"),
		asm.Return(),
	}
	return egress, ingress
}

// TagHost makes the interface dev (in the namespace at nsPath; "" for the
// caller's) a host port of VLAN vid on a trunk, without an 802.1Q device:
// a tc program at egress tags what the stack and packet sockets send that
// is not tagged yet, one at ingress untags vid's frames. Frames sent at
// XDP (the lab's generator) pass neither: they must carry their tag. For
// the tag to be in the bytes on the wire, turn dev's tx-vlan-hw-insert
// off. Closing the result detaches both programs.
func TagHost(nsPath, dev string, vid uint16) (io.Closer, error) {
	if vid == 0 || vid > 4094 {
		return nil, fmt.Errorf("tag %s: VLAN %d: not 1..4094", dev, vid)
	}
	eg, in := tagPrograms(vid)
	var links tcLinks
	err := netnsutil.Do(nsPath, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("tag %s: %w", dev, err)
		}
		for _, p := range []struct {
			name   string
			insns  asm.Instructions
			attach ebpf.AttachType
		}{{"vlan_tag", eg, ebpf.AttachTCXEgress}, {"vlan_untag", in, ebpf.AttachTCXIngress}} {
			prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: p.name, Type: ebpf.SchedCLS, Instructions: p.insns, License: "Dual BSD/GPL"})
			if err != nil {
				return fmt.Errorf("tag %s: load %s: %w", dev, p.name, err)
			}
			lk, err := link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: prog, Attach: p.attach})
			prog.Close() // the link holds it
			if err != nil {
				return fmt.Errorf("tag %s: attach %s: %w", dev, p.name, err)
			}
			links = append(links, lk)
		}
		return nil
	})
	if err != nil {
		links.Close()
		return nil, err
	}
	return links, nil
}

type tcLinks []link.Link

func (ls tcLinks) Close() error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// vlanCheckType marks the check's frames (IEEE local experimental 2).
const vlanCheckType = 0x88b6

// checkTypes are the EtherTypes a check frame may have: the lab's own, and
// IPv4 for the filter check's UDP datagrams.
var checkTypes = map[uint16]bool{vlanCheckType: true, unix.ETH_P_IP: true}

// capture is a packet socket on a host's interface that reports each
// frame's VLAN, from the bytes or from the kernel's auxiliary data (a
// receiving stack moves the tag into the socket buffer's metadata).
type capture struct {
	fd int
	h  *Host
}

func openCapture(h *Host) (*capture, error) {
	c := &capture{fd: -1, h: h}
	err := h.NS.Do(func() error {
		l, err := netlink.LinkByName(h.If)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		c.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index})
	})
	if err != nil {
		c.close()
		return nil, fmt.Errorf("capture on %s: %w", h.NS.Name, err)
	}
	return c, nil
}

func (c *capture) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

func htons(v uint16) uint16 { return uint16(be16(v)) }

// seen is a check frame as it arrived: its VLAN (0: untagged).
type seen struct {
	vid    uint16
	tagged bool
}

// wait reads until a check frame with marker arrives, or d passes
// (ok false).
func (c *capture) wait(marker []byte, d time.Duration) (seen, bool, error) {
	deadline := time.Now().Add(d)
	buf := make([]byte, 2048)
	oob := make([]byte, 256)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return seen{}, false, nil
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return seen{}, false, err
		}
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return seen{}, false, fmt.Errorf("capture on %s: %w", c.h.NS.Name, err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := buf[:n]
		var s seen
		if len(f) >= 18 && binary.BigEndian.Uint16(f[12:]) == unix.ETH_P_8021Q {
			s = seen{vid: binary.BigEndian.Uint16(f[14:]) & 0x0fff, tagged: true}
			f = append(f[:12:12], f[16:]...)
		} else if aux, ok := auxVLAN(oob[:oobn]); ok {
			s = seen{vid: aux, tagged: true}
		}
		if len(f) < 14 || !checkTypes[binary.BigEndian.Uint16(f[12:])] || !bytes.Contains(f[14:], marker) {
			continue
		}
		return s, true, nil
	}
}

// auxVLAN is the tag in a packet socket's PACKET_AUXDATA, if it holds one.
func auxVLAN(oob []byte) (uint16, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < 20 {
			continue
		}
		status := binary.NativeEndian.Uint32(m.Data[0:])
		tci := binary.NativeEndian.Uint16(m.Data[16:])
		if status&unix.TP_STATUS_VLAN_VALID != 0 || tci != 0 {
			return tci & 0x0fff, true
		}
	}
	return 0, false
}

// tagged is the mix of frames m tagged: each 4 bytes longer.
func tagged(m frame.Mix) frame.Mix {
	t := frame.Mix{Sizes: make([]int, len(m.Sizes)), Weights: m.Weights}
	for i, n := range m.Sizes {
		t.Sizes[i] = n + 4
	}
	return t
}

// checkFrame is a check frame from src to dst, tagged vid in its bytes if
// vid is not 0, carrying marker.
func checkFrame(dst, src net.HardwareAddr, vid uint16, marker []byte) []byte {
	e := frame.Eth{Dst: dst, Src: src, Type: vlanCheckType, Payload: marker, Pad: true}
	if vid != 0 {
		e.Tags = []frame.Tag{frame.CTag(vid)}
	}
	return e.MustBytes()
}

// frameStep is one frame of a check before measuring (the VLAN check,
// the mirror check) and what must become of it.
type frameStep struct {
	what     string
	from, to int    // host indexes: the sender, and the host that must (or must not) see it
	dst      int    // the host the frame is addressed to; -1: broadcast
	sendVID  uint16 // a tag the frame carries in its bytes when sent (0: the host's own doing)
	wantVID  uint16 // the VLAN it must arrive in at to (0: untagged)
	wantNone bool   // it must not arrive at all
	// udp makes the frame a UDP datagram (the filter check) in place of
	// one of the lab's check EtherType (nil).
	udp *udpCheck
}

// vlanSteps: h2's frame teaches the DUT where h2 is, in VLAN 10, before h1
// sends to h2's address.
var vlanSteps = []frameStep{
	{what: "h2's broadcast (tagged 10 by its host) reaches h1 untagged", from: 1, to: 0, dst: -1, wantVID: 0},
	{what: "h1's frame to h2 reaches h2 tagged 10", from: 0, to: 1, dst: 1, wantVID: VLANAccess},
	{what: "h1's broadcast reaches h2 tagged 10", from: 0, to: 1, dst: -1, wantVID: VLANAccess},
	{what: "h2's broadcast tagged 20 does not reach h1 (VLAN 10)", from: 1, to: 0, dst: -1, sendVID: 20, wantNone: true},
}

// CheckVLANs checks, before anything is measured, that the DUT forwards
// as its VLAN set-up says: a DUT that ignored it would be measured
// forwarding untagged frames and show no cost at all. It returns what it
// found, for the unit's record.
func (r *Rig) CheckVLANs(ctx context.Context) (string, error) {
	if len(r.T.Hosts) < 2 || r.T.VLANs == nil {
		return "", errors.New("vlan check: the topology has no VLANs")
	}
	return r.checkFrames(ctx, "vlan check", vlanSteps)
}

// checkFrames sends each step's frame and watches for it at the step's
// receiver; name heads its errors. It returns the steps that passed.
func (r *Rig) checkFrames(ctx context.Context, name string, steps []frameStep) (string, error) {
	// A DUT at XDP hands its frames to a veth peer that must have NAPI:
	// pass-through sinks give the hosts an XDP program for the check.
	caps := map[int]*capture{}
	for _, st := range steps {
		for _, i := range []int{st.from, st.to} {
			if _, ok := caps[i]; ok {
				continue
			}
			h := r.T.Hosts[i]
			s, err := sink.Start(sink.Options{Dev: h.If, NetNS: h.NS.Path, Pass: true, MaxFlows: 1})
			if err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
			defer s.Close()
			c, err := openCapture(h)
			if err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
			defer c.close()
			caps[i] = c
		}
	}
	nonce := make([]byte, 6)
	rand.Read(nonce)
	var done []string
	for i, st := range steps {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		from := r.T.Hosts[st.from]
		marker := []byte(fmt.Sprintf("trestle lab: %s %s %d", name, hex.EncodeToString(nonce), i))
		dst := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		if st.dst >= 0 {
			dst = r.T.Hosts[st.dst].MAC
		}
		f := checkFrame(dst, from.MAC, st.sendVID, marker)
		if st.udp != nil {
			var err error
			if f, err = udpCheckFrame(dst, from.MAC, st.udp, marker); err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := sendFrame(from, f); err != nil {
			return "", fmt.Errorf("%s: send from %s: %w", name, from.NS.Name, err)
		}
		wait := 2 * time.Second
		if st.wantNone {
			wait = 300 * time.Millisecond
		}
		got, ok, err := caps[st.to].wait(marker, wait)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		switch {
		case st.wantNone && ok:
			return "", fmt.Errorf("%s failed: %s: it arrived (%s)", name, st.what, got)
		case st.wantNone:
		case !ok:
			return "", fmt.Errorf("%s failed: %s: it did not arrive in %v", name, st.what, wait)
		case got.vid != st.wantVID || got.tagged != (st.wantVID != 0):
			return "", fmt.Errorf("%s failed: %s: it arrived %s", name, st.what, got)
		}
		done = append(done, st.what)
	}
	return "passed: " + strings.Join(done, "; "), nil
}

func (s seen) String() string {
	if !s.tagged {
		return "untagged"
	}
	return fmt.Sprintf("tagged %d", s.vid)
}
