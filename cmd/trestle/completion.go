package main

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/stat"
)

// completeArgs gives each command of the tree the completion of its
// arguments, read from its Use line as its help shows it: a BRIDGE is one
// of the running daemon's bridges, a PORT one of their ports (of the
// BRIDGE before it), an INTERFACE one of this namespace's interfaces, a
// SCENARIO one of the lab's, and KEY=VALUE the keys of a [[bridge.port]]
// (port add) or a [[bridge.rule]] (rule add), with the values of those
// that take a few. Flags whose values are a few names complete them too
// (enumFlags), and --port the ports of the bridge. The daemon is asked for
// at most a second; with no answer the shell completes nothing rather
// than wait. Cobra's own `trestle completion bash|zsh|fish` writes the
// scripts.
func completeArgs(c *cobra.Command, e *env) {
	if kinds := argKinds(c.Use); c.ValidArgsFunction == nil && len(kinds) > 0 {
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			kind := ""
			switch last := kinds[len(kinds)-1]; {
			case len(args) < len(kinds):
				kind = kinds[len(args)]
			case strings.HasSuffix(last, "..."):
				kind = last
			}
			return e.complete(cmd, kind, args, toComplete)
		}
	}
	for name, values := range enumFlags {
		if c.LocalFlags().Lookup(name) != nil {
			_ = c.RegisterFlagCompletionFunc(name, func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return values(toComplete)
			})
		}
	}
	if c.LocalFlags().Lookup("port") != nil {
		_ = c.RegisterFlagCompletionFunc("port", func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			return e.names("PORT", first(args)), cobra.ShellCompDirectiveNoFileComp
		})
	}
	for _, sub := range c.Commands() {
		completeArgs(sub, e)
	}
}

// enumFlags are the flags that take one of a few names, wherever they
// are declared, with the completion of their values.
var enumFlags = map[string]func(toComplete string) ([]string, cobra.ShellCompDirective){
	"sort":       fixed(topKeyNames()...),
	"direction":  fixed(captureDirections...),
	"mode":       fixed(genModes...),
	"log-level":  fixed(logLevels...),
	"placement":  fixed("auto", "shared", "split"),
	"confidence": fixed(confidenceLevels()...),
	"dut":        completeDUTs,
}

func fixed(values ...string) func(string) ([]string, cobra.ShellCompDirective) {
	return func(string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

func topKeyNames() []string {
	var names []string
	for _, k := range topKeys {
		names = append(names, k.name)
	}
	return names
}

func confidenceLevels() []string {
	var out []string
	for _, l := range stat.Levels {
		out = append(out, strconv.FormatFloat(l, 'f', -1, 64))
	}
	return out
}

// completeDUTs completes a --dut list: the words before the last comma
// stay, the last is a DUT's name.
func completeDUTs(toComplete string) ([]string, cobra.ShellCompDirective) {
	head := ""
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		head = toComplete[:i+1]
	}
	var out []string
	for _, d := range lab.DUTNames {
		out = append(out, head+d)
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// argKinds are the kinds of a command's arguments as its Use line names
// them, in order: "capture BRIDGE PORT [-w FILE]" has BRIDGE and PORT.
// Flags and their values are skipped; "|" ends the first form.
func argKinds(use string) []string {
	words := strings.Fields(use)
	var kinds []string
	value := false
	for _, w := range words[min(1, len(words)):] {
		switch {
		case w == "|":
			return kinds
		case value:
			value = false
		case strings.HasPrefix(strings.TrimLeft(w, "["), "-"):
			value = !strings.HasSuffix(w, "]")
		default:
			kinds = append(kinds, strings.Trim(w, "[]"))
		}
	}
	return kinds
}

// complete completes an argument of kind (none: the shell's own, files).
func (e *env) complete(cmd *cobra.Command, kind string, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch kind {
	case "BRIDGE", "PORT":
		return e.names(kind, bridgeOf(cmd, args)), cobra.ShellCompDirectiveNoFileComp
	case "SCENARIO":
		return lab.ScenarioNames(), cobra.ShellCompDirectiveNoFileComp
	case "INTERFACE":
		var names []string
		ifs, _ := net.Interfaces()
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	case "KEY=VALUE...":
		switch cmd.CommandPath() {
		case "trestle port add":
			return keyValues(toComplete, []string{"owner"}, config.TableOf("bridge.port"), config.TableOf("bridge.port.storm"))
		case "trestle rule add":
			return keyValues(toComplete, nil, config.TableOf("bridge.rule"))
		}
	}
	return nil, cobra.ShellCompDirectiveDefault
}

// bridgeOf is the bridge a command's arguments name first, if it takes
// one: a PORT is one of its ports.
func bridgeOf(cmd *cobra.Command, args []string) string {
	if kinds := argKinds(cmd.Use); len(kinds) > 0 && kinds[0] == "BRIDGE" && len(args) > 0 {
		return args[0]
	}
	return ""
}

// keyValues completes a KEY=VALUE argument with the keys of tables (a
// nested table's keys as storm.broadcast) and extra keys: the key with its
// "=", or once the key is typed, its values if it takes a few.
func keyValues(toComplete string, extra []string, tables ...*config.Table) ([]string, cobra.ShellCompDirective) {
	key, _, typed := strings.Cut(toComplete, "=")
	var out []string
	for _, t := range tables {
		if t == nil {
			continue
		}
		prefix := ""
		if t.Inline {
			prefix = t.Path[strings.LastIndexByte(t.Path, '.')+1:] + "."
		}
		for _, k := range t.Keys {
			name := prefix + k.Name
			// Not on a command line: the INTERFACE argument, overlay
			// ports' keys (the file's), nested tables (their keys are
			// listed).
			if name == "interface" || name == "vxlan" || name == "mtu" || name == "dstport" || k.Kind == config.KindTable || k.Kind == config.KindTables {
				continue
			}
			switch {
			case !typed:
				out = append(out, name+"=")
			case name != key:
			case k.Kind == config.KindBool:
				out = append(out, name+"=true", name+"=false")
			case k.Kind == config.KindEnum:
				for _, v := range k.Values {
					out = append(out, name+"="+v.Name)
				}
			}
		}
	}
	if !typed {
		for _, k := range extra {
			out = append(out, k+"=")
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// names are the running daemon's names of that kind: its bridges, or the
// ports of bridge (of every bridge: "").
func (e *env) names(kind, bridge string) []string {
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
		if bridge != "" && b.Name != bridge {
			continue
		}
		for _, p := range b.Ports {
			names = append(names, p.Name)
		}
	}
	return names
}
