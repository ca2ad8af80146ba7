package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/ctl"
)

func (e *env) eventsCmd() *cobra.Command {
	var follow bool
	var last int
	c := &cobra.Command{
		Use:   "events [--follow] [--json] [-n N]",
		Short: "Show what happened to the switch: MAC moves, ports up and down, full tables and MAC limits",
		Long: `Show the events the daemon logged, oldest first, one a line, time first (it
keeps the last 1000; its log, stderr or the journal, has them all):

  mac_move           an address moved between two ports of a bridge: mac, vlan,
                     from, to. Each address gets one line at once, then at most
                     one every 5 seconds: suppressed counts the moves that line
                     stands for besides its own, so a flapping station is one
                     line every 5 seconds, not one a frame.
  mac_move_overflow  moves of more addresses than the log follows (count)
  port_up            a port started forwarding (mode, reason)
  port_down          a port stopped: state link-down (its interface is down or
                     has no carrier) or down (not attached, reason says why)
  table_full         a bridge's table refuses new addresses: they are forwarded
                     unlearned (VLAN-aware bridges: dropped) (count: the first
                     ones); table_full_end when none came for 10 s, with every
                     one of the episode and its length (seconds)
  mac_limit          a port reached its max_macs (limit): new addresses are
                     dropped or forwarded unlearned (action); mac_limit_end as
                     table_full_end

Examples:

  trestle events                    the recent events
  trestle events -n 20              the last 20
  trestle events --follow           the recent events, then each new one as it
                                    comes, until interrupted
  trestle events --json             a JSON array of events
  trestle events --follow --json    one JSON object a line (JSON lines)
  trestle events --json | jq '.[] | select(.event == "mac_move")'

A mac_move line:

  2026-11-24T10:00:05.120+01:00 mac_move bridge=br0 mac=02:00:00:00:00:01 vlan=0 from=veth-a to=veth-b suppressed=998`,
		Args: nargs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if last < 0 {
				return usagef("--last %d: a number of events of at least 0 (0: every one kept)", last)
			}
			if follow {
				return e.followEvents(last)
			}
			var evs []ctl.Event
			if err := e.call(ctl.Request{Cmd: ctl.CmdEvents}, &evs); err != nil {
				return err
			}
			evs = lastEvents(evs, last)
			if e.json {
				if evs == nil {
					evs = []ctl.Event{}
				}
				return e.printJSON(evs)
			}
			e.plainText()
			for _, ev := range evs {
				if err := writeEvent(e.stdout, ev); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "after the recent events, print each new one as it comes, until interrupted")
	c.Flags().IntVarP(&last, "last", "n", 0, "only the last N of the recent events (0: every one kept)")
	c.Flags().BoolVar(&e.json, "json", false, "print JSON: an array; with --follow, one object a line")
	return c
}

func lastEvents(evs []ctl.Event, n int) []ctl.Event {
	if n > 0 && len(evs) > n {
		return evs[len(evs)-n:]
	}
	return evs
}

// followEvents prints the recent events, then each new one, until SIGINT or
// SIGTERM, or the daemon ends the stream.
func (e *env) followEvents(last int) error {
	cl, err := ctl.FollowEvents(e.sock())
	if err != nil {
		return err
	}
	defer cl.Close()
	out := func(ev ctl.Event) error {
		if e.json {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "%s\n", b)
			return err
		}
		return writeEvent(escaper{e.stdout}, ev)
	}
	for _, ev := range lastEvents(cl.Header.Events, last) {
		if err := out(ev); err != nil {
			return fmt.Errorf("events: write: %w", err)
		}
	}
	defer stopOnSignal(cl.Stop)()
	for {
		ev, end, err := cl.Next()
		if err != nil {
			return err
		}
		if end != nil {
			if end.Error != "" {
				return fmt.Errorf("events: %s", end.Error)
			}
			return nil
		}
		if err := out(*ev); err != nil {
			return fmt.Errorf("events: write: %w", err)
		}
	}
}

// writeEvent prints one event as a line: its time, its kind, its fields as
// key=value (quoted where a value has spaces), as the daemon's log has them.
func writeEvent(w io.Writer, ev ctl.Event) error {
	var b strings.Builder
	b.WriteString(ev.Time.Local().Format("2006-01-02T15:04:05.000Z07:00"))
	f := ev.Fields()
	b.WriteString(" " + ev.Event)
	for i := 2; i+1 < len(f); i += 2 {
		v := fmt.Sprint(f[i+1])
		if v == "" || strings.ContainsAny(v, " \"=") {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, " %s=%s", f[i], v)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}
