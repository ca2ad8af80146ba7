package testutil

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/frame"
)

// Addresses live only inside the test namespaces.
const (
	addrA = "10.250.0.1"
	addrB = "10.250.0.2"
	// ethertypeTest is IEEE 802 "local experimental ethertype 1".
	ethertypeTest = 0x88b5
)

func TestFrame(t *testing.T) {
	dst := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	src := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	got := Frame(dst, src, 0x0800, []byte{0xaa, 0xbb})
	want := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0xaa, 0xbb}
	if !bytes.Equal(got, want) {
		t.Fatalf("Frame = % x, want % x", got, want)
	}
}

func TestPrefix(t *testing.T) {
	p := Prefix()
	if !regexp.MustCompile(`^tr[0-9a-f]{5}$`).MatchString(p) {
		t.Fatalf("Prefix() = %q, want tr + 5 hex digits", p)
	}
	if Prefix() != p {
		t.Fatalf("Prefix() changed within one run")
	}
}

func TestInetChecksum(t *testing.T) {
	// RFC 1071 section 3 example.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got, want := inetChecksum(b), ^uint16(0xddf2); got != want {
		t.Fatalf("inetChecksum = %#04x, want %#04x", got, want)
	}
}

// TestLab builds a two-namespace lab in a subtest, exercises every helper
// in it, and checks afterwards that the subtest's cleanups removed it.
func TestLab(t *testing.T) {
	RequireRoot(t)
	RequireCmd(t, "ip", "iperf3", "ss")

	rootLinks := linkNames(t)
	var names []string
	t.Run("helpers", func(t *testing.T) {
		a, b := NewNS(t, "a"), NewNS(t, "b")
		names = []string{a.Name, b.Name}
		for _, n := range []*NS{a, b} {
			if !strings.HasPrefix(n.Name, Prefix()+"-") || n.Path != "/run/netns/"+n.Name {
				t.Fatalf("NS = %+v, want name with prefix %s and path under /run/netns", n, Prefix())
			}
			if _, err := os.Stat(n.Path); err != nil {
				t.Fatal(err)
			}
		}

		Veth(t, a, "va", b, "vb", addrB+"/24")
		a.AddrAdd(t, "va", addrA+"/24")
		if got := linkNames(t); !equalSets(got, rootLinks) {
			t.Fatalf("root namespace links changed: before %v, after %v", rootLinks, got)
		}
		if out := b.MustExec(t, "ip", "-o", "addr", "show", "dev", "vb"); !strings.Contains(out, addrB+"/24") {
			t.Fatalf("vb lacks %s: %s", addrB, out)
		}

		t.Run("MAC", func(t *testing.T) {
			sys := strings.TrimSpace(a.MustExec(t, "cat", "/sys/class/net/va/address"))
			if got := a.MAC(t, "va").String(); got != sys {
				t.Fatalf("MAC(va) = %s, sysfs says %s", got, sys)
			}
		})

		t.Run("Sysctl", func(t *testing.T) {
			const key = "/proc/sys/net/ipv4/ip_forward"
			root, err := os.ReadFile(key)
			if err != nil {
				t.Fatal(err)
			}
			want := "1"
			if strings.TrimSpace(string(root)) == "1" {
				want = "0"
			}
			if err := a.Sysctl("net.ipv4.ip_forward", want); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(a.MustExec(t, "cat", key)); got != want {
				t.Fatalf("ip_forward in %s = %s, want %s", a.Name, got, want)
			}
			if after, _ := os.ReadFile(key); !bytes.Equal(after, root) {
				t.Fatalf("root ip_forward changed from %q to %q", root, after)
			}
		})

		t.Run("Ping", func(t *testing.T) {
			if err := a.Ping(addrB, 3); err != nil {
				t.Fatal(err)
			}
			if err := b.Ping(addrA, 1); err != nil {
				t.Fatal(err)
			}
			err := a.Ping("10.250.0.99", 1)
			if err == nil || !strings.Contains(err.Error(), "1 packets transmitted, 0 received") {
				t.Fatalf("ping to absent host: err = %v, want 0 received", err)
			}
		})

		t.Run("RawSendCapture", func(t *testing.T) {
			macA, macB := a.MAC(t, "va"), b.MAC(t, "vb")
			onB := b.Capture(t, "vb")
			onA := a.Capture(t, "va")

			plain := Frame(macB, macA, ethertypeTest, []byte("trestle testutil plain frame"))
			// 802.1Q, VID 100, PCP 3: the kernel strips the tag on receive
			// and Capture must put it back.
			tagged := frame.Eth{Dst: macB, Src: macA, Tags: []frame.Tag{frame.CTagP(3, 100)}, Type: ethertypeTest,
				Payload: []byte("trestle testutil tagged frame")}.MustBytes()
			bcast := Frame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, macA, ethertypeTest, []byte("broadcast"))
			for _, f := range [][]byte{plain, tagged, bcast} {
				if err := a.RawSend("va", f); err != nil {
					t.Fatal(err)
				}
			}
			for name, f := range map[string][]byte{"plain": plain, "tagged": tagged, "broadcast": bcast} {
				if got := onB.WaitFor(eq(f), 1, 2*time.Second); got != 1 {
					t.Errorf("%s frame captured %d times on vb, want 1; frames:\n%s", name, got, dump(onB.Frames()))
				}
			}
			// The sender's capture must not report its own transmissions.
			if got := onA.WaitFor(func(f []byte) bool {
				return len(f) >= 6 && bytes.Equal(f[6:12], macA)
			}, 0, 200*time.Millisecond); got != 0 {
				t.Errorf("va captured %d of its own outgoing frames, want 0", got)
			}
			// A capture survives its interface going down and up again.
			b.MustExec(t, "ip", "link", "set", "vb", "down")
			b.MustExec(t, "ip", "link", "set", "vb", "up")
			deadline := time.Now().Add(2 * time.Second)
			for onB.WaitFor(eq(plain), 2, 100*time.Millisecond) < 2 && time.Now().Before(deadline) {
				// Until the carrier is back, veth drops what it sends.
				if err := a.RawSend("va", plain); err != nil {
					t.Fatal(err)
				}
			}
			if got := onB.WaitFor(eq(plain), 2, 0); got < 2 {
				t.Errorf("plain frame captured %d times after vb went down and up, want >= 2", got)
			}
			if err := onB.Err(); err != nil {
				t.Errorf("capture on vb: %v", err)
			}
			frames := onB.Stop()
			if len(frames) < 3 {
				t.Errorf("Stop returned %d frames, want >= 3", len(frames))
			}
			frames[0][0] ^= 0xff // copies: must not affect the capturer
			if again := onB.Stop(); again[0][0] == frames[0][0] {
				t.Errorf("Stop returned shared buffers")
			}
			if err := a.RawSend("va", []byte{1, 2, 3}); err == nil {
				t.Errorf("RawSend of a 3-byte frame succeeded")
			}
		})

		t.Run("Start", func(t *testing.T) {
			p := a.Start(t, "sh", "-c", "echo ready; exec sleep 60")
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(p.Out.String(), "ready") {
				if time.Now().After(deadline) {
					t.Fatalf("no output from started process: %q", p.Out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			// ip netns exec execs the command, so the PID is the program's
			// (sh until it execs sleep, right after printing "ready").
			pid := p.Cmd.Process.Pid
			for comm := readComm(pid); comm != "sleep"; comm = readComm(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("pid %d is %q, want sleep", pid, comm)
				}
				time.Sleep(10 * time.Millisecond)
			}
			start := time.Now()
			p.Stop()
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Stop took %v for a process that obeys SIGTERM", d)
			}
			if readComm(pid) == "sleep" {
				t.Errorf("pid %d still running after Stop", pid)
			}
		})

		t.Run("Iperf", func(t *testing.T) {
			bps, err := Iperf(t, b, addrB, a, 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			if bps <= 0 {
				t.Fatalf("Iperf = %v bit/s, want > 0", bps)
			}
			t.Logf("veth a->b: %.2f Gbit/s", bps/1e9)

			// Nothing listens on a's own address: the error carries
			// iperf3's message.
			_, err = Iperf(t, b, addrA, a, 1, 1)
			if err == nil || !strings.Contains(err.Error(), "unable to connect") {
				t.Fatalf("Iperf to a closed port: err = %v, want iperf3's connect error", err)
			}
		})
	})

	assertGone(t, names)
}

// TestCleanupOnFailure runs a test that builds a lab and then fails or
// panics, in a child process, and checks that the lab is gone afterwards.
func TestCleanupOnFailure(t *testing.T) {
	RequireRoot(t)
	for _, mode := range []string{"fatal", "panic"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildLab$", "-test.v")
			cmd.Env = append(os.Environ(), "TESTUTIL_CHILD="+mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("child test passed, want it to %s:\n%s", mode, out)
			}
			var names []string
			pid := 0
			for _, line := range strings.Split(string(out), "\n") {
				if _, name, ok := strings.Cut(line, "CHILD-NS "); ok {
					names = append(names, strings.TrimSpace(name))
				}
				if _, s, ok := strings.Cut(line, "CHILD-PID "); ok {
					pid, _ = strconv.Atoi(strings.TrimSpace(s))
				}
			}
			if len(names) != 2 || pid == 0 {
				t.Fatalf("child did not report its lab:\n%s", out)
			}
			assertGone(t, names)
			if readComm(pid) == "sleep" {
				t.Errorf("child's sleep (pid %d) survived", pid)
			}
		})
	}
}

// TestChildLab is TestCleanupOnFailure's child; it does nothing otherwise.
func TestChildLab(t *testing.T) {
	mode := os.Getenv("TESTUTIL_CHILD")
	if mode == "" {
		t.Skip("only run by TestCleanupOnFailure")
	}
	a, b := NewNS(t, "fa"), NewNS(t, "fb")
	Veth(t, a, "va", b, "vb", addrB+"/24")
	b.Capture(t, "vb")
	p := a.Start(t, "sleep", "60")
	t.Logf("CHILD-NS %s", a.Name)
	t.Logf("CHILD-NS %s", b.Name)
	t.Logf("CHILD-PID %d", p.Cmd.Process.Pid)
	if mode == "panic" {
		panic("deliberate panic with a lab set up")
	}
	t.Fatal("deliberate failure with a lab set up")
}

func assertGone(t *testing.T, names []string) {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("no namespaces were recorded")
	}
	list, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, list)
	}
	for _, name := range names {
		if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
			t.Errorf("/run/netns/%s still exists (stat err %v)", name, err)
		}
		if strings.Contains(string(list), name) {
			t.Errorf("ip netns list still shows %s:\n%s", name, list)
		}
	}
}

func linkNames(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ifi := range ifs {
		names = append(names, ifi.Name)
	}
	return names
}

func equalSets(a, b []string) bool {
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

func readComm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func eq(want []byte) func([]byte) bool {
	return func(f []byte) bool { return bytes.Equal(f, want) }
}

func dump(frames [][]byte) string {
	var s strings.Builder
	for _, f := range frames {
		fmt.Fprintf(&s, "%4d: % x\n", len(f), f[:min(len(f), 40)])
	}
	return s.String()
}
