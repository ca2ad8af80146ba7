package config

import (
	"fmt"

	"github.com/trestle/trestle/internal/problem"
)

// Error and Errors are the problems of a config file, in the form the
// control socket carries and --json prints (internal/problem).
type (
	Error  = problem.Error
	Errors = problem.Errors
)

func (c *checker) errorf(line int, field, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) unknown(v *value, field string) {
	c.errorf(v.line, field, "unknown field")
}
