package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	labbpf "github.com/trestle/trestle/internal/lab/bpf"
)

// floorPeerFeatures are what trestle's daemon makes of the peer of each
// port it attaches at XDP (internal/daemon/peers.go), so that the floor
// and trestle:xdp are measured with the same hosts: GRO on, for XDP
// redirects into the veth to be delivered; TX checksum and VLAN tag
// offload off, for the hosts' TCP and tags to survive a redirect.
var floorPeerFeatures = map[string]bool{
	"rx-gro": true, "tx-checksum-ip-generic": false,
	"tx-vlan-hw-insert": false, "tx-vlan-stag-hw-insert": false,
}

// floorDUT is the floor: on every bridge of the topology, which must have
// two ports, a bare XDP program on each port sends every frame out of the
// other one through a devmap (bpf/lab/floor.c). It is the least an XDP bridge
// must do there, so no XDP bridge can be faster on the same topology: the
// ratio of a bridge to it is the cost of the bridge's own work, where the
// ratio to direct also holds a veth hop that every bridge has. It neither
// learns nor floods: a bridge of 3 or more ports has no floor of this kind,
// and the RFC 2889 tests pass it by. A chain of bridges joined by veth
// pairs gets one redirect per bridge, the floor of that chain.
//
// floor:tc is its twin at tc ingress (tcx), the least a bridge attached at
// tc must do: bpf_redirect() to the other port, as trestle's tc mode sends
// unicast. Its hosts are left as they are, as trestle's daemon leaves the
// peers of tc ports in a bridge without xdp ports.
type floorDUT struct {
	tc    bool
	objs  []*labbpf.FloorObjects
	links []link.Link
	set   map[string]string
}

func (d *floorDUT) Name() string {
	if d.tc {
		return "floor:tc"
	}
	return "floor"
}
func (*floorDUT) Learns() bool                  { return false }
func (d *floorDUT) Settings() map[string]string { return d.set }

// floorRefusal says why the floor cannot stand in for the bridges of a
// scenario with hosts hosts ("": it can).
func floorRefusal(hosts int) string {
	if hosts > 2 {
		return fmt.Sprintf("the floor redirects each port's frames to one other port: a bridge of %d ports (one per host) has flooding and learning to do, which it has no floor for", hosts)
	}
	return ""
}

func (d *floorDUT) Setup(ctx context.Context, t *Topo, env *Env) (err error) {
	if t.Mirror == nil {
		if why := floorRefusal(len(t.Hosts)); why != "" {
			return fmt.Errorf("%w: %s", ErrUnavailable, why)
		}
	}
	for _, br := range t.Bridges {
		if n := len(br.Ports); n != 2 && (t.Mirror == nil || n != 3) {
			return fmt.Errorf("floor: bridge %s has %d ports: it redirects between two (three with a mirror's span port)", br.Name, len(br.Ports))
		}
	}
	switch {
	case len(t.Patches) > 0:
		return errors.New("floor: no patch ports: a chain's bridges are joined by veth pairs")
	case t.Filter != nil:
		return errors.New("floor: a bare redirect has no filter")
	case t.VLANs != nil && t.Mirror != nil:
		return errors.New("floor: VLANs or a mirror, not both")
	}
	// A Setup that fails gets no Teardown: undo what it did.
	defer func() {
		if err != nil {
			if terr := d.Teardown(ctx); terr != nil {
				err = fmt.Errorf("%w; and then: %v", err, terr)
			}
		}
	}()
	plan, err := floorPlan(t, d.tc)
	if err != nil {
		return err
	}
	d.set = map[string]string{"program": floorProgramText(t, d.tc)}
	for _, h := range t.Hosts {
		if d.tc {
			break // as trestle leaves the peers of its tc ports
		}
		changed, err := changeFeatures(h.NS, h.If, floorPeerFeatures)
		if err != nil {
			return fmt.Errorf("floor: peer of %s: %w", h.Port, err)
		}
		if changed != "" {
			d.set["peer of "+h.Port] = fmt.Sprintf("%s in %s: %s (as trestle does on the peers of its xdp ports)", h.If, h.NS.Name, changed)
		}
	}
	err = t.DUT.Do(func() error {
		for _, p := range plan {
			if err := d.attach(p); err != nil {
				return err
			}
			d.set["port "+p.in] = p.says
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", d.Name(), err)
	}
	return nil
}

// floorPort is what the floor does on one port: which program, to which
// ports, with which tag.
type floorPort struct {
	in   string
	out  []string // one port, or two for the mirror's broadcast
	prog string   // labbpf.FloorProgTrestleFloor*
	tci  uint16   // the tag trestle_floor_push pushes
	says string   // for the record
	tc   bool     // at tc ingress, not XDP
}

// floorTwins are the tc programs of the XDP ones.
var floorTwins = map[string]string{
	labbpf.FloorProgTrestleFloor:       labbpf.FloorProgTrestleFloorTc,
	labbpf.FloorProgTrestleFloorMirror: labbpf.FloorProgTrestleFloorTcMirror,
	labbpf.FloorProgTrestleFloorPush:   labbpf.FloorProgTrestleFloorTcPush,
	labbpf.FloorProgTrestleFloorPop:    labbpf.FloorProgTrestleFloorTcPop,
}

// atTC makes p its tc twin: the same frames to the same ports.
func (p floorPort) atTC() floorPort {
	p.prog, p.tc = floorTwins[p.prog], true
	p.says = "tc: " + strings.TrimPrefix(p.says, "xdp (native): ")
	if len(p.out) > 1 {
		p.says = fmt.Sprintf("tc: every frame cloned to %s, then to %s", p.out[1], p.out[0])
	}
	return p
}

// floorPlan is the program of each port: on a plain topology every frame
// to the bridge's other port; with @vlan the access port pushes its VLAN's
// tag and the trunk takes it off; with @mirror the mirrored port and the
// other one each send every frame to the other and to the span port (the
// mirror is both ways), and the span port only receives. tc: the same, by
// the tc twins of the programs.
func floorPlan(t *Topo, tc bool) ([]floorPort, error) {
	var plan []floorPort
	for _, br := range t.Bridges {
		if m := t.Mirror; m != nil {
			if len(m.Ports) != 1 || !slices.Contains(br.Ports, m.Ports[0]) || !slices.Contains(br.Ports, m.To) || m.Ports[0] == m.To {
				return nil, fmt.Errorf("floor: mirror %s: one port of bridge %s mirrored to another", m.Name, br.Name)
			}
			var pair []string
			for _, p := range br.Ports {
				if p != m.To {
					pair = append(pair, p)
				}
			}
			for i, in := range pair {
				out := []string{pair[1-i], m.To}
				plan = append(plan, floorPort{in: in, out: out, prog: labbpf.FloorProgTrestleFloorMirror,
					says: fmt.Sprintf("xdp (native): every frame to %s and %s (one devmap broadcast)", out[0], out[1])})
			}
			continue
		}
		for i, in := range br.Ports {
			out := br.Ports[1-i]
			p := floorPort{in: in, out: []string{out}, prog: labbpf.FloorProgTrestleFloor, says: "xdp (native): every frame to " + out}
			if t.VLANs != nil {
				pin, pout := t.VLANs[in], t.VLANs[out]
				switch {
				case pin.Access != 0 && len(pout.Trunk) > 0 && slices.Contains(pout.Trunk, pin.Access):
					p.prog, p.tci = labbpf.FloorProgTrestleFloorPush, pin.Access
					p.says = fmt.Sprintf("xdp (native): every frame tagged %d, to %s", pin.Access, out)
				case pout.Access != 0 && len(pin.Trunk) > 0 && slices.Contains(pin.Trunk, pout.Access):
					p.prog, p.tci = labbpf.FloorProgTrestleFloorPop, pout.Access
					p.says = fmt.Sprintf("xdp (native): frames tagged %d untagged, to %s; every other frame dropped", pout.Access, out)
				default:
					return nil, fmt.Errorf("floor: ports %s (%s) and %s (%s): the VLAN floor is an access port and a trunk that carries its VLAN", in, pin, out, pout)
				}
			}
			plan = append(plan, p)
		}
	}
	if tc {
		for i := range plan {
			plan[i] = plan[i].atTC()
		}
	}
	return plan, nil
}

// floorProgramText describes the floor's program for the record.
func floorProgramText(t *Topo, tc bool) string {
	switch {
	case tc && t.Mirror != nil:
		return "bpf/floor.c at tc ingress (tcx): every frame cloned to the span port (bpf_clone_redirect) and out of the bridge's other port (bpf_redirect), ifindexes constant in a copy of the program per port"
	case tc && t.VLANs != nil:
		return "bpf/floor.c at tc ingress (tcx): from the access port, an 802.1Q tag pushed (bpf_skb_vlan_push) and out of the trunk; from the trunk, the access VLAN's tag taken off (bpf_skb_vlan_pop) and out of the access port, other frames dropped; bpf_redirect() to an ifindex constant in a copy of the program per port"
	case tc:
		return "bpf/floor.c at tc ingress (tcx): every frame out of the bridge's other port, bpf_redirect() to an ifindex constant in a copy of the program per port"
	case t.Mirror != nil:
		return "bpf/floor.c: every frame out of the two other ports of the bridge, bpf_redirect_map() with BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS on a devmap of two entries (a copy of program and map per port)"
	case t.VLANs != nil:
		return "bpf/floor.c: from the access port, an 802.1Q tag pushed (bpf_xdp_adjust_head, the addresses moved) and out of the trunk; from the trunk, the access VLAN's tag taken off and out of the access port, other frames dropped; bpf_redirect_map() on a devmap of one entry (a copy of program and map per port)"
	}
	return "bpf/floor.c: every frame out of the bridge's other port, bpf_redirect_map() on a devmap of one entry (a copy of program and map per port)"
}

// attach loads a copy of the floor's programs whose devmap (tc: whose
// constants) sends to p.out and attaches p.prog to p.in, in native XDP
// mode or at tc ingress; the caller is in the DUT's namespace.
func (d *floorDUT) attach(p floorPort) error {
	li, err := netlink.LinkByName(p.in)
	if err != nil {
		return fmt.Errorf("port %s: %w", p.in, err)
	}
	var outs []uint32
	for _, o := range p.out {
		lo, err := netlink.LinkByName(o)
		if err != nil {
			return fmt.Errorf("port %s: %w", o, err)
		}
		outs = append(outs, uint32(lo.Attrs().Index))
	}
	spec, err := labbpf.LoadFloor()
	if err != nil {
		return fmt.Errorf("load the floor program: %w", err)
	}
	if err := spec.Variables[labbpf.FloorVarPushTci].Set(p.tci); err != nil {
		return fmt.Errorf("load the floor program: %w", err)
	}
	if p.tc {
		// The way out first, then the mirror's span port.
		for i, v := range []string{labbpf.FloorVarTcOut, labbpf.FloorVarTcSpan}[:len(outs)] {
			if err := spec.Variables[v].Set(outs[i]); err != nil {
				return fmt.Errorf("load the floor program: %w", err)
			}
		}
	}
	objs := &labbpf.FloorObjects{}
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("load the floor program: %+v", ve)
		}
		return fmt.Errorf("load the floor program: %w", err)
	}
	d.objs = append(d.objs, objs)
	m := objs.Egress
	if len(outs) > 1 {
		m = objs.Copies
	}
	for i, o := range outs {
		if p.tc {
			break
		}
		if err := m.Put(uint32(i), o); err != nil {
			return fmt.Errorf("floor devmap of %s: egress %s: %w", p.in, p.out[i], err)
		}
	}
	prog := map[string]*ebpf.Program{
		labbpf.FloorProgTrestleFloor:         objs.TrestleFloor,
		labbpf.FloorProgTrestleFloorMirror:   objs.TrestleFloorMirror,
		labbpf.FloorProgTrestleFloorPush:     objs.TrestleFloorPush,
		labbpf.FloorProgTrestleFloorPop:      objs.TrestleFloorPop,
		labbpf.FloorProgTrestleFloorTc:       objs.TrestleFloorTc,
		labbpf.FloorProgTrestleFloorTcMirror: objs.TrestleFloorTcMirror,
		labbpf.FloorProgTrestleFloorTcPush:   objs.TrestleFloorTcPush,
		labbpf.FloorProgTrestleFloorTcPop:    objs.TrestleFloorTcPop,
	}[p.prog]
	var l link.Link
	if p.tc {
		l, err = link.AttachTCX(link.TCXOptions{Program: prog, Interface: li.Attrs().Index, Attach: ebpf.AttachTCXIngress})
	} else {
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: li.Attrs().Index, Flags: link.XDPDriverMode})
	}
	if err != nil {
		return fmt.Errorf("attach the floor program to %s (%s): %w", p.in, map[bool]string{true: "tc ingress", false: "native XDP"}[p.tc], err)
	}
	d.links = append(d.links, l)
	return nil
}

// Teardown detaches every port's program and unloads it.
func (d *floorDUT) Teardown(context.Context) error {
	var errs []error
	for _, l := range d.links {
		errs = append(errs, l.Close())
	}
	for _, o := range d.objs {
		errs = append(errs, o.Close())
	}
	d.links, d.objs = nil, nil
	return errors.Join(errs...)
}

// changeFeatures sets the features of an interface that are not as want
// says, and says what it changed: "rx-gro on (was off), ..." ("": none).
// Features the interface does not have are left out.
func changeFeatures(ns *NS, dev string, want map[string]bool) (string, error) {
	keys := SortedKeys(want)
	cur, err := ns.FeatureState(dev, keys...)
	if err != nil {
		return "", err
	}
	change := map[string]bool{}
	var said []string
	for _, k := range keys {
		if v, ok := cur[k]; ok && v != want[k] {
			change[k] = want[k]
			said = append(said, fmt.Sprintf("%s %s (was %s)", k, onOff(want[k]), onOff(v)))
		}
	}
	if len(change) == 0 {
		return "", nil
	}
	if err := ns.Features(dev, change); err != nil {
		return "", err
	}
	return strings.Join(said, ", "), nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
