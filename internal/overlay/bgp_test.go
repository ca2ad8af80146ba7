package overlay

import (
	"errors"
	"fmt"
	"net/netip"
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
