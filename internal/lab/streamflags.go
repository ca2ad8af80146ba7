package lab

import (
	"fmt"
	"time"
)

// The flags of the stream that the restart, mac-flood and soak kinds run
// beside their events, as rows each of those kinds lists among its own
// (Flags): they set the Scenario's stream (Load, StreamRate, Duration,
// MaxEntries), which is the core's, so the rows are written once here.

const streamKinds = "the restart, mac-flood or soak scenario"

// LoadFlag is --load: the stream's rate, a fraction of the DUT's measured
// throughput.
func LoadFlag() Flag {
	return Flag{Name: "load", Type: FlagFloat, For: streamKinds,
		Usage: "restart, mac-flood, soak: the stream's rate, a fraction of the DUT's measured\nthroughput (default 0.5; soak 0.9 of the zero-loss rate)",
		Set: func(s *Scenario, v any) error {
			load := v.(float64)
			if load <= 0 || load > 1 {
				return fmt.Errorf("--load %v: a fraction of the throughput above 0, up to 1", load)
			}
			s.Load = load
			return nil
		}}
}

// RateFlag is --rate: the stream's rate in frames a second, with no
// throughput search to take a fraction of.
func RateFlag() Flag {
	return Flag{Name: "rate", Type: FlagFloat, For: "the restart or mac-flood scenario",
		Usage: "restart, mac-flood: the stream's rate in frames a second, instead of --load (no search)",
		Set: func(s *Scenario, v any) error {
			rate := v.(float64)
			if rate <= 0 {
				return fmt.Errorf("--rate %v: frames a second, above 0", rate)
			}
			s.StreamRate = rate
			s.WithoutTest(TestThroughput) // a fixed rate needs no throughput
			return nil
		}}
}

// DurationFlag is --duration: how long the mac-flood's flood or the
// soak's stream lasts.
func DurationFlag() Flag {
	return Flag{Name: "duration", Type: FlagDuration, For: "the mac-flood or soak scenario",
		Usage: "mac-flood: the flood's length (default 30s); soak: the stream's (default 10m)",
		Set: func(s *Scenario, v any) error {
			d := v.(time.Duration)
			if d <= 0 {
				return fmt.Errorf("--duration %v: must be above 0", d)
			}
			s.Duration = d
			return nil
		}}
}

// MaxEntriesFlag is --max-entries: the learning table size every DUT is
// given.
func MaxEntriesFlag() Flag {
	return Flag{Name: "max-entries", Type: FlagInt, Lo: 1, Hi: 1 << 24, For: "the mac-flood scenario",
		Usage: "mac-flood: the learning table size every DUT is given (default 65536)",
		Set:   func(s *Scenario, v any) error { s.MaxEntries = v.(int); return nil }}
}
