package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"github.com/trestle/trestle/internal/lab"
)

// section is a test kind's part of the report, apart from the tables of
// medians, which leave out the results of its tests.
type section struct {
	tests    []string
	terminal func(w io.Writer, run *lab.Run)
	markdown func(b *bytes.Buffer, dir string, run *lab.Run) error
}

// sections are the report's sections of the kinds that have one, in the
// order the report gives them; the last is every registered kind's own
// (lab.Reporter, lab.Sections).
var sections = []section{
	{[]string{lab.TestRestart, lab.TestRestartFlooded},
		func(w io.Writer, run *lab.Run) {
			if rows := Restarts(run); len(rows) > 0 {
				terminalRestarts(w, rows)
			}
		},
		func(b *bytes.Buffer, _ string, run *lab.Run) error {
			if rows := Restarts(run); len(rows) > 0 {
				markdownRestarts(b, rows)
			}
			return nil
		}},
	{[]string{lab.TestMACFlood},
		func(w io.Writer, run *lab.Run) { terminalFloods(w, Floods(run)) },
		func(b *bytes.Buffer, dir string, run *lab.Run) error { return markdownFloods(b, dir, run, Floods(run)) }},
	{[]string{lab.TestSoak},
		func(w io.Writer, run *lab.Run) { terminalSoaks(w, Soaks(run)) },
		func(b *bytes.Buffer, dir string, run *lab.Run) error { return markdownSoaks(b, dir, Soaks(run)) }},
	{[]string{lab.TestLoadLatency}, terminalLoadLatency, markdownLoadLatency},
	{[]string{lab.TestCores},
		func(w io.Writer, run *lab.Run) { terminalCores(w, run, Cores(run)) },
		func(b *bytes.Buffer, dir string, run *lab.Run) error { return markdownCores(b, dir, run, Cores(run)) }},
	{nil,
		func(w io.Writer, run *lab.Run) {
			terminal, _ := lab.Sections(run)
			for _, s := range terminal {
				fmt.Fprint(w, s)
			}
		},
		func(b *bytes.Buffer, _ string, run *lab.Run) error {
			_, markdown := lab.Sections(run)
			for _, s := range markdown {
				b.WriteString(s)
			}
			return nil
		}},
}

// ownSection says whether results of test go to a section of their own
// rather than the tables of medians.
func ownSection(test string) bool {
	for _, s := range sections {
		if slices.Contains(s.tests, test) {
			return true
		}
	}
	return lab.OwnSection(test)
}

func isRestart(test string) bool {
	return test == lab.TestRestart || test == lab.TestRestartFlooded
}

func isStream(test string) bool { return test == lab.TestMACFlood || test == lab.TestSoak }
