package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// CLI tests that need no daemon and no privileges: they run the command in-process.

func runCLI(t *testing.T, env map[string]string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &out, func(k string) string { return env[k] })
	return out.String(), code
}

// runSplit runs a command line with stdin as its standard input and
// returns its stdout and stderr apart, and its exit status.
func runSplit(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return out.String(), errb.String(), code
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"veth-a\"\n"), 0o644)
	if out, code := runCLI(t, nil, "check", good); code != 0 || !strings.Contains(out, "ok (1 bridges, 1 ports)") {
		t.Errorf("check good file: %d %q", code, out)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"veth-a\"\nmax_macs = -1\n"), 0o644)
	out, code := runCLI(t, nil, "check", bad)
	if code == 0 || !strings.Contains(out, bad+":5: bridge[0].port[0].max_macs") {
		t.Errorf("check bad file: %d %q", code, out)
	}
}

func TestNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	out, code := runCLI(t, map[string]string{"TRESTLE_SOCKET": sock}, "show")
	if code == 0 || !strings.Contains(out, sock) || !strings.Contains(out, "no trestle daemon") {
		t.Errorf("show with no daemon: %d %q", code, out)
	}
	// --socket wins over the environment.
	other := filepath.Join(t.TempDir(), "other.sock")
	out, _ = runCLI(t, map[string]string{"TRESTLE_SOCKET": sock}, "stats", "--socket", other)
	if !strings.Contains(out, other) {
		t.Errorf("--socket not used: %q", out)
	}
}

func TestRunNeedsConfig(t *testing.T) {
	out, code := runCLI(t, nil, "run")
	if code == 0 || !strings.Contains(out, "--config FILE is required") {
		t.Errorf("run without --config: %d %q", code, out)
	}
}

// TestLabFlags: the lab refuses bad input before it builds anything.
func TestLabFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab"}, "name a scenario"},
		{[]string{"lab", "nosuch"}, `scenario "nosuch"`},
		{[]string{"lab", "quick", "--dut", "direct,bogus"}, `DUT "bogus"`},
		{[]string{"lab", "quick", "--dut", "linux-bridge@gso=maybe"}, "OFFLOAD=on"},
		{[]string{"lab", "quick", "--dut", "linux-bridge@bin=/tmp/x"}, "bin= is for trestle"},
		{[]string{"lab", "quick", "--sizes", "63"}, `frame size "63"`},
		{[]string{"lab", "chain", "--chains", "1,x"}, `--chains "1,x"`},
		{[]string{"lab", "quick", "--reps", "0"}, "--reps 0"},
		{[]string{"lab", "quick", "--loss-goal", "2"}, "--loss-goal 2"},
		{[]string{"lab", "vlan-overhead", "--dut", "direct@vlan"}, "vlan is for a bridge"},
		{[]string{"lab", "vlan-overhead", "--dut", "ovs@vlan=10"}, "bin=PATH, vlan"},
		{[]string{"lab", "chain", "--dut", "linux-bridge@patch"}, "the Linux bridge has no patch ports: bridges join only by veth pairs"},
		{[]string{"lab", "chain", "--dut", "ovs,direct@veth"}, "the straight path has no bridges to join"},
		{[]string{"lab", "chain", "--dut", "trestle:xdp@patch,veth"}, "patch or veth, not both"},
		{[]string{"lab", "quick", "--dut", "direct,trestle:xdp@veth"}, "quick has no chain of 2 or more bridges (chains 1)"},
		{[]string{"lab", "chain", "--chains", "1"}, "has no chain of 2 or more bridges"},
		{[]string{"lab", "mirror", "--dut", "direct@mirror"}, "the straight path has no ports to mirror"},
		{[]string{"lab", "mirror", "--dut", "linux-bridge@capture"}, "it is for trestle DUTs"},
		{[]string{"lab", "filter-scale", "--dut", "linux-bridge@rules=10"}, "linux-bridge:nft@rules=N"},
		{[]string{"lab", "filter-scale", "--dut", "trestle:xdp@state"}, "N at least 1"},
		{[]string{"lab", "veb-vs-bridge", "--dut", "trestle,trestle@rules=10"}, "iperf3 between the hosts' stacks"},
		{[]string{"lab", "flood", "--dut", "trestle:xdp,floor"}, `DUT "floor": flood has 4 hosts: the floor redirects each port's frames to one other port`},
		{[]string{"lab", "mirror", "--dut", "floor"}, `DUT "floor": mirror has 3 hosts`},
		{[]string{"lab", "chain", "--dut", "floor@patch"}, "the floor has no patch ports"},
		{[]string{"lab", "quick", "--dut", "floor@rules=10"}, "the floor has no filter"},
		{[]string{"lab", "flood", "--dut", "floor@mirror"}, `DUT "floor@mirror": flood has 4 hosts`},
		{[]string{"lab", "quick", "--duration", "5s"}, "--duration is for the mac-flood or soak scenario, not quick"},
		{[]string{"lab", "mac-flood", "--window", "5s"}, "--window is for the soak scenario, not mac-flood"},
		{[]string{"lab", "soak", "--duration", "1m", "--window", "2m"}, "--window 2m0s: above 0, at most the duration (1m0s)"},
		{[]string{"lab", "mac-flood", "--sources", "0"}, "--sources 0"},
		{[]string{"lab", "mac-flood", "--max-entries", "-1"}, "--max-entries -1"},
		{[]string{"lab", "soak", "--load", "1.5"}, "--load 1.5"},
		{[]string{"lab", "mac-flood", "--events", "sigkill=1"}, "--events is for the restart scenario"},
		{[]string{"lab", "quick", "--load", "0.5"}, "--load is for the restart, mac-flood or soak scenario, not quick"},
		{[]string{"lab", "soak", "--rate", "1000"}, "--rate is for the restart or mac-flood scenario, not soak"},
		{[]string{"lab", "mac-flood", "--rate", "0"}, "--rate 0: frames a second, above 0"},
		{[]string{"lab", "quick", "--pdr-loss", "0.5x"}, `--pdr-loss "0.5x"`},
		{[]string{"lab", "quick", "--ndr-loss", "100%"}, `--ndr-loss "100%"`},
		{[]string{"lab", "quick", "--ndr-loss", "1%", "--pdr-loss", "0.5%"}, "--pdr-loss 0.5%: must be above the NDR's loss goal (1%), or off"},
		{[]string{"lab", "quick", "--ndr-loss", "1%"}, "the NDR's loss goal 1% is not below the PDR's (0.5%)"},
		{[]string{"lab", "quick", "--loss-goal", "0", "--ndr-loss", "0"}, "--loss-goal is --ndr-loss"},
		{[]string{"lab", "rfc2889", "--bidirectional"}, "--bidirectional is for the throughput test; rfc2889 has none"},
		{[]string{"lab", "restart", "--bidirectional"}, "restart's restart test runs one way"},
		{[]string{"lab", "mirror", "--bidirectional"}, "the span host would count both directions"},
	} {
		out, code := runCLI(t, nil, c.args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("trestle %s: exit %d, output %q; want an error with %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
	// lab --help is short: every scenario with its title, the DUTs, and
	// where the manual is (docs/lab.md, trestle-lab(8): TestLabManual holds
	// them to the registry); the flags stay.
	out, code := runCLI(t, nil, "lab", "--help")
	if code != 0 || !strings.Contains(out, "  router-pps ") || !strings.Contains(out, "  mirror ") ||
		!strings.Contains(out, "  mac-flood ") || !strings.Contains(out, "  soak ") || !strings.Contains(out, "--sources") ||
		!strings.Contains(out, "--bidirectional") || !strings.Contains(out, "--pdr-loss") || !strings.Contains(out, "docs/lab.md") || !strings.Contains(out, "man trestle-lab") {
		t.Errorf("lab --help: %d %q", code, out)
	}
	// A scenario's --help says what it measures and its goals, before the
	// lab's own help.
	out, code = runCLI(t, nil, "lab", "vlan-overhead", "--help")
	if code != 0 || !strings.HasPrefix(out, "Scenario vlan-overhead: The cost of VLAN tagging\nReproduces the OpenBSD profile of vlan(4)") ||
		!strings.Contains(out, "tagged/untagged") || !strings.Contains(out, "trestle:xdp@vlan at least 0.95x trestle:xdp") || !strings.Contains(out, "docs/lab.md") {
		t.Errorf("lab vlan-overhead --help: %d %q", code, out)
	}
	out, code = runCLI(t, nil, "lab", "filter-scale", "--help")
	if code != 0 || !strings.HasPrefix(out, "Scenario filter-scale:") || !strings.Contains(out, "trestle:xdp@rules=100,state") || !strings.Contains(out, "trestle:xdp@rules=100 at least 0.8x trestle:xdp") {
		t.Errorf("lab filter-scale --help: %d %q", code, out)
	}
}

func TestParseLoss(t *testing.T) {
	for _, c := range []struct {
		in  string
		v   float64
		off bool
		ok  bool
	}{{"0", 0, false, true}, {"0.5%", 0.005, false, true}, {" 0.1 % ", 0.001, false, true}, {"0.005", 0.005, false, true}, {"off", 0, true, true},
		{"1", 0, false, false}, {"100%", 0, false, false}, {"-1%", 0, false, false}, {"x", 0, false, false}, {"NaN", 0, false, false}} {
		v, off, err := parseLoss(c.in)
		if (err == nil) != c.ok || c.ok && (math.Abs(v-c.v) > 1e-12 || off != c.off) {
			t.Errorf("parseLoss(%q) = %v, %v, %v", c.in, v, off, err)
		}
	}
}

// A --dut list splits at commas, except between one variant's knobs.
func TestSplitDUTs(t *testing.T) {
	got := splitDUTs("direct, trestle:xdp@vlan,bin=/tmp/x,ovs@vlan,trestle@gso=off,tso=off,linux-bridge,trestle:tc@veth,bin=/tmp/x,ovs@patch,trestle@mirror,capture,ovs@mirror,trestle:xdp@rules=100,state,linux-bridge:nft@rules=100,trestle@filter")
	want := []string{"direct", "trestle:xdp@vlan,bin=/tmp/x", "ovs@vlan", "trestle@gso=off,tso=off", "linux-bridge", "trestle:tc@veth,bin=/tmp/x", "ovs@patch", "trestle@mirror,capture", "ovs@mirror",
		"trestle:xdp@rules=100,state", "linux-bridge:nft@rules=100", "trestle@filter"}
	if !slices.Equal(got, want) {
		t.Errorf("splitDUTs: %q, want %q", got, want)
	}
}

// --version names the build, the Go it was built with and the platform;
// --metrics and top refuse what they cannot use before anything starts.
func TestVersionAndFlags(t *testing.T) {
	out, code := runCLI(t, nil, "--version")
	want := fmt.Sprintf("trestle %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if code != 0 || out != want {
		t.Errorf("--version: %d %q, want %q", code, out, want)
	}
	cfg := filepath.Join(t.TempDir(), "t.toml")
	os.WriteFile(cfg, []byte("[[bridge]]\nname = \"b\"\n[[bridge.port]]\ninterface = \"x\"\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--config", cfg, "--metrics", "9470"}, `--metrics: "9470" is not host:port`},
		{[]string{"run", "--config", cfg, "--metrics", "[::1]:0"}, `--metrics: "[::1]:0": port "0" is not 1..65535`},
		{[]string{"top", "--sort", "speed"}, `--sort "speed": one of rx, tx`},
		{[]string{"top", "--interval", "10ms"}, "--interval 10ms: at least 100ms"},
		{[]string{"top", "--json"}, "--json needs --once"},
	} {
		out, code := runCLI(t, map[string]string{"TRESTLE_SOCKET": filepath.Join(t.TempDir(), "none.sock")}, c.args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: %d %q, want an error with %q", c.args, code, out, c.want)
		}
	}
}

// TestLabCoresFlags: the cores scenario refuses CPU counts the machine
// cannot give it, --cpus elsewhere, and a placement that would move the
// forwarding off the generator's CPUs; its --help says what a 2-CPU
// machine can show and how to run it on a bigger one. port-scale's --ports
// is refused the same ways, and the straight path, which has no bridge.
func TestLabCoresFlags(t *testing.T) {
	n := runtime.NumCPU()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "cores", "--cpus", fmt.Sprintf("1,%d", n+1)}, fmt.Sprintf("%d CPUs asked for, but this machine lets the lab use %d", n+1, n)},
		{[]string{"lab", "cores", "--cpus", "1,x"}, `--cpus "1,x"`},
		{[]string{"lab", "cores", "--cpus", "0"}, `--cpus "0"`},
		{[]string{"lab", "cores", "--cpus", "1,1"}, "1 CPUs given twice"},
		{[]string{"lab", "cores", "--placement", "split"}, "split would move the forwarding off them"},
		{[]string{"lab", "quick", "--cpus", "1"}, "--cpus is for the cores scenario, not quick"},
		{[]string{"lab", "quick", "--ports", "2"}, "--ports is for the port-scale scenario, not quick"},
		{[]string{"lab", "port-scale", "--ports", "2,1"}, `--ports "2,1"`},
		{[]string{"lab", "port-scale", "--dut", "direct"}, "port-scale: direct has no bridge to give ports to"},
	} {
		out, code := runCLI(t, nil, c.args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("trestle %s: exit %d, output %q; want an error with %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
	out, code := runCLI(t, nil, "lab", "cores", "--help")
	if code != 0 || !strings.HasPrefix(out, "Scenario cores:") || !strings.Contains(out, "is the only step") ||
		!strings.Contains(out, "--cpus 1,2,4,8") || !strings.Contains(out, "PMD thread") || !strings.Contains(out, "CPUs:     1") {
		t.Errorf("lab cores --help: %d %q", code, out)
	}
}

// TestVLANBadConfig: bad VLAN keys are refused by check with file:line:
// field (and by run: tests/vlan TestVLANBadConfigRun).
func TestVLANBadConfig(t *testing.T) {
	dir := t.TempDir()
	base := "[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"veth-a\"\nvlan = 10\n[[bridge.port]]\ninterface = \"veth-b\"\n"
	for _, c := range []struct {
		name, extra, want string
	}{
		{"native not in trunk", "trunk = [10, \"20-29\"]\nnative = 30\n", ":9: bridge[0].port[1].native: 30 is not one of the port's trunk VLANs (10,20-29)"},
		{"vlan and trunk", "vlan = 20\ntrunk = [10, 20]\n", ":9: bridge[0].port[1].trunk: conflicts with vlan at line 8"},
		{"trunk repeats", "trunk = [10, 20, 10]\n", ":8: bridge[0].port[1].trunk[2]: 10 repeats 10"},
		{"static on a trunk without native", "trunk = [10]\n[[bridge.static]]\nmac = \"02:00:00:00:00:01\"\nport = \"veth-b\"\n",
			`:9: bridge[0].static[0].vlan: port "veth-b" is a trunk with no native VLAN: set vlan`},
		{"access vlan out of range", "vlan = 4095\n", ":8: bridge[0].port[1].vlan: 4095 is out of range 1..4094"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".toml")
		if err := os.WriteFile(file, []byte(base+c.extra), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := runCLI(t, nil, "check", file)
		if code == 0 || !strings.Contains(out, file+c.want) {
			t.Errorf("check %s: exit %d, output %q; want an error with %q", c.name, code, out, file+c.want)
		}
	}
}
