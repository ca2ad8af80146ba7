package frrconf

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDocMatches: the iBGP and eBGP examples of docs/overlay.md ("FRR
// configuration") are what BGPd writes for the same sites (the walk-through's
// host A, 10.255.0.1 on 192.0.2.1, peering with host B on 192.0.2.2; one AS,
// or 65001 and 65002, as tests/overlay numbers them), and so is the Linux
// host's of "A mixed fabric" (host C, 10.255.0.3, peering with A and B on
// 192.0.2.1 and 192.0.2.2, as tests/overlay's third site), line for line, but for
// the lines only the tests have: the hostname, and the neighbour timers that
// make a session quick, which the doc names instead. So the doc cannot drift
// from the configuration tests/overlay runs.
func TestDocMatches(t *testing.T) {
	b, err := os.ReadFile("../../docs/overlay.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const frr, mixed = "## FRR configuration", "## A mixed fabric"
	blocks := map[string]map[string]string{frr: docBlocks(t, doc, frr), mixed: docBlocks(t, doc, mixed)}
	for _, tc := range []struct {
		heading, label string
		site           Site
	}{
		{frr, "iBGP", Site{Name: "1", ASN: 65000, RouterID: "10.255.0.1", Peers: []Peer{{"192.0.2.2", 65000}}}},
		{frr, "eBGP", Site{Name: "1", ASN: 65001, RouterID: "10.255.0.1", Peers: []Peer{{"192.0.2.2", 65002}}}},
		{mixed, "**FRR**", Site{Name: "3", ASN: 65000, RouterID: "10.255.0.3", Peers: []Peer{{"192.0.2.1", 65000}, {"192.0.2.2", 65000}}}},
	} {
		block, ok := blocks[tc.heading][tc.label]
		if !ok {
			t.Errorf("docs/overlay.md %q has no %s example after a paragraph that starts with %q (it has %v)", tc.heading, tc.label, tc.label, slices.Sorted(maps.Keys(blocks[tc.heading])))
			continue
		}
		var want []string
		for _, l := range lines(BGPd(tc.site)) {
			if setting, ok := testOnly(l); ok {
				if setting != "" && !strings.Contains(doc, "`"+setting+"`") {
					t.Errorf("%s: the tests' %q is not named in docs/overlay.md (as `%s`)", tc.label, l, setting)
				}
				continue
			}
			want = append(want, l)
		}
		got := lines(block)
		for _, l := range want {
			if !slices.Contains(got, l) {
				t.Errorf("docs/overlay.md's %s example lacks %q, which the tests' configuration has", tc.label, l)
			}
		}
		for _, l := range got {
			if !slices.Contains(want, l) {
				t.Errorf("docs/overlay.md's %s example has %q, which the tests' configuration has not", tc.label, l)
			}
		}
	}
}

// testOnly says whether a line of BGPd's is there for the tests only: the
// hostname (whose setting the doc needs not name), or a neighbour's timers
// (setting: the line without "neighbor ADDR ", which the doc names).
func testOnly(line string) (setting string, ok bool) {
	f := strings.Fields(line)
	switch {
	case len(f) > 0 && (f[0] == "hostname" || f[0] == "log"):
		return "", true
	case len(f) > 2 && f[0] == "neighbor" && (f[2] == "timers" || f[2] == "advertisement-interval"):
		return strings.Join(f[2:], " "), true
	}
	return "", false
}

// docBlocks returns the fenced blocks of the section of doc under heading,
// each by the first word of the paragraph before it ("iBGP", "eBGP").
func docBlocks(t *testing.T, doc, heading string) map[string]string {
	t.Helper()
	_, sec, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/overlay.md has no %q", heading)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	parts := strings.Split(sec, "```")
	if len(parts)%2 == 0 {
		t.Fatalf("docs/overlay.md %q: a fence is not closed", heading)
	}
	out := map[string]string{}
	for i := 1; i < len(parts); i += 2 {
		prose := strings.TrimSpace(parts[i-1])
		if j := strings.LastIndex(prose, "\n\n"); j >= 0 {
			prose = strings.TrimSpace(prose[j:])
		}
		label, _, _ := strings.Cut(prose, " ")
		block := parts[i]
		if nl := strings.IndexByte(block, '\n'); nl >= 0 {
			block = block[nl+1:] // the fence's info string
		}
		if _, dup := out[label]; dup {
			t.Fatalf("docs/overlay.md %q: two blocks after a paragraph starting %q", heading, label)
		}
		out[label] = block
	}
	return out
}

// lines are s's non-empty lines, leading spaces kept (they say which
// section a line is in).
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, " \t"); l != "" {
			out = append(out, l)
		}
	}
	return out
}
