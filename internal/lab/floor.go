package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	tbpf "github.com/trestle/trestle/internal/bpf"
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
// other one through a devmap (bpf/floor.c). It is the least an XDP bridge
// must do there, so no XDP bridge can be faster on the same topology: the
// ratio of a bridge to it is the cost of the bridge's own work, where the
// ratio to direct also holds a veth hop that every bridge has. It neither
// learns nor floods: a bridge of 3 or more ports has no floor of this kind,
// and the RFC 2889 tests pass it by. A chain of bridges joined by veth
// pairs gets one redirect per bridge, the floor of that chain.
type floorDUT struct {
	objs  []*tbpf.FloorObjects
	links []link.Link
	set   map[string]string
}

func (*floorDUT) Name() string                  { return "floor" }
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
	if why := floorRefusal(len(t.Hosts)); why != "" {
		return fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	for _, br := range t.Bridges {
		if len(br.Ports) != 2 {
			return fmt.Errorf("floor: bridge %s has %d ports: it redirects between two", br.Name, len(br.Ports))
		}
	}
	switch {
	case len(t.Patches) > 0:
		return errors.New("floor: no patch ports: a chain's bridges are joined by veth pairs")
	case t.VLANs != nil || t.Mirror != nil || t.Filter != nil:
		return errors.New("floor: a bare redirect has no VLANs, mirrors or filter")
	}
	// A Setup that fails gets no Teardown: undo what it did.
	defer func() {
		if err != nil {
			if terr := d.Teardown(ctx); terr != nil {
				err = fmt.Errorf("%w; and then: %v", err, terr)
			}
		}
	}()
	d.set = map[string]string{"program": "bpf/floor.c: every frame out of the bridge's other port, bpf_redirect_map() on a devmap of one entry (a copy of program and map per port)"}
	for _, h := range t.Hosts {
		changed, err := changeFeatures(h.NS, h.If, floorPeerFeatures)
		if err != nil {
			return fmt.Errorf("floor: peer of %s: %w", h.Port, err)
		}
		if changed != "" {
			d.set["peer of "+h.Port] = fmt.Sprintf("%s in %s: %s (as trestle does on the peers of its xdp ports)", h.If, h.NS.Name, changed)
		}
	}
	err = t.DUT.Do(func() error {
		for _, br := range t.Bridges {
			for i, in := range br.Ports {
				out := br.Ports[1-i]
				if err := d.attach(in, out); err != nil {
					return err
				}
				d.set["port "+in] = "xdp (native): every frame to " + out
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	return nil
}

// attach loads a copy of the floor program whose devmap sends to out and
// attaches it to in, in native XDP mode; the caller is in the DUT's
// namespace.
func (d *floorDUT) attach(in, out string) error {
	li, err := netlink.LinkByName(in)
	if err != nil {
		return fmt.Errorf("port %s: %w", in, err)
	}
	lo, err := netlink.LinkByName(out)
	if err != nil {
		return fmt.Errorf("port %s: %w", out, err)
	}
	objs := &tbpf.FloorObjects{}
	if err := tbpf.LoadFloorObjects(objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("load the floor program: %+v", ve)
		}
		return fmt.Errorf("load the floor program: %w", err)
	}
	d.objs = append(d.objs, objs)
	if err := objs.Egress.Put(uint32(0), uint32(lo.Attrs().Index)); err != nil {
		return fmt.Errorf("floor devmap of %s: egress %s: %w", in, out, err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: objs.TrestleFloor, Interface: li.Attrs().Index, Flags: link.XDPDriverMode})
	if err != nil {
		return fmt.Errorf("attach the floor program to %s (native XDP): %w", in, err)
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
	keys := sortedKeys(want)
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
