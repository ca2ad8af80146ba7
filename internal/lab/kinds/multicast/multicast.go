// Package multicast is the lab's multicast kind: one sender, G groups
// with L listeners each among the other hosts, and the hosts that joined
// none. The listeners join through their kernels (`ip addr add GROUP dev
// eth0 autojoin`: real IGMP reports reach the bridge), the lab waits
// until the DUT's group table holds every membership, then h1 sends a
// stream to the groups, a flow a group, and every host's sink counts what
// it got of each group. With snooping a listener gets its group's frames
// and nothing else, and a non-listener nothing; without (the nosnoop
// variant, the baseline) every host gets every group's frames.
package multicast

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestFlood) }

// TestMulticast is the multicast kind's name, its results' Test.
const TestMulticast = "multicast"

const (
	// DefaultGroups and DefaultListeners are the groups and each one's
	// listeners when --mcast-groups and --mcast-listeners do not say.
	DefaultGroups, DefaultListeners = 4, 2
	// DefaultRate is each group's frames a second when --mcast-rate does
	// not say: low enough that a flooding DUT, which copies each frame to
	// every host, keeps up on a shared machine, so what a host misses is
	// the DUT's choice and not its limit.
	DefaultRate = 2500
	// joinWait is how long the DUT's table may take to hold every
	// membership (the hosts' first reports go at once).
	joinWait = 5 * time.Second
	// poll is how often the table is read meanwhile.
	poll = 20 * time.Millisecond
	// firstGroup and firstGroup6 are the first group: the groups are
	// 239.1.1.1, .2, ... (IPv4's organisation-local scope, RFC 2365) or
	// ff0e::1:1, ff0e::1:2, ... (IPv6's global scope), not link-local,
	// which every switch floods.
	firstGroup, firstGroup6 = "239.1.1.1", "ff0e::1:1"
	// Complete is the share of its group's frames a listener must get to
	// have got them all: a frame or two lost to a busy machine is not a
	// listener left out.
	Complete = 0.99
)

// Kind is the multicast test: Groups groups with Listeners listeners each
// among the hosts after h1, Rate frames a second to each group.
type Kind struct {
	Groups, Listeners int
	Rate              float64
	// IPv6: the groups are IPv6 groups, joined with MLDv2 reports (the
	// hosts' IPv6 on for it); else IPv4's, with IGMPv3.
	IPv6 bool
}

// Record is one stream to the groups on one DUT (Result.Record).
type Record struct {
	// Snoop: the DUT snoops IGMP (else every group floods); Snooping says
	// how, Unmeasured why the DUT was not measured (it cannot snoop).
	Snoop bool `json:"snoop"`
	// Family is the groups' family: "ipv4" (IGMP; "" in a record of
	// before IPv6) or "ipv6" (MLD).
	Family     string `json:"family,omitempty"`
	Snooping   string `json:"snooping,omitempty"`
	Unmeasured string `json:"unmeasured,omitempty"`
	// Groups are the groups, a flow each, in order; RatePerGroup the
	// frames a second asked for each.
	Groups       []string `json:"groups"`
	RatePerGroup float64  `json:"rate_per_group_pps"`
	// JoinMs is from the first join to the DUT's table holding every
	// membership (snooping only).
	JoinMs float64 `json:"join_ms,omitempty"`
	// Sent is the frames h1 sent, to all groups, in Seconds; Offered
	// their rate.
	Sent    uint64  `json:"sent"`
	Seconds float64 `json:"seconds"`
	Offered float64 `json:"offered_pps"`
	Hosts   []Host  `json:"hosts"`
}

// Host is what one host got of each group.
type Host struct {
	Name string `json:"host"`
	// Group is the group it listens to (an index of Record.Groups), -1
	// for a host that joined none.
	Group int      `json:"group"`
	Got   []uint64 `json:"got"`
}

func (Kind) Name() string { return TestMulticast }

func (Kind) Needs(lab.Scenario) lab.Needs {
	return lab.Needs{Learning: true, AllHosts: true, OneWay: true, Multicast: true}
}

// Estimate: the joins, the learning frames and one trial with its drain.
func (k Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	return time.Second + lab.TrialTime(s.Timing)
}

func (Kind) Preset() lab.Scenario { return preset }

var preset = lab.Scenario{
	Name: "multicast", Title: "Multicast: one sender, groups with a few listeners each, with and without snooping",
	About: "an 11-port bridge: h1 sends, 4 groups (239.1.1.1 to .4) have 2 listeners each among h2..h9 (--mcast-groups, --mcast-listeners), h10 and h11 join none; " +
		"the listeners join through their kernels (IGMPv3 reports; --mcast-family ipv6: groups ff0e::1:1 to :4 and MLDv2), the lab waits until the DUT's group table holds every membership (trestle mdb show, bridge mdb show), " +
		"then h1 sends 64-byte frames at 2,500 a second to each group (--mcast-rate), a flow a group, and each host's sink counts what it got of each group: " +
		"the rate delivered to each listener of its own group and of the others, and to the hosts that joined none. trestle with multicast_snooping in xdp and tc mode, " +
		"the Linux bridge with mcast_snooping and its querier, Open vSwitch with mcast_snooping_enable, and trestle:tc and the Linux bridge with snooping off (@nosnoop, every group flooded); 3 repetitions, about a minute and a half; " +
		"goal: with snooping every listener gets all of its group's frames, and no host a frame of a group it did not join",
	DUTs:  lab.MustSpecs("trestle:xdp", "trestle:tc", "linux-bridge", "ovs", "trestle:tc@nosnoop", "linux-bridge@nosnoop"),
	Hosts: 1 + DefaultGroups*DefaultListeners + 2, Chain: []int{1}, Sizes: []lab.FrameSize{"64"},
	Tests: []lab.Kind{Kind{Groups: DefaultGroups, Listeners: DefaultListeners, Rate: DefaultRate}}, Reps: 3, Timing: lab.DefaultTiming,
}

// Prepare refuses a multicast test it cannot run, and says how it measures.
func (k Kind) Prepare(s lab.Scenario) ([]string, error) {
	if k.Groups < 1 || k.Groups > 64 {
		return nil, fmt.Errorf("multicast: %d groups: 1 to 64 (a flow each, which the sinks track)", k.Groups)
	}
	if k.Listeners < 1 {
		return nil, fmt.Errorf("multicast: %d listeners a group: at least 1", k.Listeners)
	}
	if k.Rate <= 0 {
		return nil, fmt.Errorf("multicast: a group's rate %v: frames a second, above 0", k.Rate)
	}
	if need := 1 + k.Groups*k.Listeners + 1; s.Hosts < need {
		return nil, fmt.Errorf("multicast: %d hosts: the sender, %d groups of %d listeners and a host that joins none need %d", s.Hosts, k.Groups, k.Listeners, need)
	}
	fam, proto := k.family()
	how := "`ip addr add GROUP/32 dev eth0 autojoin`"
	if k.IPv6 {
		how = "`ip -6 addr add GROUP/128 dev eth0 autojoin`, its IPv6 on first (the lab's namespaces have it off) with no duplicate address detection"
	}
	return []string{fmt.Sprintf("multicast (%s): h1 sends; %s; hosts h%d..h%d join none. Each listener joins its group with %s (its kernel sends %s reports); "+
		"with snooping the lab waits up to %v, reading the DUT's group table every %v, until it holds every membership (join: from the first join to then). "+
		"Then learning frames from every host, and one trial of %v: %s frames at %s to each group (a flow a group, to its group's MAC), each host's sink counting what it got of each flow. "+
		"A listener got its group's frames when it got %.0f%% of them or more; a non-listener should get none with snooping, every frame without",
		fam, k.layout(), 2+k.Groups*k.Listeners, s.Hosts, how, proto, joinWait, poll, s.Timing.Search.Trial, s.FirstSize().Label(), lab.PPSText(k.Rate), 100*Complete)}, nil
}

// layout says which hosts listen to which group.
func (k Kind) layout() string {
	var parts []string
	for g := range k.Groups {
		var hs []string
		for _, i := range k.listeners(g) {
			hs = append(hs, fmt.Sprintf("h%d", i+1))
		}
		parts = append(parts, fmt.Sprintf("%s: %s", k.group(g), strings.Join(hs, ", ")))
	}
	return strings.Join(parts, "; ")
}

// listeners are the host indexes (0-based) of group g's listeners.
func (k Kind) listeners(g int) []int {
	var out []int
	for l := range k.Listeners {
		out = append(out, 1+g*k.Listeners+l)
	}
	return out
}

// group is the g-th group's address (g below 64).
func (k Kind) group(g int) string {
	if k.IPv6 {
		ip := net.ParseIP(firstGroup6)
		ip[15] += byte(g)
		return ip.String()
	}
	ip := net.ParseIP(firstGroup).To4()
	ip[3] += byte(g)
	return ip.String()
}

// family is the groups' family, and the protocol hosts join them with.
func (k Kind) family() (name, protocol string) {
	if k.IPv6 {
		return "ipv6", "MLDv2"
	}
	return "ipv4", "IGMPv3"
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	r := u.Base
	r.Test, r.Param, r.Unit = TestMulticast, "non-listener", "pps"
	rig := u.Rig
	m := rig.T.Multicast
	sn, ok := rig.DUT.(lab.Snooper)
	rec := &Record{RatePerGroup: k.Rate}
	for g := range k.Groups {
		rec.Groups = append(rec.Groups, k.group(g))
	}
	if !ok || m == nil {
		rec.Unmeasured = fmt.Sprintf("%s has no IGMP snooping the lab can turn on or off (trestle's multicast_snooping, the Linux bridge's mcast_snooping, Open vSwitch's mcast_snooping_enable)", rig.DUT.Name())
		r.Note = rec.Unmeasured
		if err := r.SetRecord(rec); err != nil {
			return err
		}
		u.Add(r)
		return fmt.Errorf("%w: multicast: %s", lab.ErrUnavailable, rec.Unmeasured)
	}
	if need := 1 + k.Groups*k.Listeners + 1; len(rig.T.Hosts) < need {
		return fmt.Errorf("multicast: %d hosts, need %d", len(rig.T.Hosts), need)
	}
	rec.Snoop, rec.Snooping = m.Snoop, sn.Snooping(*m)
	rec.Family, _ = k.family()
	if k.IPv6 {
		if err := ipv6On(rig.T, k.Groups*k.Listeners); err != nil {
			return err
		}
	}
	want := map[lab.Membership]bool{}
	t0 := time.Now()
	for g := range k.Groups {
		for _, i := range k.listeners(g) {
			h := rig.T.Hosts[i]
			if err := k.join(ctx, h, g); err != nil {
				return err
			}
			want[lab.Membership{Group: k.group(g), Port: h.Port}] = true
		}
	}
	if m.Snoop {
		u.Status(fmt.Sprintf("multicast: %d listeners joined; waiting for the group table", len(want)))
		if err := waitTable(ctx, sn, rig.T, want); err != nil {
			return err
		}
		rec.JoinMs = lab.Millis(time.Since(t0))
	}
	mix, err := u.S.FirstSize().Mix()
	if err != nil {
		return err
	}
	if least := frame.MinSize(false, k.IPv6); k.IPv6 && len(mix.Sizes) == 1 && mix.Sizes[0] < least {
		mix.Sizes[0] = least // a 64-byte frame holds no IPv6 test frame
	}
	var to []int
	for i := 1; i < len(rig.T.Hosts); i++ {
		to = append(to, i)
	}
	tm := u.S.Timing
	u.Status(fmt.Sprintf("multicast: %s to each of %d groups", lab.PPSText(k.Rate), k.Groups))
	tr, err := rig.Trial(ctx, lab.TrialSpec{From: 0, To: to, Rate: k.Rate * float64(k.Groups), Duration: tm.Search.Trial, Mix: mix, Flows: k.Groups,
		DstIPs: frame.IPRange{First: net.ParseIP(k.group(0)), Last: net.ParseIP(k.group(k.Groups - 1))}, GroupMACs: true, IPv6: k.IPv6,
		Learn: true, Settle: tm.Settle, Drain: tm.Drain})
	if err != nil {
		return err
	}
	rec.Sent, rec.Seconds, rec.Offered = tr.Sent, tr.Seconds, tr.Offered
	for _, i := range to {
		got, err := rig.Sink(i).FlowReceived(k.Groups)
		if err != nil {
			return err
		}
		rec.Hosts = append(rec.Hosts, Host{Name: fmt.Sprintf("h%d", i+1), Group: k.groupOf(i), Got: got})
	}
	r.Value = rec.nonListenerPPS()
	if rec.Sent == 0 {
		r.Error = "the sender sent nothing"
	}
	if err := r.SetRecord(rec); err != nil {
		return err
	}
	u.Add(r)
	return nil
}

// join makes host h a listener of group g: the address added with
// autojoin, so that its kernel joins the group and reports it.
func (k Kind) join(ctx context.Context, h *lab.Host, g int) error {
	fam, plen := "-4", "/32"
	if k.IPv6 {
		fam, plen = "-6", "/128"
	}
	if _, err := h.NS.Run(ctx, "ip", fam, "addr", "add", k.group(g)+plen, "dev", h.If, "autojoin"); err != nil {
		return fmt.Errorf("multicast: %s joins %s: %w", h.NS.Name, k.group(g), err)
	}
	return nil
}

// ipv6On turns IPv6 on for the listeners h2..h(n+1), which the lab's
// namespaces have off, with no duplicate address detection: their
// link-local address is theirs at once, and their MLD reports come from
// it rather than from the unspecified address.
func ipv6On(t *lab.Topo, n int) error {
	for _, h := range t.Hosts[1 : n+1] {
		for _, kv := range [][2]string{{"accept_dad", "0"}, {"disable_ipv6", "0"}} {
			if err := h.NS.Sysctl("net/ipv6/conf/"+h.If+"/"+kv[0], kv[1]); err != nil {
				return fmt.Errorf("multicast: IPv6 on in %s: %w", h.NS.Name, err)
			}
		}
	}
	return nil
}

// groupOf is the group host i listens to, -1 for none.
func (k Kind) groupOf(i int) int {
	if i < 1 || i > k.Groups*k.Listeners {
		return -1
	}
	return (i - 1) / k.Listeners
}

// waitTable waits until the DUT's table holds every membership of want.
func waitTable(ctx context.Context, sn lab.Snooper, t *lab.Topo, want map[lab.Membership]bool) error {
	t0 := time.Now()
	for {
		ms, err := sn.Memberships(ctx, t)
		if err != nil {
			return err
		}
		var missing []string
		for w := range want {
			if !slices.Contains(ms, w) {
				missing = append(missing, w.Port+" in "+w.Group)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Since(t0) > joinWait {
			slices.Sort(missing)
			return fmt.Errorf("multicast: the group table lacks %d of %d memberships %v after the joins: %s", len(missing), len(want), joinWait, strings.Join(missing, ", "))
		}
		lab.SleepCtx(ctx, poll)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// perGroup is the frames sent to each group: the generator takes the
// flows in turn, so each got a share of the sent to within one.
func (rec Record) perGroup() float64 {
	if len(rec.Groups) == 0 {
		return 0
	}
	return float64(rec.Sent) / float64(len(rec.Groups))
}

// pps is n frames over the trial, a second.
func (rec Record) pps(n uint64) float64 {
	if rec.Seconds <= 0 {
		return 0
	}
	return float64(n) / rec.Seconds
}

func sum(v []uint64) uint64 {
	var n uint64
	for _, x := range v {
		n += x
	}
	return n
}

// listenerFigures are, over the listeners: the median of their own
// group's rate, the least share of it any got, and the median rate of
// the other groups' frames they got.
func (rec Record) listenerFigures() (own, least, stray float64, ok bool) {
	var owns, strays []float64
	least = 1
	for _, h := range rec.Hosts {
		if h.Group < 0 || h.Group >= len(h.Got) {
			continue
		}
		mine := h.Got[h.Group]
		owns = append(owns, rec.pps(mine))
		strays = append(strays, rec.pps(sum(h.Got)-mine))
		if pg := rec.perGroup(); pg > 0 {
			least = min(least, float64(mine)/pg)
		}
	}
	if len(owns) == 0 {
		return 0, 0, 0, false
	}
	return lab.Median(owns), least, lab.Median(strays), true
}

// nonListenerPPS is the median rate the hosts that joined no group got
// (every group's frames summed).
func (rec Record) nonListenerPPS() float64 {
	var v []float64
	for _, h := range rec.Hosts {
		if h.Group < 0 {
			v = append(v, rec.pps(sum(h.Got)))
		}
	}
	if len(v) == 0 {
		return 0
	}
	return lab.Median(v)
}

// nonListenerShare is the share of the sent frames that reached a host
// that joined no group, over those hosts.
func (rec Record) nonListenerShare() float64 {
	var got uint64
	n := 0
	for _, h := range rec.Hosts {
		if h.Group < 0 {
			got += sum(h.Got)
			n++
		}
	}
	if n == 0 || rec.Sent == 0 {
		return 0
	}
	return float64(got) / float64(rec.Sent) / float64(n)
}

// Flags: the groups, their listeners and the rate (for the multicast scenario).
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{
		{Name: "mcast-groups", Type: lab.FlagInt, Lo: 1, Hi: 64, For: "the multicast scenario",
			Usage: fmt.Sprintf("multicast: the groups h1 sends to, a flow each (default %d; the scenario's hosts grow to hold their listeners and 2 that join none)", DefaultGroups),
			Set:   setCount(func(k Kind, n int) Kind { k.Groups = n; return k })},
		{Name: "mcast-listeners", Type: lab.FlagInt, Lo: 1, Hi: 64, For: "the multicast scenario",
			Usage: fmt.Sprintf("multicast: the listeners of each group (default %d)", DefaultListeners),
			Set:   setCount(func(k Kind, n int) Kind { k.Listeners = n; return k })},
		{Name: "mcast-family", Type: lab.FlagString, For: "the multicast scenario",
			Usage: "multicast: the groups' family, ipv4 (IGMPv3, the default) or ipv6 (MLDv2; the frames at least IPv6's least test frame)",
			Set: lab.Sets(func(k Kind, v string) (Kind, error) {
				switch v {
				case "ipv4", "ipv6":
					k.IPv6 = v == "ipv6"
					return k, nil
				}
				return k, fmt.Errorf("--mcast-family %q: ipv4 or ipv6", v)
			})},
		{Name: "mcast-rate", Type: lab.FlagInt, Lo: 1, Hi: 10_000_000, For: "the multicast scenario",
			Usage: fmt.Sprintf("multicast: the frames a second h1 sends to each group (default %d)", DefaultRate),
			Set:   lab.Sets(func(k Kind, n int) (Kind, error) { k.Rate = float64(n); return k, nil })},
	}
}

// setCount is a flag's Set that changes the groups or the listeners: the
// scenario's hosts grow to hold them.
func setCount(change func(k Kind, n int) Kind) func(s *lab.Scenario, v any) error {
	return func(s *lab.Scenario, v any) error {
		k, ok := lab.TestOf[Kind](*s)
		if !ok {
			return nil
		}
		k = change(k, v.(int))
		lab.Configure(s, func(Kind) Kind { return k })
		s.Hosts = max(s.Hosts, k.hosts())
		return nil
	}
}

// hosts are the hosts k needs: the sender, the listeners and 2 that join none.
func (k Kind) hosts() int { return 1 + k.Groups*k.Listeners + 2 }

// row is one DUT's streams, over its repetitions.
type row = lab.DUTRecords[Record]

// rows are the run's multicast results by DUT, in the run's DUT order.
func rows(run *lab.Run) []*row {
	return lab.RecordsByDUT(run, TestMulticast, func(r Record) string { return r.Unmeasured })
}

// figure is one column of the table: its name, its value in a stream,
// its text, and whether ministat sums it up.
type figure struct {
	name string
	of   func(Record) float64
	text func(float64) string
	mini bool
}

func pctText(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
func msText(v float64) string  { return fmt.Sprintf("%.0f ms", v) }

var figures = []figure{
	{"sent", func(r Record) float64 { return r.Offered }, lab.PPSText, false},
	{"table in", func(r Record) float64 { return r.JoinMs }, msText, false},
	{"listener, own group", func(r Record) float64 { own, _, _, _ := r.listenerFigures(); return own }, lab.PPSText, true},
	{"least listener's share", func(r Record) float64 { _, least, _, _ := r.listenerFigures(); return least }, pctText, false},
	{"listener, other groups", func(r Record) float64 { _, _, stray, _ := r.listenerFigures(); return stray }, lab.PPSText, true},
	{"non-listener", func(r Record) float64 { return r.nonListenerPPS() }, lab.PPSText, true},
	{"non-listener's share of sent", func(r Record) float64 { return r.nonListenerShare() }, pctText, false},
}

func head() []string {
	h := []string{"DUT", "snooping"}
	for _, f := range figures {
		h = append(h, f.name)
	}
	return append(h, "listeners complete")
}

// cells are a row's figures: medians over the repetitions, with the least
// and the most.
func cells(rw *row) []string {
	if rw.Unmeasured != "" {
		c := []string{rw.DUT, "none", "not measured"}
		for range figures[1:] {
			c = append(c, "-")
		}
		return append(c, "-")
	}
	snoop := "off"
	if len(rw.Recs) > 0 && rw.Recs[0].Snoop {
		snoop = "on"
	}
	c := []string{rw.DUT, snoop}
	for _, f := range figures {
		if f.name == "table in" && snoop == "off" {
			c = append(c, "-")
			continue
		}
		c = append(c, lab.SpreadText(rw.Values(f.of), f.text))
	}
	complete := 0
	for _, rec := range rw.Recs {
		if _, least, _, ok := rec.listenerFigures(); ok && least >= Complete {
			complete++
		}
	}
	return append(c, fmt.Sprintf("%d of %d", complete, len(rw.Recs)))
}

// ministat is ministat's summary line of each rate of a row with 3 or
// more streams: N, Min, Max, Median, Avg, Stddev.
func ministat(rw *row) []string {
	var out []string
	for _, f := range figures {
		if !f.mini {
			continue
		}
		if l, ok := lab.MinistatLine(rw.DUT, f.name+" pps", rw.Values(f.of)); ok {
			out = append(out, l)
		}
	}
	return out
}

// warnings: with snooping on, trestle's streams where a listener missed
// its group's frames or a host got a group it did not join; a peer's
// figures, and every DUT's without snooping, are findings.
func warnings(rws []*row) []string {
	var out []string
	for _, rw := range rws {
		out = append(out, rw.Problems()...)
		if rw.Unmeasured != "" || !lab.CapsOf(rw.DUT).Subject {
			continue
		}
		var short, stray []string
		for i, rec := range rw.Recs {
			if !rec.Snoop {
				continue
			}
			_, least, strayPPS, ok := rec.listenerFigures()
			if ok && least < Complete {
				short = append(short, fmt.Sprintf("#%d %s", i+1, pctText(least)))
			}
			if strayPPS > 0 || rec.nonListenerPPS() > 0 {
				stray = append(stray, fmt.Sprintf("#%d", i+1))
			}
		}
		if len(short) > 0 {
			out = append(out, fmt.Sprintf("warning: %s: a listener got less than %.0f%% of its group's frames in %d of %d (%s)", rw.DUT, 100*Complete, len(short), len(rw.Recs), strings.Join(short, ", ")))
		}
		if len(stray) > 0 {
			out = append(out, fmt.Sprintf("warning: %s: hosts got frames of groups they did not join, snooping on, in %d of %d (%s): the goal is none", rw.DUT, len(stray), len(rw.Recs), strings.Join(stray, ", ")))
		}
	}
	return out
}

// Section is the multicast kind's report section: one row a DUT,
// ministat's summaries, every stream host by host, and how each DUT
// snoops.
func (Kind) Section(run *lab.Run) (terminal, markdown string) {
	rws := rows(run)
	if len(rws) == 0 {
		return "", ""
	}
	var cs [][]string
	var mini []string
	for _, rw := range rws {
		cs = append(cs, cells(rw))
		mini = append(mini, ministat(rw)...)
	}
	ws := warnings(rws)
	var t strings.Builder
	t.WriteString("\nmulticast, one sender to groups with a few listeners each (medians over the repetitions, least..most; a listener's rate of its own group and of the others, a non-listener's of all; complete: every listener got its group's frames):\n")
	lab.TerminalRows(&t, head(), cs, append(mini, ws...))
	var m strings.Builder
	m.WriteString("\n## Multicast\n\nOne sender (h1) streams to each group, a flow a group; each group's listeners joined through their kernels (IGMPv3 reports), and the lab waited for the DUT's group table to hold every membership (table in: from the first join to then). " +
		"Each host's sink counts what it got of each group: a listener's rate of its own group and of the others (medians over the listeners), the least share of its group's frames any listener got, " +
		"and a non-listener's rate (all groups; median over those hosts) and share of the frames sent. With snooping a listener gets its own group and nothing else and a non-listener nothing; without, every host gets everything. " +
		"Medians over the repetitions, with the least and the most.\n\n")
	var mb bytes.Buffer
	lab.MarkdownRows(&mb, head(), cs, ws)
	m.WriteString(mb.String())
	if len(mini) > 0 {
		m.WriteString("\nministat's summaries:\n\n")
		for _, l := range mini {
			m.WriteString("- " + l + "\n")
		}
	}
	m.WriteString("\nEvery stream, in order: each host's frames of each group, in the groups' order (its own group's starred), of the frames sent to each group")
	for _, rw := range rws {
		if len(rw.Recs) > 0 {
			fmt.Fprintf(&m, " (%s)", strings.Join(rw.Recs[0].Groups, ", "))
			break
		}
	}
	m.WriteString(":\n\n")
	for _, rw := range rws {
		for i, rec := range rw.Recs {
			var hs []string
			for _, h := range rec.Hosts {
				hs = append(hs, h.Name+" "+h.gotText())
			}
			fmt.Fprintf(&m, "- %s #%d, of %.0f a group: %s\n", rw.DUT, i+1, rec.perGroup(), strings.Join(hs, "; "))
		}
	}
	m.WriteString("\nHow each DUT snoops:\n\n")
	for _, rw := range rws {
		if len(rw.Recs) > 0 {
			fmt.Fprintf(&m, "- %s: %s\n", rw.DUT, rw.Recs[0].Snooping)
		}
	}
	m.WriteString("\n")
	return t.String(), m.String()
}

// gotText is a host's frames of each group, its own group's starred:
// "*5000/0/0/0".
func (h Host) gotText() string {
	var parts []string
	for g, n := range h.Got {
		p := fmt.Sprint(n)
		if g == h.Group {
			p = "*" + p
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "/")
}
