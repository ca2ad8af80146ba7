package filter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// The filter stage (issue 14), both modes, through the daemon and CLI.

// statefulPolicy: default block; ARP passes; TCP from h1 to h2 on the
// ports iperf3 uses passes, and keeps state.
const statefulPolicy = `filter = true
default = "block"

[[bridge.rule]]
action = "pass"
ethertype = "arp"

[[bridge.rule]]
action = "pass"
in = "port-h1"
proto = "tcp"
dst = "10.78.0.2"
dst_port = "20000-65535"
keep_state = true
`

func rules(l *harness.Lab) []ctl.Rule {
	var rs []ctl.Rule
	l.CLIJSON(&rs, "rule", "show", "--json")
	return rs
}

func states(l *harness.Lab) []ctl.State {
	var ss []ctl.State
	l.CLIJSON(&ss, "state", "show", "--json")
	return ss
}

// ruleRow finds rule index (from 1), or the state (-1) or default (0) row.
func ruleRow(t *testing.T, rs []ctl.Rule, index int) ctl.Rule {
	t.Helper()
	for _, r := range rs {
		if (index > 0 && r.Index == index) || (index == 0 && r.Default) || (index == -1 && r.State) {
			return r
		}
	}
	t.Fatalf("rule show has no row %d: %+v", index, rs)
	return ctl.Rule{}
}

// TestFilterStatefulPolicy: iperf3 h1 -> h2 runs; h2 cannot open a TCP
// connection to h1; ping is blocked both ways; and the counters of each
// rule add up to what was sent.
func TestFilterStatefulPolicy(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 2)
		l.WriteConfig(l.Config(statefulPolicy, func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
		l.Start()
		h1, h2 := l.Host(1), l.Host(2)

		// Ping, both ways: the echo requests meet the default, blocked.
		def := ruleRow(t, rules(l), 0).Packets
		if err := h1.Ping(harness.HostIP(2), 2); err == nil {
			t.Fatal("ping h1 -> h2 answered through a default-block filter")
		}
		if err := h2.Ping(harness.HostIP(1), 2); err == nil {
			t.Fatal("ping h2 -> h1 answered through a default-block filter")
		}
		if got := ruleRow(t, rules(l), 0).Packets - def; got != 4 {
			t.Errorf("the default blocked %d frames for 4 echo requests", got)
		}
		if arp := ruleRow(t, rules(l), 1); arp.Packets == 0 || arp.Action != "pass" || arp.EtherType != "arp" {
			t.Errorf("ARP rule %+v: want pass arp, with frames", arp)
		}

		// TCP h1 -> h2 passes, replies by state.
		bps, err := testutil.Iperf(t, h2, harness.HostIP(2), h1, 2, 1)
		if err != nil {
			t.Fatalf("iperf3 h1 -> h2 through the filter: %v", err)
		}
		t.Logf("%s: iperf3 h1 -> h2 %.2f Gbit/s through a stateful filter", mode, bps/1e9)

		// TCP h2 -> h1 does not: no rule passes it, and it is no reply.
		if _, err := testutil.Iperf(t, h1, harness.HostIP(1), h2, 1, 1); err == nil {
			t.Fatal("h2 opened a TCP connection to h1")
		}

		ss := states(l)
		opened := 0
		for _, s := range ss {
			if s.Proto != "tcp" || !strings.HasPrefix(s.From, harness.HostIP(1)+":") || !strings.HasPrefix(s.To, harness.HostIP(2)+":") || s.Rule != 2 {
				t.Errorf("tracked %+v: want only TCP from h1 to h2, by rule 2", s)
			}
			opened++
		}
		if opened < 2 {
			t.Errorf("%d connections tracked, want iperf3's control and data connections", opened)
		}

		// Every frame that reached the filter is counted once, by the
		// rule, the state or the default that decided it; the default's
		// are the filtered drops.
		rs := rules(l)
		var sum uint64
		for _, r := range rs {
			sum += r.Packets
		}
		var rx, filtered, other uint64
		for _, p := range l.AllStats() {
			rx += p.Counters.Get("rx_packets")
			for reason, n := range p.Drops {
				if reason == "filtered" {
					filtered += n
				} else {
					other += n
				}
			}
		}
		if sum != rx-other {
			t.Errorf("rules, state and default counted %d frames; the ports received %d and dropped %d before the filter", sum, rx, other)
		}
		if d := ruleRow(t, rs, 0).Packets; d != filtered {
			t.Errorf("the default blocked %d frames, the ports counted %d filtered drops", d, filtered)
		}
		if r2 := ruleRow(t, rs, 2); r2.Packets != uint64(opened) {
			t.Errorf("rule 2 decided %d frames; each opened one of the %d tracked connections", r2.Packets, opened)
		}
		if st := ruleRow(t, rs, -1); st.Packets == 0 {
			t.Errorf("no frame passed as part of a tracked connection: %+v", st)
		}
		l.Stop()
	})
}

// TestFilterChangesLoseNothing: a stream that a rule passes keeps every
// frame while rules are added, deleted and reloaded around it.
func TestFilterChangesLoseNothing(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 2)
		policy := func(extra string) string {
			return l.Config("filter = true\ndefault = \"block\"\n"+extra+`
[[bridge.rule]]
action = "pass"
ethertype = 0x88b5
`, func(int) string { return fmt.Sprintf("mode = %q\n", mode) })
		}
		l.WriteConfig(policy(""))
		l.Start()
		cap2 := l.Host(2).Capture(t, "eth0")
		send := l.Host(1).RawSender(t, "eth0")
		// h2's address, learned, so the stream is a forward.
		if err := l.Host(2).RawSend("eth0", harness.Marked(harness.HostMAC(1), harness.HostMAC(2), "hello")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)

		stop := make(chan struct{})
		sent := make(chan int)
		f := harness.Marked(harness.HostMAC(2), harness.HostMAC(1), "stream")
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					sent <- n
					return
				default:
				}
				if err := send.Send(f); err == nil {
					n++
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
		changes := [][]string{
			{"rule", "add", "br0", "--at", "1", "action=block", "src=10.9.9.9"},
			{"rule", "add", "br0", "action=block", "proto=udp", "dst_port=1000-2000"},
			{"rule", "del", "br0", "1"},
			{"reload"},
			{"rule", "add", "br0", "--at", "1", "action=block", "src_mac=02:00:00:00:00:66"},
		}
		for i, c := range changes {
			if c[0] == "reload" {
				l.WriteConfig(policy(`
[[bridge.rule]]
action = "block"
src = "10.8.0.0/16"
`))
			}
			if out, err := l.CLI(c...); err != nil {
				t.Fatalf("change %d %v: %v: %s", i, c, err, out)
			}
			time.Sleep(150 * time.Millisecond)
		}
		close(stop)
		n := <-sent
		time.Sleep(200 * time.Millisecond)
		got := 0
		for _, fr := range cap2.Stop() {
			if harness.HasMarker("stream")(fr) {
				got++
			}
		}
		t.Logf("%s: %d frames sent across %d rule changes, %d received", mode, n, len(changes), got)
		if n < 300 || got != n {
			t.Errorf("sent %d frames while the rules changed, h2 received %d", n, got)
		}
		// The last state: the reload's rules, then the CLI's rule first.
		rs := rules(l)
		if len(rs) != 5 || rs[0].SrcMAC != "02:00:00:00:00:66" || rs[1].Src != "10.8.0.0/16" || rs[2].EtherType != "0x88b5" {
			t.Errorf("rules after the changes: %+v", rs)
		}
		if rs[2].Packets == 0 {
			t.Errorf("the stream's rule counted nothing: %+v", rs[2])
		}
		// A bad rule is refused by name, and nothing changes.
		if out, err := l.CLI("rule", "add", "br0", "action=pass", "proto=tcp", "ethertype=arp"); err == nil || !strings.Contains(out, "can never match") {
			t.Errorf("a rule that can never match: %v: %s", err, out)
		}
		if out, err := l.CLI("rule", "del", "br0", "9"); err == nil || !strings.Contains(out, "rules 1..3") {
			t.Errorf("deleting rule 9 of 3: %v: %s", err, out)
		}
		if len(rules(l)) != 5 {
			t.Errorf("a refused change changed the rules")
		}
		l.Stop()
	})
}
