package overlay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// fakeSessions is BGP's word: the VTEPs whose session is away, and what
// was asked.
type fakeSessions struct {
	away  map[netip.Addr]bool
	asked []netip.Addr
}

func (f *fakeSessions) Away(vtep netip.Addr, since time.Time) bool {
	f.asked = append(f.asked, vtep)
	return f.away[vtep]
}

// TestStaleSessionAway: VTEP B's BGP session goes (its FRR restarting, for
// longer than StaleWait) while C withdraws a MAC over a live session:
// B's MAC and flood-list entry stay, stale, past StaleWait, and C's MAC
// goes after it as before. B's session back: the MAC it writes again is
// no longer stale, and its stale flood-list entry goes (zebra writes the
// VTEP back). A session that never comes back is held HoldLimit at most.
func TestStaleSessionAway(t *testing.T) {
	w := newStaleWorld(t)
	s := &fakeSessions{away: map[netip.Addr]bool{}}
	w.m.SetSessions(s)
	w.handle(false, remote(zero, vtepB), remote(zero, vtepC))
	w.zebraWrites(macA)
	w.m.Handle(onVXOf(macC))
	w.m.Handle(remote(macC, vtepC))

	// B's session goes: zebra withdraws its MAC and flood entry; C's MAC
	// is withdrawn over C's live session.
	s.away[vtepB] = true
	w.zebraWithdraws(macA)
	w.handle(false, deleted(onVXOf(macC)), deleted(remote(macC, vtepC)), remote(macC, vtepC))
	if w.m.ZebraExited() {
		t.Fatal("a hold began with zebra's flood list (C) there")
	}
	if stale, unknown := w.m.BGPNeeds(func(a netip.Addr) bool { return a == vtepC }); !stale || unknown {
		t.Errorf("BGPNeeds: stale %v, unknown %v; want stale, and B's flood entry (stale) not asked for", stale, unknown)
	}
	w.clock = w.clock.Add(StaleWait)
	w.k.writes = nil
	if done, err := w.m.Settle(); err != nil || !reflect.DeepEqual(done, Settled{Removed: 1, Away: 2}) {
		t.Errorf("Settle after StaleWait: %+v, %v; want C's MAC removed, B's MAC and flood entry kept", done, err)
	}
	if want := []string{"unstale " + macC.String() + " 192.0.2.3"}; !slices.Equal(w.k.writes, want) {
		t.Errorf("writes after StaleWait: %q; want %q", w.k.writes, want)
	}
	if got, want := w.remotes(), []string{macA.String() + " 192.0.2.2 stale"}; !slices.Equal(got, want) {
		t.Errorf("remotes after StaleWait: %q; want %q", got, want)
	}
	w.clock = w.clock.Add(10 * time.Second)
	if done, _ := w.m.Settle(); !reflect.DeepEqual(done, Settled{Away: 2}) {
		t.Errorf("Settle with B's session away 11.5s: %+v", done)
	}

	// B back: zebra writes macA again; its session up for HoldQuiet, its
	// flood entry (trestle's) goes.
	w.zebraWrites(macA)
	s.away[vtepB] = false
	w.k.writes = nil
	if done, _ := w.m.Settle(); !reflect.DeepEqual(done, Settled{Removed: 1}) {
		t.Errorf("Settle with B back: %+v; want its stale flood entry removed", done)
	}
	if want := []string{"unstale " + zero.String() + " 192.0.2.2"}; !slices.Equal(w.k.writes, want) {
		t.Errorf("writes with B back: %q; want %q", w.k.writes, want)
	}
	if got, want := w.remotes(), []string{macA.String() + " 192.0.2.2"}; !slices.Equal(got, want) {
		t.Errorf("remotes with B back: %q; want %q", got, want)
	}

	// The kernel's word of trestle's deletion, and zebra writes the VTEP
	// back.
	w.handle(false, deleted(remote(zero, vtepB)), remote(zero, vtepB))

	// Away for good: HoldLimit at most.
	s.away[vtepB] = true
	w.zebraWithdraws(macA)
	w.clock = w.clock.Add(HoldLimit - time.Millisecond)
	if done, _ := w.m.Settle(); done.Removed != 0 {
		t.Errorf("Settle before HoldLimit: %+v", done)
	}
	w.clock = w.clock.Add(time.Millisecond)
	if done, _ := w.m.Settle(); !reflect.DeepEqual(done, Settled{Removed: 2}) {
		t.Errorf("Settle at HoldLimit: %+v", done)
	}
}

// bgpd's answers (FRR 8.4.4, trimmed): site A (10.255.0.1, neighbour
// 192.0.2.1) and C (10.255.0.3, 192.0.2.3), seen from B.
const (
	imetJSON = `{"10.255.0.1:2":{"rd":"10.255.0.1:2","[3]:[0]:[32]:[10.255.0.1]":{"prefix":"[3]:[0]:[32]:[10.255.0.1]","prefixLen":352,"paths":[[{"valid":true,"bestpath":true,"routeType":3,"ip":"10.255.0.1","peerId":"192.0.2.1","nexthops":[{"ip":"10.255.0.1","afi":"ipv4","used":true}]}]]}},` +
		`"10.255.0.2:2":{"rd":"10.255.0.2:2","[2]:[0]:[48]:[02:00:00:00:02:01]":{"paths":[[{"peerId":"(unspec)"}]]},"[3]:[0]:[32]:[10.255.0.2]":{"prefix":"[3]:[0]:[32]:[10.255.0.2]","paths":[[{"valid":true,"routeType":3,"ip":"10.255.0.2","peerId":"(unspec)","nexthops":[{"ip":"10.255.0.2"}]}]]}},` +
		`"10.255.0.3:2":{"rd":"10.255.0.3:2","[3]:[0]:[32]:[10.255.0.3]":{"paths":[[{"routeType":3,"ip":"10.255.0.3","peerId":"192.0.2.3"}]]}},"numPrefix":3,"numPaths":3}`
	// imetNoA: A's route gone with its session.
	imetNoA    = `{"10.255.0.3:2":{"rd":"10.255.0.3:2","[3]:[0]:[32]:[10.255.0.3]":{"paths":[[{"routeType":3,"ip":"10.255.0.3","peerId":"192.0.2.3"}]]}},"numPrefix":1,"numPaths":1}`
	summaryFmt = `{"routerId":"10.255.0.2","as":65000,"peers":{"192.0.2.1":{"hostname":"bgpd-A","peerUptimeMsec":%d,"pfxRcd":2,"state":"%s","connectionsDropped":1},"192.0.2.3":{"peerUptimeMsec":3600000,"state":"Established"}},"totalPeers":2}`
)

// TestBGPViewAway: which withdrawals bgpd's answers hold.
func TestBGPViewAway(t *testing.T) {
	var (
		a, c, other = netip.MustParseAddr("10.255.0.1"), netip.MustParseAddr("10.255.0.3"), netip.MustParseAddr("10.255.0.9")
		t0          = time.Unix(2e9, 0) // routes withdrawn
	)
	summary := func(uptimeMs int, state string) []byte {
		return []byte(fmt.Sprintf(summaryFmt, uptimeMs, state))
	}
	b := NewBGPView()
	if b.Away(a, t0) {
		t.Error("Away before bgpd answered")
	}
	if err := b.Update(t0.Add(-time.Minute), summary(60000, "Established"), []byte(imetJSON), nil); err != nil {
		t.Fatal(err)
	}
	if !b.Knows(a) || !b.Knows(c) || b.Knows(netip.MustParseAddr("10.255.0.2")) || b.Knows(other) {
		t.Errorf("Knows: A %v, C %v, this host %v, other %v; want A and C", b.Knows(a), b.Knows(c), b.Knows(netip.MustParseAddr("10.255.0.2")), b.Knows(other))
	}
	if !b.Away(a, t0) {
		t.Error("no answer since the withdrawal: want held until one")
	}
	for _, tc := range []struct {
		name     string
		at       time.Duration // after t0
		uptimeMs int
		state    string
		vtep     netip.Addr
		want     bool
	}{
		{"A's session down, its route gone", 200 * time.Millisecond, 0, "Idle", a, true},
		{"A's session down for a while", 20 * time.Second, 20000, "Active", a, true},
		{"A's session back (1s, whole seconds)", 4 * time.Second, 1000, "Established", a, true},
		{"A's session back for HoldQuiet and more", 6 * time.Second, 3000, "Established", a, false},
		{"A withdrew over a live session", 1500 * time.Millisecond, 3600000, "Established", a, false},
		{"A's session came up 1s before the withdrawal (bgpd's seconds)", 1500 * time.Millisecond, 2000, "Established", a, true},
		{"C withdrew over a live session while A is down", time.Second, 0, "Idle", c, false},
		{"a VTEP no session carried", time.Second, 0, "Idle", other, false},
	} {
		routes := imetJSON
		if tc.state != "Established" {
			routes = imetNoA
		}
		if err := b.Update(t0.Add(tc.at), summary(tc.uptimeMs, tc.state), []byte(routes), nil); err != nil {
			t.Fatal(err)
		}
		if got := b.Away(tc.vtep, t0); got != tc.want {
			t.Errorf("%s: Away %v, want %v", tc.name, got, tc.want)
		}
	}

	// This host's bgpd stops answering (restarting alone): every VTEP is
	// held until it answers again.
	if err := b.Update(t0.Add(time.Second), nil, nil, errors.New("bgpd is not running")); err == nil {
		t.Error("a failed query: no error")
	}
	if once, now := b.Answering(); !once || now {
		t.Errorf("Answering: %v, %v; want once, not now", once, now)
	}
	if !b.Away(c, t0) || !b.Away(other, t0) {
		t.Error("bgpd away: want every VTEP held")
	}
	// Answers it cannot read are a failed query.
	if err := b.Update(t0.Add(2*time.Second), []byte(`{"peers":{"192.0.2.1":{"state":"Established"}}}`), []byte(imetJSON), nil); err == nil {
		t.Error("a summary without peerUptimeMsec: no error")
	}
	if err := b.Update(t0.Add(2*time.Second), summary(1000, "Established"), []byte(`% Unknown command`), nil); err == nil {
		t.Error("routes that are no JSON: no error")
	}
	// A VTEP's peer is forgotten once its route has been gone HoldLimit.
	if err := b.Update(t0.Add(HoldLimit-time.Minute), summary(0, "Idle"), []byte(imetNoA), nil); err != nil || !b.Knows(a) {
		t.Errorf("A's peer forgotten before HoldLimit: %v", err)
	}
	if err := b.Update(t0.Add(HoldLimit+10*time.Second), summary(0, "Idle"), []byte(imetNoA), nil); err != nil || b.Knows(a) || !b.Knows(c) {
		t.Errorf("after A's route was gone HoldLimit: knows A %v, C %v (%v)", b.Knows(a), b.Knows(c), err)
	}
	// Never answered: nothing is held, whatever fails.
	n := NewBGPView()
	_ = n.Update(t0.Add(time.Second), nil, nil, errors.New("no such file"))
	if n.Away(a, t0) {
		t.Error("Away with bgpd never answering")
	}
}

// TestStaleHoldEndsSessionAway: this host's FRR restarts, and while it
// comes back C's session goes (C's FRR restarting too): when the hold
// ends, C's MAC, which zebra did not write again, is kept while its
// session is away, and goes once it is back (C no longer has it).
func TestStaleHoldEndsSessionAway(t *testing.T) {
	w := newStaleWorld(t)
	s := &fakeSessions{away: map[netip.Addr]bool{}}
	w.m.SetSessions(s)
	w.handle(false, remote(zero, vtepB), remote(zero, vtepC))
	w.zebraWrites(macA)
	w.m.Handle(onVXOf(macC))
	w.m.Handle(remote(macC, vtepC))
	w.handle(false, deleted(onVXOf(macC)), deleted(remote(macC, vtepC)), remote(macC, vtepC))
	w.handle(false, deleted(remote(zero, vtepC)), remote(zero, vtepC))
	w.zebraWithdraws(macA)
	if !w.m.ZebraExited() {
		t.Fatal("no hold")
	}
	w.clock = w.clock.Add(5 * time.Second)
	w.zebraWrites(macA)
	s.away[vtepC] = true
	w.clock = w.clock.Add(HoldQuiet)
	done, _ := w.m.Settle()
	if !done.Ended || done.Away != 2 || done.Removed != 1 {
		t.Errorf("Settle at the hold's end with C's session away: %+v; want B's flood entry removed, C's MAC and flood entry kept", done)
	}
	if got, want := w.remotes(), []string{macA.String() + " 192.0.2.2", macC.String() + " 192.0.2.3 stale"}; !slices.Equal(got, want) {
		t.Errorf("remotes after the hold: %q; want %q", got, want)
	}
	s.away[vtepC] = false
	if done, _ := w.m.Settle(); done.Removed != 2 || done.Away != 0 {
		t.Errorf("Settle with C back: %+v; want C's MAC and flood entry removed", done)
	}
}

// TestBGPViewReflectors: a VTEP's type-3 route came through two route
// reflectors. One reflector's session goes and the route is then
// withdrawn over the other's, live: the peer withdrew it, it goes. Both
// sessions gone: kept.
func TestBGPViewReflectors(t *testing.T) {
	const routes = `{"10.255.0.1:2":{"[3]:[0]:[32]:[10.255.0.1]":{"paths":[[{"routeType":3,"ip":"10.255.0.1","peerId":"192.0.2.101"},{"routeType":3,"ip":"10.255.0.1","peerId":"2001:db8::102"}]]}}}`
	summary := func(state1, state2 string) []byte {
		return []byte(fmt.Sprintf(`{"peers":{"192.0.2.101":{"state":%q,"peerUptimeMsec":3600000},"2001:db8::102":{"state":%q,"peerUptimeMsec":3600000}}}`, state1, state2))
	}
	a, t0 := netip.MustParseAddr("10.255.0.1"), time.Unix(2e9, 0)
	for _, tc := range []struct {
		name           string
		state1, state2 string
		want           bool
	}{
		{"the first reflector's session down, withdrawn over the second's", "Idle", "Established", false},
		{"the second reflector's session down, withdrawn over the first's", "Established", "Connect", false},
		{"both reflectors' sessions down", "Idle", "Active", true},
	} {
		b := NewBGPView()
		if err := b.Update(t0.Add(-time.Second), summary("Established", "Established"), []byte(routes), nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Update(t0.Add(time.Second), summary(tc.state1, tc.state2), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
		if got := b.Away(a, t0); got != tc.want {
			t.Errorf("%s: Away %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestBGPViewPeerNames: a peer named differently by the two answers, an
// IPv6 link-local one with its zone in a route's peerId, an IPv4 one
// mapped, is the same peer.
func TestBGPViewPeerNames(t *testing.T) {
	a, t0 := netip.MustParseAddr("2001:db8:ff::1"), time.Unix(2e9, 0)
	for _, tc := range []struct{ summaryKey, peerID string }{
		{"fe80::1", "fe80::1%swp1"},
		{"192.0.2.1", "::ffff:192.0.2.1"},
		{"2001:db8::1", "2001:0db8::1"},
	} {
		b := NewBGPView()
		routes := fmt.Sprintf(`{"rd":{"[3]:[0]:[128]:[%s]":{"paths":[[{"ip":%q,"peerId":%q}]]}}}`, a, a, tc.peerID)
		summary := func(state string) []byte {
			return []byte(fmt.Sprintf(`{"peers":{%q:{"state":%q,"peerUptimeMsec":0}}}`, tc.summaryKey, state))
		}
		if err := b.Update(t0.Add(-time.Second), summary("Established"), []byte(routes), nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Update(t0.Add(time.Second), summary("Idle"), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
		if !b.Away(a, t0) {
			t.Errorf("summary's %s, route's %s: not the same peer", tc.summaryKey, tc.peerID)
		}
	}
}

// TestBGPViewUnreadable: bgpd answered, then gives an answer that cannot
// be read, or a session's uptime past any time.Duration: nothing is held
// on the strength of it (a withdrawal goes after StaleWait), unlike
// bgpd's silence.
func TestBGPViewUnreadable(t *testing.T) {
	a, t0 := netip.MustParseAddr("10.255.0.1"), time.Unix(2e9, 0)
	b := NewBGPView()
	if err := b.Update(t0.Add(-time.Second), []byte(fmt.Sprintf(summaryFmt, 60000, "Established")), []byte(imetJSON), nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ name, summary, routes string }{
		{"routes that are no JSON", fmt.Sprintf(summaryFmt, 60000, "Established"), `% Unknown command`},
		{"a summary without peerUptimeMsec", `{"peers":{"192.0.2.1":{"state":"Established"}}}`, imetJSON},
		{"a path that is no object", fmt.Sprintf(summaryFmt, 60000, "Established"), `{"rd":{"[3]:[0]:[32]:[10.255.0.1]":{"paths":[[7]]}}}`},
	} {
		err := b.Update(t0.Add(time.Second), []byte(bad.summary), []byte(bad.routes), nil)
		if !errors.Is(err, ErrUnreadable) {
			t.Errorf("%s: %v, want ErrUnreadable", bad.name, err)
		}
		if b.Away(a, t0) {
			t.Errorf("%s: Away; want nothing held", bad.name)
		}
	}
	// bgpd without EVPN neighbours (just started, its configuration not
	// given yet): its silence, which holds.
	if err := b.Update(t0.Add(time.Second), []byte(`{}`), []byte(`{"numPrefix":0,"numPaths":0}`), nil); !errors.Is(err, ErrNotReady) || !b.Away(a, t0) {
		t.Errorf("a summary of no neighbours: %v, Away %v; want ErrNotReady, held", err, b.Away(a, t0))
	}
	// vtysh's own word that the answer was unreadable.
	if err := b.Update(t0.Add(time.Second), nil, nil, fmt.Errorf("vtysh: %w", ErrUnreadable)); !errors.Is(err, ErrUnreadable) || b.Away(a, t0) {
		t.Errorf("vtysh's unreadable answer: %v, Away %v; want nothing held", err, b.Away(a, t0))
	}
	// 2^63 ns is some 9.2e12 ms: past it a session's uptime would wrap
	// into the future, a session that came up after the withdrawal.
	if err := b.Update(t0.Add(time.Second), []byte(fmt.Sprintf(summaryFmt, int64(9223372036855), "Established")), []byte(imetJSON), nil); err != nil {
		t.Fatal(err)
	}
	if b.Away(a, t0) {
		t.Error("a session up for 292 years: Away; want withdrawn over a live session")
	}
}

// fakeVtysh writes a vtysh into dir that does what script says (sh), its
// environment's VTYSH_HISTFILE into dir/histfile first.
func fakeVtysh(t *testing.T, dir, script string) string {
	t.Helper()
	bin := filepath.Join(dir, "vtysh")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$VTYSH_HISTFILE\" > "+filepath.Join(dir, "histfile")+"\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestVtysh: what the daemon starts to ask bgpd. No bgpd.vty: no vtysh
// started (ErrNoBGPd). An answer: its two documents, vtysh told to keep
// no history. An answer past the limit: ErrUnreadable, and no more of it
// kept. A vtysh that hangs, with a child holding its output: killed and
// waited for once the context ends, without waiting for the child.
func TestVtysh(t *testing.T) {
	dir := t.TempDir()
	bin := fakeVtysh(t, dir, `printf '{"peers":{}}\n{"numPrefix":0}\n'`)
	if _, _, err := vtysh(t.Context(), bin, dir, 1<<10); !errors.Is(err, ErrNoBGPd) {
		t.Errorf("no bgpd.vty: %v, want ErrNoBGPd", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "histfile")); err == nil {
		t.Error("no bgpd.vty: vtysh was started")
	}
	if err := os.WriteFile(filepath.Join(dir, "bgpd.vty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, r, err := vtysh(t.Context(), bin, dir, 1<<10)
	if err != nil || string(s) != `{"peers":{}}` || string(r) != `{"numPrefix":0}` {
		t.Errorf("an answer: %q, %q, %v", s, r, err)
	}
	if h, _ := os.ReadFile(filepath.Join(dir, "histfile")); string(h) != "/dev/null\n" {
		t.Errorf("vtysh's VTYSH_HISTFILE %q, want /dev/null", h)
	}

	// bgpd without a BGP instance: {} for the summary, nothing for the
	// routes (FRR 8.4.4).
	fakeVtysh(t, dir, `printf '{}\n'`)
	if _, _, err := vtysh(t.Context(), bin, dir, 1<<10); !errors.Is(err, ErrNotReady) || errors.Is(err, ErrUnreadable) {
		t.Errorf("no BGP instance: %v, want ErrNotReady", err)
	}

	fakeVtysh(t, dir, `i=0; while [ $i -lt 200 ]; do printf '{"peers":{}}                                                  \n'; i=$((i+1)); done`)
	if _, _, err := vtysh(t.Context(), bin, dir, 1<<10); !errors.Is(err, ErrUnreadable) {
		t.Errorf("an answer past the limit: %v, want ErrUnreadable", err)
	}

	pidFile := filepath.Join(dir, "child.pid")
	fakeVtysh(t, dir, `sleep 300 & echo $! > `+pidFile+`; wait`)
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, _, err := vtysh(ctx, bin, dir, 1<<10); done <- err }()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, ErrUnreadable) {
			t.Errorf("a vtysh killed: %v, want its error", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("vtysh killed, its child holding its output: not back after a minute")
	}
}
