package lab

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestTopologyCleanup: a chain topology with a running process goes away
// completely, and so does one whose build failed midway.
func TestTopologyCleanup(t *testing.T) {
	requireRoot(t)
	n := NewNet("t1")
	t.Cleanup(func() { n.Close() })
	topo, err := Build(context.Background(), n, Shape{Hosts: 2, Chain: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(ours(t, n.Prefix+"-")); got != 3 {
		t.Fatalf("%d namespaces, want h1, h2 and dut", got)
	}
	if want := []string{"p1", "c1a", "c1b", "c2a", "c2b", "p2"}; len(topo.DUTPorts()) != len(want) {
		t.Errorf("DUT ports %v, want %v", topo.DUTPorts(), want)
	}
	p, err := topo.Hosts[0].NS.Start("sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if left := ours(t, n.Prefix+"-"); len(left) != 0 {
		t.Errorf("namespaces left after Close: %v", left)
	}
	select {
	case <-p.Done():
	default:
		t.Errorf("process %d still running after Close", p.Cmd.Process.Pid)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// A build that fails midway: the second veth's name is too long.
	n2 := NewNet("t2")
	t.Cleanup(func() { n2.Close() })
	h1, err := n2.NS("h1")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := n2.NS("h2")
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.Veth(h1, "a0", h2, "b0", VethOpts{}); err != nil {
		t.Fatal(err)
	}
	if err := n2.Veth(h1, "a-name-far-too-long", h2, "b1", VethOpts{}); err == nil {
		t.Fatal("a veth with a 19-character name was created")
	}
	if err := n2.Close(); err != nil {
		t.Fatal(err)
	}
	if left := ours(t, n2.Prefix+"-"); len(left) != 0 {
		t.Errorf("namespaces left after a failed build: %v", left)
	}
}

// TestSweep: namespaces of a run whose process is gone are removed; a live
// run's are not.
func TestSweep(t *testing.T) {
	requireRoot(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := "tl" + strconv.Itoa(cmd.Process.Pid) + "-swept"
	// A scenario's sets carry a tag after the PID (run.go: "u1", "u2", ...).
	deadTagged := "tl" + strconv.Itoa(cmd.Process.Pid) + "u1-swept"
	live := NewNet("sw")
	t.Cleanup(func() {
		live.Close()
		exec.Command("ip", "netns", "del", dead).Run()
		exec.Command("ip", "netns", "del", deadTagged).Run()
	})
	for _, name := range []string{dead, deadTagged} {
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if _, err := live.NS("kept"); err != nil {
		t.Fatal(err)
	}
	gone, err := Sweep()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{dead, deadTagged} {
		if len(ours(t, name)) != 0 || !contains(gone, name) {
			t.Errorf("%s not swept (swept %v)", name, gone)
		}
	}
	if len(ours(t, live.Prefix+"-kept")) != 1 {
		t.Errorf("a live run's namespace was swept")
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// single is a DUT's figures at its one chain length (0 for direct).
func single(byChain map[int]map[string]float64) map[string]float64 {
	for _, f := range byChain {
		return f
	}
	return nil
}

func TestTableCheckText(t *testing.T) {
	held := TableCheck{Addresses: 10, Forwarded: 10}
	if !held.Held() {
		t.Errorf("%+v not held", held)
	}
	for _, c := range []TableCheck{{Addresses: 10, Forwarded: 9}, {Addresses: 10, Forwarded: 10, Flooded: 1}} {
		if c.Held() {
			t.Errorf("%+v held", c)
		}
		if !strings.Contains(c.String(), "did not hold all 10") {
			t.Errorf("%+v: %q", c, c.String())
		}
	}
}
