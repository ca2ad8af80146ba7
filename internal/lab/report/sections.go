package report

import (
	"bytes"
	"io"

	"github.com/trestle/trestle/internal/lab"
)

// Every kind with a section of its own (restart, mac-flood, soak,
// latency-load, cores, idle) owns it: it is a lab.Reporter, and the report
// adds the sections of a run's kinds in the order of lab.Kinds, after the
// tables of medians, which leave their results out.

// terminalSections writes the run's kinds' sections for the terminal.
func terminalSections(w io.Writer, run *lab.Run) {
	terminal, _ := lab.Sections(run)
	for _, s := range terminal {
		io.WriteString(w, s)
	}
}

// markdownSections writes the run's kinds' sections of report.md, and
// their charts into dir.
func markdownSections(b *bytes.Buffer, dir string, run *lab.Run) error {
	md, err := lab.MarkdownSections(dir, run)
	for _, s := range md {
		b.WriteString(s)
	}
	return err
}

// ownSection says whether results of test go to a section of their own
// rather than the tables of medians.
func ownSection(test string) bool { return lab.OwnSection(test) }
