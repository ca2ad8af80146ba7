package cni

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/testutil"
)

// TestMACTheft is the attack on a bound address: the gateway's MAC,
// learned on the uplink, is claimed by a pod on a macspoofchk network
// (through CNI_ARGS MAC=, with and without allowMacOverride), by a port
// added with it in allowed_macs, and by trestle fdb add on another port.
// Each is refused, naming the port that holds it, and the gateway's entry
// stays learned on the uplink: traffic to it still reaches it.
func TestMACTheft(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	plain := l.network("uplink", map[string]any{"bridge": "pods"})
	spoof := l.network("spoof", map[string]any{"bridge": "pods", "macspoofchk": true})
	over := l.network("override", map[string]any{"bridge": "pods", "macspoofchk": true, "allowMacOverride": true})
	gw, b := testutil.NewNS(t, "gw"), testutil.NewNS(t, "b")
	rgw := l.add(plain, gw)
	rb := l.add(plain, b)
	gw.AddrAdd(t, "eth0", "10.95.0.1/24")
	b.AddrAdd(t, "eth0", "10.95.0.2/24")
	if err := b.Ping("10.95.0.1", 2); err != nil {
		t.Fatalf("b to the gateway: %v", err)
	}
	mgw := gw.MAC(t, "eth0")
	pgw, _ := l.port(owner(plain, rgw))
	pb, _ := l.port(owner(plain, rb))
	intact := func(after string) {
		t.Helper()
		if e, ok := l.FDBEntry(mgw); !ok || e.Port != pgw.Interface || e.Static {
			t.Errorf("after %s: the gateway's entry is %+v (found %t), want learned on %s", after, e, ok, pgw.Interface)
		}
		if err := b.Ping("10.95.0.1", 2); err != nil {
			t.Errorf("after %s: b to the gateway: %v", after, err)
		}
	}
	intact("learning")
	holder := `port "` + pgw.Interface + `" holds it`
	// relearn puts the gateway back on the uplink after an attack that
	// was let through (the build before this check), so that each attack
	// is tried on its own.
	relearn := func() {
		_, _ = l.CLI("fdb", "del", "pods", mgw.String())
		_ = gw.Ping("10.95.0.2", 1)
	}

	// fdb add: a static on b's port.
	if out, err := l.CLI("fdb", "add", "pods", mgw.String(), pb.Interface); err == nil || !strings.Contains(out, holder) {
		t.Errorf("fdb add of the gateway's MAC on b's port: %v: %s, want refused naming %s", err, out, holder)
		relearn()
	}
	intact("fdb add")

	// macspoofchk: a pod naming the gateway's MAC.
	thief := testutil.NewNS(t, "thief")
	if _, err := l.cnitool("add", spoof, thief, "CNI_ARGS=MAC="+mgw.String()); err == nil || !strings.Contains(err.Error(), "allowMacOverride") {
		t.Errorf("macspoofchk ADD with the gateway's MAC: %v, want refused naming allowMacOverride", err)
		_, _ = l.cnitool("del", spoof, thief, "CNI_ARGS=MAC="+mgw.String())
		relearn()
	}
	intact("macspoofchk ADD")
	if _, err := l.cnitool("add", over, thief, "CNI_ARGS=MAC="+mgw.String()); err == nil || !strings.Contains(err.Error(), holder) {
		t.Errorf("allowMacOverride ADD with the gateway's MAC: %v, want refused naming %s", err, holder)
		_, _ = l.cnitool("del", over, thief, "CNI_ARGS=MAC="+mgw.String())
		relearn()
	}
	intact("allowMacOverride ADD")
	// allowMacOverride lets a free address be chosen.
	const free = "02:00:00:00:95:07"
	l.add(over, thief, "CNI_ARGS=MAC="+free)
	if got := thief.MAC(t, "eth0").String(); got != free {
		t.Errorf("allowMacOverride ADD with a free MAC: eth0 has %s, want %s", got, free)
	}
	l.must("del", over, thief, "CNI_ARGS=MAC="+free)

	// allowed_macs: a port added with the gateway's MAC bound to it.
	l.SW.MustExec(t, "ip", "link", "add", "thief0", "type", "veth", "peer", "name", "thief1")
	l.SW.MustExec(t, "ip", "link", "set", "thief0", "up")
	l.SW.MustExec(t, "ip", "link", "set", "thief1", "up")
	if out, err := l.CLI("port", "add", "pods", "thief0", "locked=true", "allowed_macs="+mgw.String()); err == nil || !strings.Contains(out, holder) {
		t.Errorf("port add with the gateway's MAC in allowed_macs: %v: %s, want refused naming %s", err, out, holder)
		_, _ = l.CLI("port", "del", "pods", "thief0")
		relearn()
	}
	intact("port add")

	// A static on the port that holds it is the operator pinning it.
	if out, err := l.CLI("fdb", "add", "pods", mgw.String(), pgw.Interface); err != nil {
		t.Errorf("fdb add on the holder's own port: %v: %s", err, out)
	}
	// Now a static from the CLI holds it against the others.
	if out, err := l.CLI("fdb", "add", "pods", mgw.String(), pb.Interface); err == nil || !strings.Contains(out, holder) {
		t.Errorf("fdb add over the gateway's static: %v: %s, want refused naming %s", err, out, holder)
	}
	if e, ok := l.FDBEntry(mgw); !ok || e.Port != pgw.Interface {
		t.Errorf("the gateway's static is %+v (found %t), want on %s", e, ok, pgw.Interface)
	}
	l.must("del", plain, gw)
	l.must("del", plain, b)
}

// TestChainedTheft is the attack on chained mode: a previous plugin (or
// whoever wrote the network) names a host interface that is not the
// sandbox's: another pod's host veth, and a veth enslaved to a Linux
// bridge. Each ADD is refused, and no port is made for the attacker.
func TestChainedTheft(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	fixtures := nameFixture(t)
	chained := l.network("chained", map[string]any{"bridge": "pods"}, map[string]any{"type": "name-fixture"})
	plain := l.network("plain", map[string]any{"bridge": "pods"})
	victim, attacker := testutil.NewNS(t, "victim"), testutil.NewNS(t, "attacker")
	rv := l.add(plain, victim)
	victimHost := hostName(t, rv)
	// The victim's host veth, let go by the switch (as a pod of another
	// plugin's network has one): still the victim's sandbox's interface.
	if out, err := l.CLI("port", "del", "pods", victimHost); err != nil {
		t.Fatalf("port del %s: %v: %s", victimHost, err, out)
	}

	pre := testutil.Prefix()
	br, enslaved := pre+"lbr", pre+"ens"
	l.SW.MustExec(t, "ip", "link", "add", br, "type", "bridge")
	l.SW.MustExec(t, "ip", "link", "add", enslaved, "type", "veth", "peer", "name", pre+"ensp")
	l.SW.MustExec(t, "ip", "link", "set", enslaved, "master", br)

	path := "CNI_PATH=" + pluginDir + ":" + toolsDir + ":" + fixtures
	own := fmt.Sprintf("%s %s eth0", chained, containerID(attacker.Path))
	for _, target := range []string{victimHost, enslaved} {
		out, err := l.cnitool("add", chained, attacker, path, "TARGET="+target)
		if err == nil {
			t.Errorf("chained ADD naming %s: accepted: %s", target, out)
		}
		if p, ok := l.port(own); ok {
			t.Errorf("chained ADD naming %s made port %+v for the attacker", target, p)
			_, _ = l.CLI("port", "del", "pods", p.Interface)
		}
	}
	l.must("del", plain, victim)
}

// nameFixture writes the plugin before trestle in a chain, of type
// name-fixture, that reports the host interface $TARGET, and returns its
// directory (for CNI_PATH).
func nameFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
case "$CNI_COMMAND" in
ADD) echo '{"cniVersion": "1.1.0", "interfaces": [{"name": "'"$TARGET"'"}]}' ;;
VERSION) echo '{"cniVersion": "1.1.0", "supportedVersions": ["1.0.0", "1.1.0"]}' ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "name-fixture"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
