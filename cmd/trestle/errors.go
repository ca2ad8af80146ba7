package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
)

// The exit statuses: the contract scripts hold trestle to (trestle(8),
// EXIT STATUS; docs/operations.md). Every error a command returns is
// classified here, once, in run: by its type, never by its text.
const (
	exitOK       = 0
	exitFailed   = 1 // the operation failed
	exitUsage    = 2 // usageError: the command line is wrong
	exitNoDaemon = 3 // ctl.ErrNoDaemon: no daemon answers at the socket
	exitRefused  = 4 // config.Errors: a configuration was refused
)

// exitStatuses says what each status means, for --help and the manual.
var exitStatuses = []struct {
	Code    int
	Meaning string
}{
	{exitOK, "done"},
	{exitFailed, "the operation failed"},
	{exitUsage, "usage: an unknown command or flag, a wrong number of arguments, or a value that does not parse or is out of range"},
	{exitNoDaemon, "no daemon answers at the control socket: no socket there, nothing listening on it, or a daemon that takes no connection"},
	{exitRefused, "a configuration was refused (check, run, reload): each problem on a line of its own that starts FILE:LINE:"},
}

// exitStatusHelp is exitStatuses as a block of --help text, wrapped.
func exitStatusHelp() string {
	var b strings.Builder
	for _, s := range exitStatuses {
		line := fmt.Sprintf("  %d  ", s.Code)
		for _, w := range strings.Fields(s.Meaning) {
			if len(line)+1+len(w) > 78 && strings.TrimSpace(line) != "" {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = "     "
			}
			line += w + " "
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}

// exitStatus classifies an error a command returned.
func exitStatus(err error) int {
	var usage *usageError
	var refused config.Errors
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &refused):
		return exitRefused
	case errors.Is(err, ctl.ErrNoDaemon):
		return exitNoDaemon
	}
	return exitFailed
}

// usageError is a command line that is wrong: what is wrong with it, said
// in trestle's words, and the command whose usage line helps (nil: the
// one that ran).
type usageError struct {
	cmd *cobra.Command
	err error
}

func (u *usageError) Error() string { return u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

// usagef is a usage error: a value that does not parse or is out of
// range, flags that do not go together. The message names the flag and
// what it takes.
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// refusal is a configuration refused, with what that means for the
// command ("reload refused: the running state is kept"); its problems are
// printed one a line, each starting FILE:LINE:.
type refusal struct {
	what string
	errs config.Errors
}

func (r *refusal) Error() string { return r.what + ":\n" + r.errs.Error() }
func (r *refusal) Unwrap() error { return r.errs }

// refused wraps err, if it is a configuration's refusal, with what that
// means for the command; any other error is returned as it is.
func refused(what string, err error) error {
	var errs config.Errors
	if errors.As(err, &errs) {
		return &refusal{what: what, errs: errs}
	}
	return err
}

// nargs checks a command's number of arguments: from min to max (-1: no
// limit). A wrong count is a usage error, and prints the usage line.
func nargs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		n := len(args)
		var want string
		switch {
		case n >= min && (max < 0 || n <= max):
			return nil
		case max == 0:
			return &usageError{cmd: cmd, err: fmt.Errorf("%s takes no arguments (given: %s)", cmd.CommandPath(), strings.Join(args, " "))}
		case min == max:
			want = fmt.Sprint(min)
		case max < 0:
			want = fmt.Sprintf("at least %d", min)
		case min == 0:
			want = fmt.Sprintf("at most %d", max)
		default:
			want = fmt.Sprintf("%d to %d", min, max)
		}
		return &usageError{cmd: cmd, err: fmt.Errorf("%s takes %s argument%s, %d given", cmd.CommandPath(), want, plural(max), n)}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// groupRun is what a command with subcommands does when run itself (fdb,
// port, rule, state, trestle): print its help; a word that is none of its
// subcommands is a usage error, with the names it comes close to.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %s", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, " or ") + "?)"
	} else if cmd.HasParent() {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		msg += ": its commands are " + strings.Join(names, ", ")
	}
	return &usageError{cmd: cmd, err: errors.New(msg)}
}

// flagError is what the flag parser's errors say, in trestle's words: the
// flag by name and what it takes, never the parser's own text.
func flagError(cmd *cobra.Command, err error) error {
	var (
		invalid  *pflag.InvalidValueError
		missing  *pflag.ValueRequiredError
		unknown  *pflag.NotExistError
		syntax   *pflag.InvalidSyntaxError
		msg      string
		flagName = func(f *pflag.Flag) string { return "--" + f.Name }
	)
	switch {
	case errors.As(err, &invalid):
		f := invalid.GetFlag()
		msg = fmt.Sprintf("%s %q: %s", flagName(f), invalid.GetValue(), valueWant(f, errors.Unwrap(invalid)))
	case errors.As(err, &missing):
		msg = fmt.Sprintf("%s needs a value", flagName(missing.GetFlag()))
	case errors.As(err, &unknown):
		if short := unknown.GetSpecifiedShortnames(); short != "" {
			msg = fmt.Sprintf("unknown flag -%s", unknown.GetSpecifiedName()[:1])
		} else {
			msg = fmt.Sprintf("unknown flag --%s", unknown.GetSpecifiedName())
		}
	case errors.As(err, &syntax):
		msg = fmt.Sprintf("%q is not a flag: a flag is -x or --name", syntax.GetSpecifiedFlag())
	default:
		msg = err.Error()
	}
	return &usageError{cmd: cmd, err: errors.New(msg)}
}

// checkedValue is a flag value of trestle's own, whose Set says in
// trestle's words what it takes.
type checkedValue interface {
	pflag.Value
	checked()
}

// valueWant says what a flag takes, for a value it could not read.
func valueWant(f *pflag.Flag, cause error) string {
	if _, ok := f.Value.(checkedValue); ok && cause != nil {
		return cause.Error()
	}
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64":
		return "not a whole number"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		return "not a whole number of at least 0"
	case "float32", "float64":
		return "not a number"
	case "duration":
		return "not a duration such as 500ms, 10s or 2m"
	case "bool":
		return "not true or false"
	}
	return "not a value it takes"
}

// vlanValue is a --vlan flag: a VLAN ID, 0 (untagged) to 4094.
type vlanValue struct{ v *uint16 }

func (v vlanValue) String() string { return fmt.Sprint(*v.v) }
func (v vlanValue) Type() string   { return "VLAN" }
func (v vlanValue) checked()       {}
func (v vlanValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n > 4094 {
		return errors.New("not a VLAN: 0 (untagged) to 4094")
	}
	*v.v = uint16(n)
	return nil
}

// vlanFlag declares --vlan on fs.
func vlanFlag(fs *pflag.FlagSet, v *uint16, usage string) {
	fs.Var(vlanValue{v}, "vlan", usage)
}

// reportFailure prints what run says of a command's failure: to stderr, "trestle:
// " and the error, its usage line for a usage error, and each problem of a
// refused configuration on a line of its own (FILE:LINE: first, with no
// prefix, as compilers write them); with --json also one object on stdout,
// on one line: {"ok": false, "error": ..., "errors": [...]}.
func reportFailure(stdout, stderr io.Writer, cmd *cobra.Command, err error, asJSON bool) {
	var errs config.Errors
	var usage *usageError
	var ref *refusal
	isRefusal := errors.As(err, &errs)
	summary := err.Error()
	switch {
	case errors.As(err, &ref):
		for _, e := range ref.errs {
			fmt.Fprintln(stderr, e)
		}
		summary = ref.what
		fmt.Fprintln(stderr, "trestle:", summary)
	case isRefusal:
		for _, e := range errs {
			fmt.Fprintln(stderr, e)
		}
		summary = refusedSummary(errs)
	default:
		fmt.Fprintln(stderr, "trestle:", summary)
	}
	if errors.As(err, &usage) {
		if usage.cmd != nil {
			cmd = usage.cmd
		}
		if cmd != nil {
			line := cmd.UseLine()
			if cmd.HasAvailableSubCommands() {
				line = cmd.CommandPath() + " COMMAND ..."
			}
			fmt.Fprintf(stderr, "usage: %s\n", line)
			fmt.Fprintf(stderr, "'%s --help' says more.\n", cmd.CommandPath())
		}
	}
	if !asJSON {
		return
	}
	out := struct {
		OK     bool                    `json:"ok"`
		Error  string                  `json:"error"`
		Errors ctl.List[*config.Error] `json:"errors"`
	}{Error: summary, Errors: ctl.List[*config.Error](errs)}
	// One line: the object ends the JSON lines of capture --json and
	// events --follow --json too.
	_ = json.NewEncoder(stdout).Encode(out)
}

// refusedSummary is one line for a refused configuration: its file and
// how many problems it has.
func refusedSummary(errs config.Errors) string {
	if len(errs) == 0 {
		return "the configuration is refused"
	}
	n := fmt.Sprintf("%d problems", len(errs))
	if len(errs) == 1 {
		n = "1 problem"
	}
	return fmt.Sprintf("%s: refused, %s", errs[0].File, n)
}

// wantsJSON says whether a command line asks for JSON, read from the
// words themselves: a failure to parse them must still answer in JSON.
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}
