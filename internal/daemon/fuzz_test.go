package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
)

// fuzzConfig is the daemon the requests of FuzzHandle meet: an unaware
// bridge patched to another, a VLAN-aware one with a filter and a static
// entry, and a port that is down.
const fuzzConfig = `
[[bridge]]
name = "br0"
[[bridge.port]]
interface = "p1"
max_macs = 4
[[bridge.port]]
interface = "p2"
[[bridge.port]]
patch = "br2"
[[bridge.static]]
mac = "02:00:00:00:00:09"
port = "p1"

[[bridge]]
name = "br1"
filter = true
default = "block"
[[bridge.port]]
interface = "q1"
vlan = 10
[[bridge.port]]
interface = "q2"
trunk = [10, "20-29"]
native = 10
[[bridge.port]]
interface = "gone"
[[bridge.rule]]
action = "pass"
ethertype = "arp"

[[bridge]]
name = "br2"
[[bridge.port]]
patch = "br0"
[[bridge.port]]
interface = "r1"
`

// fuzzPick reads the parts of requests from an input: mostly names the
// daemon knows, sometimes the input's own bytes.
type fuzzPick struct{ *testutil.FuzzBytes }

// str is one of pool, or (one time in eight) a string of the input's bytes.
func (p fuzzPick) str(pool ...string) string {
	c := int(p.Byte())
	if c%8 != 7 {
		return pool[c/8%len(pool)]
	}
	return string(p.Take(int(p.Byte()) % 40))
}

var fuzzCmds = []string{ctl.CmdShow, ctl.CmdStats, ctl.CmdVLANStats, ctl.CmdFDBShow, ctl.CmdFDBAdd, ctl.CmdFDBDel,
	ctl.CmdFDBFlush, ctl.CmdReload, ctl.CmdRuleShow, ctl.CmdRuleAdd, ctl.CmdRuleDel, ctl.CmdStateShow, ctl.CmdNeighShow, ctl.CmdCapture,
	ctl.CmdPortAdd, ctl.CmdPortDel, ctl.CmdPortList}

// request reads one request.
func (p fuzzPick) request() ctl.Request {
	r := ctl.Request{
		Cmd:    p.str(fuzzCmds...),
		Bridge: p.str("br0", "br1", "br2", "", "nope"),
		MAC:    p.str("02:00:00:00:00:01", "02:00:00:00:00:09", "ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00", "02:00:00:00:00:01:02:03", "", "02-00-00-00-00-02"),
		Port:   p.str("p1", "p2", "q1", "q2", "gone", "patch-br2", "patch-br0", "r1", "", "nope", "s1", "s2"),
		Owner:  p.str("", "", "pod-a", "pod-b"),
	}
	switch v := p.Byte(); v % 8 {
	case 0, 1:
	case 2:
		r.VLAN = 10
	case 3:
		r.VLAN = 20
	case 4:
		r.VLAN = 4094
	case 5:
		r.VLAN = 4095
	default:
		r.VLAN = uint16(v)<<8 | uint16(p.Byte())
	}
	r.Index = int(int8(p.Byte()))
	for n := int(p.Byte()) % 5; n > 0; n-- {
		r.Args = append(r.Args, p.str("action=pass", "action=block", "proto=tcp", "dst_port=22", "keep_state=true",
			"src=10.0.0.0/8", "in=q1", "out=q2", "vlan=10", "icmp_type=8", "ethertype=ipv4", "src_mac=02:00:00:00:00:01",
			"max_macs=4", "mode=tc", "trunk=10,20", "native=10", "protected=true", "storm.broadcast=100", "patch=br0", "interface=s1"))
	}
	return r
}

// FuzzHandle sends the daemon's control handler sequences of requests,
// made of the names it knows and of any bytes, over a fake dataplane. No
// request may panic it (the handler turns a panic into an "internal error"
// answer, which fails the target), every answer must encode as the server
// sends it, and the daemon must still answer show afterwards with its
// limits kept.
//
//	go test -run '^$' -fuzz '^FuzzHandle$' ./internal/daemon
func FuzzHandle(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{4 * 8, 0, 0, 0, 2})                                                    // fdb add 02:..:01 on p1 in br0, VLAN 10
	f.Add([]byte{4 * 8, 8, 0, 8 * 2, 2, 0, 0, 5 * 8, 8, 8, 8 * 3, 2})                   // fdb add in br1 on q1, fdb del on q2
	f.Add([]byte{9 * 8, 8, 0, 0, 0, 0, 3, 0, 8 * 8, 12 * 8})                            // rule add to br1: three arguments
	f.Add([]byte{7 * 8, 0, 0, 0, 0, 0, 0, 10 * 8, 8, 0, 0, 0, 1, 0})                    // reload, rule del 1
	f.Add([]byte("\x07\x05show\x07\x03br1"))                                            // bytes of the input
	f.Add([]byte{13 * 8, 0, 0, 10 * 8, 0, 0, 0, 0, 0, 2, 12 * 8, 13 * 8})               // port add s1 to br0, max_macs=4 mode=tc
	f.Add([]byte{13 * 8, 8, 0, 11 * 8, 16, 0, 0, 0, 0, 1, 14 * 8, 14 * 8, 0, 0, 0, 16}) // port add s2 to br1 (pod-a), port del
	dir := f.TempDir()
	cfgPath := filepath.Join(dir, "trestle.toml")
	if err := os.WriteFile(cfgPath, []byte(fuzzConfig), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		w := newWorld(t)
		for _, n := range []string{"p1", "p2", "q1", "q2", "r1", "s1", "s2"} {
			w.sys.add(n, "veth")
		}
		w.mustApply(fuzzConfig)
		w.d.opts.ConfigPath = cfgPath
		p := fuzzPick{testutil.NewFuzzBytes(in)}
		for n := 0; n < 6 && (n == 0 || !p.Done()); n++ {
			req := p.request()
			var out any
			var err error
			if req.Cmd == ctl.CmdFDBShow {
				// A stream (fdbStream), walked as it walks the table.
				out, err = w.d.fdbShowOf(req)
			} else {
				out, err = w.d.handle(t.Context(), req)
			}
			if err != nil && strings.Contains(err.Error(), "internal error") {
				t.Fatalf("request %+v: %v", req, err)
			}
			if _, merr := json.Marshal(out); merr != nil {
				t.Fatalf("request %+v: its answer does not encode: %v", req, merr)
			}
		}
		if _, err := w.d.handle(t.Context(), ctl.Request{Cmd: ctl.CmdShow}); err != nil {
			t.Fatalf("show after the requests: %v", err)
		}
		for name, b := range w.d.bridges {
			if len(b.cliStatics) > maxCLIStatics || len(b.rules()) > config.MaxRules {
				t.Fatalf("bridge %s: %d static entries from the CLI, %d rules", name, len(b.cliStatics), len(b.rules()))
			}
		}
		// Every run-time port recorded is a port of the model, once.
		for _, rp := range w.d.run {
			b := w.d.bridges[rp.Bridge]
			if b == nil || b.port(rp.Interface) == nil {
				t.Fatalf("run-time port %s/%s recorded, not in the model", rp.Bridge, rp.Interface)
			}
			if n := w.d.portOwnerOf(rp.Interface); n == "" {
				t.Fatalf("run-time port %s/%s has no bridge", rp.Bridge, rp.Interface)
			}
		}
	})
}
