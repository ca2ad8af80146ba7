package main

import (
	"fmt"
	"strings"

	"github.com/trestle/trestle/internal/lab"
)

// labScenarioList is the scenarios, one line each with its title, for
// `trestle lab --help`.
func labScenarioList() string {
	var b strings.Builder
	for _, n := range lab.ScenarioNames() {
		s := lab.Scenarios[n]
		title := s.Title
		if s.Unavailable != "" {
			title = "not yet: " + s.Unavailable
		}
		fmt.Fprintf(&b, "  %-14s %s\n", n, title)
	}
	return b.String()
}

// labManual is trestle-lab(8)'s description, as Markdown for the man page
// generator: made from the lab's scenario table (each scenario's title, what
// it measures, its DUTs, tests and goals), so the page lists what the lab
// runs, in one section SCENARIOS with a subsection each (md2man makes "#"
// and "##" sections, "###" subsections); the methods and the DUT grammar in
// full are docs/lab.md's.
func labManual() string {
	var b strings.Builder
	b.WriteString(`Build test topologies out of network namespaces and veth pairs, put each device under test (DUT) between the hosts in turn, drive it with trestle's generator and sink (RFC 2544 and RFC 2889 methods) and iperf3, and report medians, ratios to the straight veth path and to the floor (a bare XDP redirect; floor:tc, a bare tc redirect, for trestle at tc) measured in the same run, and ministat comparisons. Everything it creates is named tl*PID*-... and removed when it ends, also on Ctrl-C or failure ('trestle lab clean' removes what a killed run left).

# SCENARIOS

`)
	for _, n := range lab.ScenarioNames() {
		s := lab.Scenarios[n]
		fmt.Fprintf(&b, "### %s\n\n**%s**\n\n", n, s.Title)
		if s.Unavailable != "" {
			fmt.Fprintf(&b, "Not yet: %s\n\n", s.Unavailable)
			continue
		}
		fmt.Fprintf(&b, "%s\n\n", s.About)
		fmt.Fprintf(&b, "DUTs: %s. Tests: %s.\n\n", strings.Join(lab.SpecTexts(s.DUTs), ", "), strings.Join(s.TestNames(), ", "))
		for _, g := range s.Goals {
			fmt.Fprintf(&b, "- Goal: %s.\n", g.Why)
		}
		if len(s.Goals) > 0 {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "# DUTS\n\n%s; variants after @ (vlan, mirror, capture, patch, veth, rules=N, filter, bin=PATH, host offloads) and the floors floor@vlan and floor@mirror (floor:tc@vlan and floor:tc@mirror at tc). docs/lab.md tells each, and how the lab measures: trials, the NDR/PDR search, both directions, latency under load, placement, repetitions.\n", strings.Join(lab.DUTNames, ", "))
	return b.String()
}
