// Package problem is the form of a problem in a configuration file: its
// file, line, field and message. internal/config finds them; the control
// socket carries them back from a refused reload (internal/ctl); `trestle
// check|run|reload --json` prints them. A leaf package, so that the wire
// format and its readers (the lab, the CNI plugin) need not import the
// configuration's checker.
package problem

import (
	"fmt"
	"strings"
)

// Error is one problem in a config file. Its JSON is an entry of the
// "errors" of `trestle check|run|reload --json` when they refuse a file
// (docs/operations.md, "The JSON contract").
type Error struct {
	File  string `json:"file"`
	Line  int    `json:"line"`  // 0 when the problem is with the file as a whole
	Field string `json:"field"` // TOML path such as bridge[0].port[1].mode; "" for syntax errors
	Msg   string `json:"message"`
	// Cause: what the system said (a file that cannot be read), for
	// errors.Is(err, fs.ErrNotExist). Not sent: it stays where it was found.
	Cause error `json:"-"`
}

func (e *Error) Unwrap() error { return e.Cause }

// Error returns "FILE:LINE: FIELD: MSG", leaving out LINE when it is 0 and
// FIELD when it is empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a file, in line order.
type Errors []*Error

// Unwrap gives each problem, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Error returns one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}
