// Package udp is the lab's iperf3 UDP kind.
package udp

import (
	"context"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestTCP) }

// Kind is iperf3 UDP from h1 to h2, between the hosts' own stacks once
// the generator and sinks have stopped, on every DUT: a run offered Rate
// (iperf3's -b: "1G"); what arrived, what was lost, the jitter.
type Kind struct{ Rate string }

func (Kind) Name() string { return lab.TestUDP }

func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.Stack} }

func (Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration { return s.IperfTime + time.Second }

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	secs := lab.IperfRunTime(u.S)
	u.Status(fmt.Sprintf("iperf3 UDP at %s, %v", k.Rate, secs))
	ir, err := u.Rig.Iperf(ctx, 0, 1, "udp", 1, secs, k.Rate)
	param := "rate=" + k.Rate
	// Three figures: what arrived, what was lost, and the jitter.
	for _, f := range []struct {
		test, unit string
		v          float64
	}{{lab.TestUDP, "bit/s", ir.BitsPerSec}, {lab.TestUDP + "-loss", "% lost", ir.LostPercent}, {lab.TestUDP + "-jitter", "ms", ir.JitterMs}} {
		r := u.Base
		r.Test, r.Param, r.Unit = f.test, param, f.unit
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Value, r.CPU = f.v, ir.CPU
			if f.test == lab.TestUDP {
				r.Iperf = &ir
			}
			if f.test == lab.TestUDP+"-loss" && ir.Lost > 0 {
				r.Note = fmt.Sprintf("%d of %d lost datagrams were dropped by the receiving socket's full buffer (UDP RcvbufErrors), not on the path", min(ir.RcvbufErrors, ir.Lost), ir.Lost)
			}
		}
		u.Add(r)
	}
	return nil
}

// Flags: --udp-rate, the offered rate (of a scenario with a UDP test; in
// another it is ignored).
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{{
		Name: "udp-rate", Type: lab.FlagString, Usage: "iperf3 UDP offered rate (e.g. 1G)",
		Set: lab.Sets(func(t Kind, v string) (Kind, error) { t.Rate = v; return t, nil }),
	}}
}
