package datapath

import (
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// A capture in a bridge with a mirror (p1 mirrored both ways to the span
// port p3): the span port's capture has each copy it sends, and p2's the
// frame it gets, though both left through the walk.
func TestCaptureMirror(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		err := r.ns.Do(func() error {
			ports := []PortInfo{
				{Ifindex: r.port[1], Bridge: 1, Slot: 1, MirrorIn: true, MirrorOut: true, MirrorTo: r.port[3], MirrorToSlot: 3},
				{Ifindex: r.port[2], Bridge: 1, Slot: 2},
				{Ifindex: r.port[3], Bridge: 1, Slot: 3, Span: true},
			}
			for _, p := range ports {
				if err := r.dp.SetPort(p); err != nil {
					return err
				}
			}
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Reach: ports, Mirror: true})
		})
		if err != nil {
			t.Fatal(err)
		}
		span := r.startCapture(3, true, true)
		r.capRun(t, span, []capCase{
			{"broadcast from the mirrored port", 1, ipv4(bcast, macA), &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 3}},
			{"unicast to the mirrored port", 2, ipv4(macA, macB), &wantRec{dir: CaptureOut, verdict: VerdictForwarded, egress: 3}},
			{"from the span port", 3, ipv4(macA, macC), &wantRec{dir: CaptureIn, verdict: VerdictDropped, reason: tbpf.TrestleTrDropReasonTR_DROP_SPAN}},
		})
		span.Close()
		r.capRun(t, r.startCapture(2, true, true), []capCase{
			{"unicast from the mirrored port", 1, ipv4(macB, macA), &wantRec{dir: CaptureOut, verdict: VerdictForwarded, egress: 2}},
		})
	})
}
