package lab

import (
	"context"
	"fmt"
	"strings"
	"time"
)

const (
	TestTCP = "tcp" // iperf3 TCP, h1 to h2, per stream count
	TestUDP = "udp" // iperf3 UDP, h1 to h2: rate, loss, jitter
)

// The iperf3 kinds, between the hosts' own stacks once the generator and
// sinks have stopped, on every DUT: TCP from h1 to h2 at each stream count
// (TCPTest.Streams), and UDP at UDPTest.Rate (what arrived, what was
// lost, the jitter).
type (
	// TCPTest: a run at each of Streams.
	TCPTest struct{ Streams []int }
	// UDPTest: a run offered Rate (iperf3's -b: "1G").
	UDPTest struct{ Rate string }
)

func (TCPTest) Name() string         { return TestTCP }
func (UDPTest) Name() string         { return TestUDP }
func (TCPTest) Needs(Scenario) Needs { return Needs{Phase: Stack} }
func (UDPTest) Needs(Scenario) Needs { return Needs{Phase: Stack} }

func (k TCPTest) Estimate(s Scenario, _ Spec) time.Duration {
	return time.Duration(len(k.Streams)) * (s.IperfTime + time.Second)
}

func (UDPTest) Estimate(s Scenario, _ Spec) time.Duration { return s.IperfTime + time.Second }

func (k TCPTest) TestsLine(Scenario) string {
	if len(k.Streams) == 0 {
		return ""
	}
	return "; iperf3 TCP streams " + strings.Trim(fmt.Sprint(k.Streams), "[]")
}

// iperfTime is how long each iperf3 run lasts: IperfTime, or 5 s.
func iperfTime(s Scenario) time.Duration {
	if s.IperfTime == 0 {
		return 5 * time.Second
	}
	return s.IperfTime
}

func (k TCPTest) Run(ctx context.Context, u *UnitRun) error {
	secs := iperfTime(u.S)
	for _, n := range k.Streams {
		u.Status(fmt.Sprintf("iperf3 TCP, %d stream(s), %v", n, secs))
		ir, err := u.Rig.Iperf(ctx, 0, 1, "tcp", n, secs, "")
		r := u.Base
		r.Test, r.Param, r.Unit = TestTCP, fmt.Sprintf("streams=%d", n), "bit/s"
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Value, r.Iperf, r.CPU = ir.BitsPerSec, &ir, ir.CPU
		}
		u.Add(r)
	}
	return nil
}

func (k UDPTest) Run(ctx context.Context, u *UnitRun) error {
	secs := iperfTime(u.S)
	u.Status(fmt.Sprintf("iperf3 UDP at %s, %v", k.Rate, secs))
	ir, err := u.Rig.Iperf(ctx, 0, 1, "udp", 1, secs, k.Rate)
	param := "rate=" + k.Rate
	// Three figures: what arrived, what was lost, and the jitter.
	for _, f := range []struct {
		test, unit string
		v          float64
	}{{TestUDP, "bit/s", ir.BitsPerSec}, {TestUDP + "-loss", "% lost", ir.LostPercent}, {TestUDP + "-jitter", "ms", ir.JitterMs}} {
		r := u.Base
		r.Test, r.Param, r.Unit = f.test, param, f.unit
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Value, r.CPU = f.v, ir.CPU
			if f.test == TestUDP {
				r.Iperf = &ir
			}
			if f.test == TestUDP+"-loss" && ir.Lost > 0 {
				r.Note = fmt.Sprintf("%d of %d lost datagrams were dropped by the receiving socket's full buffer (UDP RcvbufErrors), not on the path", min(ir.RcvbufErrors, ir.Lost), ir.Lost)
			}
		}
		u.Add(r)
	}
	return nil
}

// Flags: --streams, the stream counts (of a scenario with a TCP test; in
// another it is ignored).
func (TCPTest) Flags() []Flag {
	return []Flag{{
		Name: "streams", Type: FlagInts, Lo: 1, Hi: 128, Usage: "iperf3 TCP stream counts, comma-separated",
		Set: Sets(func(t TCPTest, n []int) (TCPTest, error) { t.Streams = n; return t, nil }),
	}}
}

// Flags: --udp-rate, the offered rate (of a scenario with a UDP test; in
// another it is ignored).
func (UDPTest) Flags() []Flag {
	return []Flag{{
		Name: "udp-rate", Type: FlagString, Usage: "iperf3 UDP offered rate (e.g. 1G)",
		Set: Sets(func(t UDPTest, v string) (UDPTest, error) { t.Rate = v; return t, nil }),
	}}
}
