package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
)

// completeArgs gives each command of the tree the completion of its first
// argument, read from its Use line as its help shows it: a BRIDGE is one of
// the running daemon's bridges, a PORT one of their ports, a SCENARIO one
// of the lab's; capture's --bridge a bridge. The daemon is asked for at most
// a second; with no answer the shell completes nothing rather than wait.
// Cobra's own `trestle completion bash|zsh|fish` writes the scripts.
func completeArgs(c *cobra.Command, e *env) {
	if c.ValidArgsFunction == nil {
		if f := firstArg(c.Use); f != "" {
			c.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveDefault
				}
				return e.completions(f), cobra.ShellCompDirectiveNoFileComp
			}
		}
	}
	if c.Flags().Lookup("bridge") != nil {
		_ = c.RegisterFlagCompletionFunc("bridge", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return e.completions("BRIDGE"), cobra.ShellCompDirectiveNoFileComp
		})
	}
	for _, sub := range c.Commands() {
		completeArgs(sub, e)
	}
}

// firstArg is the kind of a command's first argument as its Use line names
// it ("show [BRIDGE]": BRIDGE), if it is one completeArgs completes.
func firstArg(use string) string {
	f := strings.Fields(use)
	if len(f) < 2 {
		return ""
	}
	switch a := strings.Trim(f[1], "[]"); a {
	case "BRIDGE", "PORT", "SCENARIO":
		return a
	}
	return ""
}

// completions are the names of that kind.
func (e *env) completions(kind string) []string {
	if kind == "SCENARIO" {
		return lab.ScenarioNames()
	}
	var st ctl.Status
	if err := ctl.CallWithin(e.sock(), ctl.Request{Cmd: ctl.CmdShow}, &st, time.Second); err != nil {
		return nil
	}
	var names []string
	for _, b := range st.Bridges {
		if kind == "BRIDGE" {
			names = append(names, b.Name)
			continue
		}
		for _, p := range b.Ports {
			names = append(names, p.Name)
		}
	}
	return names
}
