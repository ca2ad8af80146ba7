package lab

// A DUT's power to restart its daemon (Restarter), the events it goes
// through and what a restart took: what the restart kind drives and the
// overlay kind uses for FRR, and what DUTs implement.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Event kinds of the restart test.
const (
	EventSIGKILL = "sigkill" // the daemon killed with SIGKILL, then the same build started again
	EventSIGTERM = "sigterm" // stopped with SIGTERM, then started again
	EventUpgrade = "upgrade" // stopped with SIGTERM, then another build started in its place
	EventNone    = "none"    // no event: the stream alone, for a DUT without a daemon
)

// EventKinds are the kinds --events takes, in the order of the defaults.
var EventKinds = []string{EventSIGKILL, EventSIGTERM, EventUpgrade}

// EventCount is one kind of event and how many of it to run.
type EventCount struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// ParseEvents reads "sigkill=10,sigterm=10,upgrade=5": kinds in the order
// they are to run, each with its count.
func ParseEvents(s string) ([]EventCount, error) {
	var out []EventCount
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(v)
		switch {
		case !ok || err != nil || n < 1 || n > 1000:
			return nil, fmt.Errorf("events %q: %q is not KIND=COUNT with a count of 1 to 1000", s, part)
		case !slices.Contains(EventKinds, k):
			return nil, fmt.Errorf("events %q: %q is not one of %s", s, k, strings.Join(EventKinds, ", "))
		}
		for _, e := range out {
			if e.Kind == k {
				return nil, fmt.Errorf("events %q: %s given twice", s, k)
			}
		}
		out = append(out, EventCount{k, n})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("events %q: no event", s)
	}
	return out, nil
}

// FormatEvents is the inverse of ParseEvents.
func FormatEvents(evs []EventCount) string {
	var parts []string
	for _, e := range evs {
		parts = append(parts, fmt.Sprintf("%s=%d", e.Kind, e.Count))
	}
	return strings.Join(parts, ",")
}

// Restarter is a DUT with a daemon that the restart test restarts under
// traffic.
type Restarter interface {
	// RestartPlan says whether the DUT can go through events of kind, and
	// what such an event does to it, for the record. It may prepare what
	// they need (the other build of an upgrade).
	RestartPlan(ctx context.Context, kind string) (string, error)
	// Restart ends the daemon the way kind says and starts it again (or
	// its other build), and returns once the new one is back.
	Restart(ctx context.Context, kind string) (Restarted, error)
}

// Restarted is what one restart of a DUT's daemon took.
type Restarted struct {
	Exited   time.Duration // from the signal to the old daemon's exit
	Back     time.Duration // from the signal to the new daemon answering, every port set up
	From, To string        // the builds before and after
	// Log is the old daemon's last lines and the new one's first, kept
	// with the event when it lost or flooded frames.
	Log string
}

// TrestleBuild is a trestle binary the restart test's upgrade events can run.
type TrestleBuild struct {
	Path  string `json:"path"`
	Label string `json:"label"` // what it is, for people
}
