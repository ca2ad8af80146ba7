package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/trestle/trestle/internal/ctl"
)

// trestle top: every port's rates, from two readings of `trestle stats`
// an interval apart. It reads the control socket only (no metrics endpoint).

// topKeys are the orders top can sort by, in the order 's' steps through.
var topKeys = []struct {
	name, head string
	of         func(r topRow) float64
}{
	{"rx", "RX PPS", func(r topRow) float64 { return r.RxPPS }},
	{"tx", "TX PPS", func(r topRow) float64 { return r.TxPPS }},
	{"rx-bits", "RX BIT/S", func(r topRow) float64 { return r.RxBPS }},
	{"tx-bits", "TX BIT/S", func(r topRow) float64 { return r.TxBPS }},
	{"flood", "FLOOD/S", func(r topRow) float64 { return r.FloodPS }},
	{"drops", "DROPS/S", func(r topRow) float64 { return r.DropPS }},
	{"learned", "LEARN/S", func(r topRow) float64 { return r.LearnedPS }},
	{"moved", "MOVE/S", func(r topRow) float64 { return r.MovedPS }},
	{"port", "PORT", nil},
}

func topKey(name string) (int, error) {
	var names []string
	for i, k := range topKeys {
		if k.name == name {
			return i, nil
		}
		names = append(names, k.name)
	}
	return 0, usagef("--sort %q: one of %s", name, strings.Join(names, ", "))
}

// topRow is one port's rates: per second, bits for the bit rates.
type topRow struct {
	Bridge, Port, Mode                  string
	RxPPS, RxBPS, TxPPS, TxBPS          float64 // BPS: bits a second
	FloodPS, DropPS, LearnedPS, MovedPS float64
	// Drops by reason, only those that rose.
	Drops map[string]float64
	// Every counter the daemon reports, per second, in its order.
	PerSecond []topRate
}

type topRate struct {
	name  string
	value float64
}

func (r topRow) rate(name string) float64 {
	for _, x := range r.PerSecond {
		if x.name == name {
			return x.value
		}
	}
	return 0
}

func (r topRow) hasRate(name string) bool {
	return slices.ContainsFunc(r.PerSecond, func(x topRate) bool { return x.name == name })
}

// MarshalJSON writes a port's rates as `trestle stats --json` writes its
// counters, each named as its counter with _per_second after it
// (rx_packets_per_second, learned_per_second), in the daemon's order, and
// its drops by reason under drops_per_second (those that rose).
func (r topRow) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	field := func(name string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		val, err := json.Marshal(v)
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
		return err
	}
	b.WriteByte('{')
	err := errors.Join(field("bridge", r.Bridge), field("port", r.Port), field("mode", r.Mode))
	for _, x := range r.PerSecond {
		err = errors.Join(err, field(x.name+"_per_second", x.value))
	}
	drops := r.Drops
	if drops == nil {
		drops = map[string]float64{}
	}
	err = errors.Join(err, field("drops_per_second", drops))
	b.WriteByte('}')
	return b.Bytes(), err
}

type topSample struct {
	at    time.Time
	ports []ctl.PortStats
}

// delta is how much a counter rose; a counter that went down (the daemon
// restarted without persist, the port got a new slot) counts from zero.
func delta(prev, cur uint64) float64 {
	if cur < prev {
		return float64(cur)
	}
	return float64(cur - prev)
}

// topRates turns two readings into each port's rates. A port that was not
// in the first reading has none yet and is left out.
func topRates(prev, cur topSample) []topRow {
	secs := cur.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		secs = 1
	}
	before := map[[2]string]ctl.PortStats{}
	for _, p := range prev.ports {
		before[[2]string{p.Bridge, p.Port}] = p
	}
	var rows []topRow
	for _, p := range cur.ports {
		b, ok := before[[2]string{p.Bridge, p.Port}]
		if !ok {
			continue
		}
		r := topRow{Bridge: p.Bridge, Port: p.Port, Mode: p.Mode, Drops: map[string]float64{}}
		for _, c := range p.Counters {
			r.PerSecond = append(r.PerSecond, topRate{c.Name, delta(b.Counters.Get(c.Name), c.Value) / secs})
		}
		r.RxPPS, r.TxPPS = r.rate("rx_packets"), r.rate("tx_packets")
		r.RxBPS, r.TxBPS = 8*r.rate("rx_bytes"), 8*r.rate("tx_bytes")
		r.FloodPS, r.LearnedPS, r.MovedPS = r.rate("flooded"), r.rate("learned"), r.rate("moved")
		for reason, n := range p.Drops {
			if d := delta(b.Drops[reason], n) / secs; d > 0 {
				r.Drops[reason] = d
				r.DropPS += d
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func sortRows(rows []topRow, key int) {
	of := topKeys[key].of
	sort.SliceStable(rows, func(i, j int) bool {
		if of != nil && of(rows[i]) != of(rows[j]) {
			return of(rows[i]) > of(rows[j])
		}
		if rows[i].Bridge != rows[j].Bridge {
			return rows[i].Bridge < rows[j].Bridge
		}
		return rows[i].Port < rows[j].Port
	})
}

// si writes a rate with a k, M or G prefix: 3 significant digits or so.
func si(v float64, unit string) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG%s", v/1e9, unit)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM%s", v/1e6, unit)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk%s", v/1e3, unit)
	case v == 0:
		return "0" + unit
	case v < 10:
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	return fmt.Sprintf("%.0f%s", v, unit)
}

// renderTop writes the table, its lines ended by eol ("\r\n" in raw mode).
func renderTop(w io.Writer, rows []topRow, key int, every time.Duration, now time.Time, interactive bool, eol string) {
	var b strings.Builder
	help := ""
	if interactive {
		help = " (s: next order, q: quit)"
	}
	fmt.Fprintf(&b, "trestle top  %s  every %s  %d ports  sorted by %s%s\n\n", now.Format("15:04:05"), every, len(rows), topKeys[key].name, help)
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "BRIDGE\tPORT\tMODE\tRX PPS\tRX BIT/S\tTX PPS\tTX BIT/S\tFLOOD/S\tDROPS/S\tLEARN/S\tMOVE/S\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", escapeText(r.Bridge), escapeText(r.Port), escapeText(r.Mode),
			si(r.RxPPS, ""), si(r.RxBPS, "b"), si(r.TxPPS, ""), si(r.TxBPS, "b"),
			si(r.FloodPS, ""), si(r.DropPS, ""), si(r.LearnedPS, ""), si(r.MovedPS, ""))
	}
	tw.Flush()
	var drops []string
	for _, r := range rows {
		if len(r.Drops) == 0 {
			continue
		}
		var parts []string
		for reason, v := range r.Drops {
			parts = append(parts, fmt.Sprintf("%s %s", reason, si(v, "/s")))
		}
		sort.Strings(parts)
		drops = append(drops, fmt.Sprintf("drops on %s/%s: %s", escapeText(r.Bridge), escapeText(r.Port), strings.Join(parts, ", ")))
	}
	if len(drops) > 0 {
		b.WriteString("\n" + strings.Join(drops, "\n") + "\n")
	}
	io.WriteString(w, strings.ReplaceAll(b.String(), "\n", eol))
}

func (e *env) topCmd() *cobra.Command {
	var every time.Duration
	var sortBy string
	var once bool
	c := &cobra.Command{
		Use:   "top [BRIDGE]",
		Short: "Live per-port rates: packets and bits a second in and out, floods, drops by reason, learning",
		Long: `A live view of every port's rates, refreshed each interval: packets and
bits a second received (RX) and sent (TX), frames flooded, dropped (with
the reasons below the table), addresses learned and moved, per second.

Keys: s steps through the orders (rx, tx, rx-bits, tx-bits, flood, drops,
learned, moved, port), q quits.

It reads the daemon's counters through the control socket, like 'trestle
stats', and needs no metrics endpoint. Rates are differences of two
readings an interval apart, so the first view comes after one interval.

With --once it takes two readings, prints one table (or with --json one
object: the interval and every port's rates, each counter of 'trestle
stats' with _per_second after its name, and drops_per_second by reason)
and exits; without a terminal it prints a table each interval.`,
		Example: `  trestle top
  trestle top br0 --sort drops
  trestle top --once --json | jq '.ports[] | select(.drops_per_second | length > 0)'`,
		Args: nargs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := topKey(sortBy)
			if err != nil {
				return err
			}
			if every < 100*time.Millisecond {
				return usagef("--interval %s: at least 100ms", every)
			}
			if e.json && !once {
				return usagef("--json needs --once: the live view is for a terminal")
			}
			return e.top(first(args), every, key, once)
		},
	}
	c.Flags().DurationVarP(&every, "interval", "i", time.Second, "time between readings")
	c.Flags().StringVar(&sortBy, "sort", "rx", "order: rx, tx, rx-bits, tx-bits, flood, drops, learned, moved or port")
	c.Flags().BoolVar(&once, "once", false, "print one reading and exit")
	c.Flags().BoolVar(&e.json, "json", false, "with --once: print JSON")
	return c
}

func (e *env) topSample(bridge string) (topSample, error) {
	var ps []ctl.PortStats
	err := e.call(ctl.Request{Cmd: ctl.CmdStats, Bridge: bridge}, &ps)
	return topSample{at: time.Now(), ports: ps}, err
}

func (e *env) top(bridge string, every time.Duration, key int, once bool) error {
	prev, err := e.topSample(bridge)
	if err != nil {
		return err
	}
	if once {
		time.Sleep(every)
		cur, err := e.topSample(bridge)
		if err != nil {
			return err
		}
		rows := topRates(prev, cur)
		sortRows(rows, key)
		if e.json {
			if rows == nil {
				rows = []topRow{}
			}
			return e.printJSON(map[string]any{"interval_seconds": cur.at.Sub(prev.at).Seconds(), "ports": rows})
		}
		renderTop(e.stdout, rows, key, every, cur.at, false, "\n")
		return nil
	}

	out, isFile := e.stdout.(*os.File)
	interactive := isFile && term.IsTerminal(int(out.Fd())) && term.IsTerminal(int(os.Stdin.Fd()))
	keys := make(chan byte, 8)
	eol := "\n"
	if interactive {
		state, err := term.MakeRaw(int(os.Stdin.Fd()))
		if err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
		defer term.Restore(int(os.Stdin.Fd()), state)
		fmt.Fprint(out, "\x1b[?1049h\x1b[?25l") // the alternate screen, no cursor
		defer fmt.Fprint(out, "\x1b[?25h\x1b[?1049l")
		eol = "\r\n"
		go func() {
			buf := make([]byte, 1)
			for {
				if n, err := os.Stdin.Read(buf); err != nil || n == 0 {
					close(keys)
					return
				}
				keys <- buf[0]
			}
		}()
		fmt.Fprintf(out, "\x1b[H\x1b[2Jtrestle top: first rates in %s%s", every, eol)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var rows []topRow
	var at time.Time
	draw := func() {
		sortRows(rows, key)
		if interactive {
			fmt.Fprint(out, "\x1b[H\x1b[2J")
		}
		renderTop(e.stdout, rows, key, every, at, interactive, eol)
		if !interactive {
			fmt.Fprintln(e.stdout)
		}
	}
	for {
		select {
		case k, ok := <-keys:
			switch {
			case !ok || k == 'q' || k == 'Q' || k == 3 || k == 4: // q, ^C, ^D (raw mode: no signals)
				return nil
			case k == 's' || k == 'S':
				key = (key + 1) % len(topKeys)
				if rows != nil {
					draw()
				}
			}
		case <-tick.C:
			cur, err := e.topSample(bridge)
			if err != nil {
				return err
			}
			rows, at, prev = topRates(prev, cur), cur.at, cur
			if rows == nil {
				rows = []topRow{}
			}
			draw()
		}
	}
}
