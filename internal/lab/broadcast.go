package lab

import (
	"context"
	"fmt"
	"net"
	"time"
)

// TestFlood: broadcast from h1 to every other host, throughput.
const TestFlood = "flood"

// floodKind is the flood test: the RFC 2544 search for broadcast frames
// from h1, every frame due at every other host, at each frame size (on a
// bridge of 3 hosts or more: none on the straight path).
type FloodTest struct{}

func (FloodTest) Name() string           { return TestFlood }
func (FloodTest) Needs(s Scenario) Needs { return Needs{Phase: PerSize, AllHosts: true} }
func (FloodTest) Estimate(s Scenario, _ Spec) time.Duration {
	return time.Duration(len(s.Sizes)) * (3*trialTime(s.Timing) + s.Timing.Search.Confirm)
}

func (FloodTest) Run(ctx context.Context, u *UnitRun) error {
	rig, size := u.Rig, u.Size.Size
	if len(rig.T.Hosts) <= 2 {
		return nil
	}
	n := 0
	mix, err := size.Mix()
	if err != nil {
		return err
	}
	tm := u.S.Timing.ndrOnly()
	to := []int{}
	for i := 1; i < len(rig.T.Hosts); i++ {
		to = append(to, i)
	}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	spec := TrialSpec{From: 0, To: to, Mix: mix, DstMAC: bcast, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
	sr, trials, err := rig.SearchTrials(ctx, spec, tm, func(st SearchTrial) {
		n++
		u.Status(fmt.Sprintf("broadcast %s to %d ports, trial %d: %s offered, loss %.3f%%", size.Label(), len(to), n, pps(st.Offered), 100*st.Loss))
	})
	if err != nil {
		return err
	}
	u.Add(searchResult(u.Base, TestFlood, string(size), sr, trials))
	return nil
}
