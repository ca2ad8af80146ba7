// Package tcp is the lab's iperf3 TCP kind.
package tcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestOverlay) }

// Kind is iperf3 TCP from h1 to h2, between the hosts' own stacks once
// the generator and sinks have stopped, on every DUT: a run at each of
// Streams.
type Kind struct{ Streams []int }

func (Kind) Name() string { return lab.TestTCP }

func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.Stack} }

func (k Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	return time.Duration(len(k.Streams)) * (s.IperfTime + time.Second)
}

func (k Kind) TestsLine(lab.Scenario) string {
	if len(k.Streams) == 0 {
		return ""
	}
	return "; iperf3 TCP streams " + strings.Trim(fmt.Sprint(k.Streams), "[]")
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	secs := lab.IperfRunTime(u.S)
	for _, n := range k.Streams {
		u.Status(fmt.Sprintf("iperf3 TCP, %d stream(s), %v", n, secs))
		ir, err := u.Rig.Iperf(ctx, 0, 1, "tcp", n, secs, "")
		r := u.Base
		r.Test, r.Param, r.Unit = lab.TestTCP, fmt.Sprintf("streams=%d", n), "bit/s"
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Value, r.Iperf, r.CPU = ir.BitsPerSec, &ir, ir.CPU
		}
		u.Add(r)
	}
	return nil
}

// Flags: --streams, the stream counts (of a scenario with a TCP test; in
// another it is ignored).
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{{
		Name: "streams", Type: lab.FlagInts, Lo: 1, Hi: 128, Usage: "iperf3 TCP stream counts, comma-separated",
		Set: lab.Sets(func(t Kind, n []int) (Kind, error) { t.Streams = n; return t, nil }),
	}}
}
