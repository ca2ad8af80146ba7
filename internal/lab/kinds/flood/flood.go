// Package flood is the lab's the flood kind: broadcast from h1 to every other host.
package flood

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestB2B) }

// floodKind is the flood test: the RFC 2544 search for broadcast frames
// from h1, every frame due at every other host, at each frame size (on a
// bridge of 3 hosts or more: none on the straight path).
type Kind struct{}

func (Kind) Name() string { return lab.TestFlood }

func (Kind) Needs(s lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.PerSize, AllHosts: true} }

func (Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	return time.Duration(len(s.Sizes)) * (3*lab.TrialTime(s.Timing) + s.Timing.Search.Confirm)
}

func (Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	rig, size := u.Rig, u.Size.Size
	if len(rig.T.Hosts) <= 2 {
		return nil
	}
	n := 0
	mix, err := size.Mix()
	if err != nil {
		return err
	}
	tm := u.S.Timing.NDROnly()
	to := []int{}
	for i := 1; i < len(rig.T.Hosts); i++ {
		to = append(to, i)
	}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	spec := lab.TrialSpec{From: 0, To: to, Mix: mix, DstMAC: bcast, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
	sr, trials, err := rig.SearchTrials(ctx, spec, tm, func(st lab.SearchTrial) {
		n++
		u.Status(fmt.Sprintf("broadcast %s to %d ports, trial %d: %s offered, loss %.3f%%", size.Label(), len(to), n, lab.PPSText(st.Offered), 100*st.Loss))
	})
	if err != nil {
		return err
	}
	u.Add(lab.ResultOfSearch(u.Base, lab.TestFlood, string(size), sr, trials))
	return nil
}
