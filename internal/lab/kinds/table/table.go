// Package table is the lab's table kind (fdb-scale): throughput against a learned table's size.
package table

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestFlood) }

// Kind is the table test (fdb-scale): learn N addresses behind one
// port and check that the table holds them, then the RFC 2544 search to h2
// and with every frame to another of the N, for each N of Sizes.
type Kind struct {
	Sizes []int // the Ns
}

// TestTable: throughput to addresses spread over a table of N learned ones.
const TestTable = lab.TestTable

func (Kind) Name() string { return TestTable }

func (k Kind) Needs(lab.Scenario) lab.Needs {
	return lab.Needs{Learning: true, AllHosts: true, OneWay: true, MaxEntries: 2 * slices.Max(append([]int{0}, k.Sizes...))}
}

// Estimate: learn and check each table at tableLearnRate, then two
// searches (to h2, spread) for each frame size.
func (k Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	tm := s.Timing
	trial := tm.Search.Trial + tm.Settle + tm.Drain
	var t time.Duration
	for _, n := range k.Sizes {
		fill := time.Duration(2 * float64(n) / lab.TableLearnRate * float64(time.Second))
		t += fill + tm.Settle + 2*tm.Drain + time.Duration(2*len(s.Sizes))*(3*trial+tm.Search.Confirm)
	}
	return t
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	s, rig, tm := u.S, u.Rig, u.S.Timing
	for _, n := range k.Sizes {
		// Fill the table once; both kinds of traffic run against it.
		u.Status(fmt.Sprintf("table of %d: learning the addresses", n))
		check, err := rig.FillTable(ctx, n, tm)
		if err != nil {
			return err
		}
		for _, size := range s.Sizes {
			for _, spread := range []bool{false, true} {
				k := 0
				what := "to h2"
				if spread {
					what = "each frame to another"
				}
				sr, trials, err := rig.TableThroughput(ctx, size, n, spread, tm.NDROnly(), func(st lab.SearchTrial) {
					k++
					u.Status(fmt.Sprintf("table of %d, %s %s, trial %d: %s offered, loss %.3f%%", n, size.Label(), what, k, lab.PPSText(st.Offered), 100*st.Loss))
				})
				if err != nil {
					return err
				}
				r := lab.ResultOfSearch(u.Base, TestTable, fmt.Sprintf("%d learned, %s, %s", n, size.Label(), what), sr, trials)
				if check != nil {
					// The check comes first: a table that did not hold
					// every address makes the figure one for a smaller table.
					r.Table = check
					r.Note = strings.TrimSuffix(check.String()+"; "+r.Note, "; ")
				}
				u.Add(r)
			}
		}
	}
	return nil
}
