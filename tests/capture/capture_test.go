package capture

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// `trestle capture`, both modes: the file tcpdump reads holds
// exactly the frames of the port, byte for byte, in order; -c stops after
// COUNT; --direction takes one half; a VLAN-aware bridge's frames are
// captured as they left; when the capture ends every port runs the program
// it ran before.

// startCapture runs `trestle capture br0 PORT ARGS...` in the switch's
// namespace and waits until it captures.
func startCapture(l *harness.Lab, args ...string) *testutil.Proc {
	l.T.Helper()
	p := l.SW.Start(l.T, harness.Bin, append([]string{"capture", "--socket", l.Sock, "br0"}, args...)...)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Out.String(), "capturing port") {
		select {
		case <-p.Done():
			l.T.Fatalf("trestle capture %s: %v\n%s", strings.Join(args, " "), p.Err(), p.Out.String())
		default:
		}
		if time.Now().After(deadline) {
			l.T.Fatalf("trestle capture %s did not start:\n%s", strings.Join(args, " "), p.Out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// waitCapture waits for a capture to end by itself (-c).
func waitCapture(t *testing.T, p *testutil.Proc) string {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("trestle capture did not stop after its count:\n%s", p.Out.String())
	}
	if err := p.Err(); err != nil {
		t.Fatalf("trestle capture: %v\n%s", err, p.Out.String())
	}
	return p.Out.String()
}

type pcapFrame struct {
	ts   float64
	data []byte
}

// tcpdumpRead is what tcpdump reads in a capture file: each frame's
// timestamp and bytes.
func tcpdumpRead(t *testing.T, file string) []pcapFrame {
	t.Helper()
	raw, err := exec.Command("tcpdump", "-r", file, "-xx", "-nn", "-tt").Output()
	if err != nil {
		t.Fatalf("tcpdump -r %s: %v", file, err)
	}
	return parseTcpdump(t, string(raw))
}

// parseTcpdump reads the frames of `tcpdump -xx -nn -tt`'s output.
func parseTcpdump(t *testing.T, out string) []pcapFrame {
	t.Helper()
	var fs []pcapFrame
	for _, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "0x") {
			if len(fs) == 0 {
				t.Fatalf("tcpdump: bytes before a frame:\n%s", out)
			}
			_, hexPart, _ := strings.Cut(trimmed, ":")
			b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(hexPart), " ", ""))
			if err != nil {
				t.Fatalf("tcpdump line %q: %v", line, err)
			}
			fs[len(fs)-1].data = append(fs[len(fs)-1].data, b...)
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "reading from") {
			continue
		}
		ts, err := strconv.ParseFloat(strings.Fields(trimmed)[0], 64)
		if err != nil {
			t.Fatalf("tcpdump line %q: no timestamp", line)
		}
		fs = append(fs, pcapFrame{ts: ts})
	}
	return fs
}

// wantFrames checks that the file holds exactly want, in order, with
// timestamps that never go back.
func wantFrames(t *testing.T, what string, got []pcapFrame, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		var b strings.Builder
		for _, f := range got {
			fmt.Fprintf(&b, "  %s\n", hex.EncodeToString(f.data))
		}
		t.Fatalf("%s: %d frames captured, want %d:\n%s", what, len(got), len(want), b.String())
	}
	for i := range want {
		if !bytes.Equal(got[i].data, want[i]) {
			t.Errorf("%s: frame %d:\n  got  %s\n  want %s", what, i, hex.EncodeToString(got[i].data), hex.EncodeToString(want[i]))
		}
		if i > 0 && got[i].ts < got[i-1].ts {
			t.Errorf("%s: frame %d's timestamp %f is before frame %d's %f", what, i, got[i].ts, i-1, got[i-1].ts)
		}
	}
}

// sent is a frame a host sends.
type sent struct {
	from  int
	frame []byte
}

// captureFile captures port-h1 to a file (more flags in args) while the
// hosts send frames, and checks that tcpdump reads want from it; during
// runs while the capture runs, before the frames. It returns what the
// capture said.
func captureFile(l *harness.Lab, name string, args []string, frames []sent, want [][]byte, during func()) string {
	l.T.Helper()
	file := filepath.Join(l.Dir, name)
	p := startCapture(l, append([]string{harness.PortName(1), "-w", file}, args...)...)
	if during != nil {
		during()
	}
	for _, f := range frames {
		send(l, f.from, f.frame)
	}
	out := waitCapture(l.T, p)
	wantFrames(l.T, name, tcpdumpRead(l.T, file), want)
	return out
}

func send(l *harness.Lab, from int, frame []byte) {
	l.T.Helper()
	if err := l.Host(from).RawSend("eth0", frame); err != nil {
		l.T.Fatalf("send from h%d: %v", from, err)
	}
	time.Sleep(20 * time.Millisecond) // what the frame teaches the switch is known to the next
}

func TestCapture(t *testing.T) {
	t.Parallel()
	testutil.RequireCmd(t, "tcpdump")
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
		l.Start()
		before := l.Programs()
		if len(before) != 3 {
			t.Fatalf("programs attached: %v, want one on each of 3 ports", before)
		}
		bcast := harness.VLANBcast()
		a := harness.Marked(bcast, harness.HostMAC(1), "a: h1 broadcast")
		b := harness.Marked(harness.HostMAC(1), harness.HostMAC(2), "b: h2 to h1")
		c := harness.Marked(harness.HostMAC(2), harness.HostMAC(3), "c: h3 to h2")
		d := harness.Marked(harness.HostMAC(2), harness.HostMAC(1), "d: h1 to h2")
		e := harness.Marked(bcast, harness.HostMAC(3), "e: h3 broadcast")
		f := harness.Marked(bcast, harness.HostMAC(1), "f: after the count")

		var during map[string]ebpf.ProgramID
		out := captureFile(l, "both.pcap", []string{"-c", "4"}, []sent{{1, a}, {2, b}, {3, c}, {1, d}, {3, e}}, [][]byte{a, b, d, e},
			func() { during = l.Programs() })
		for k, id := range before {
			if during[k] == id {
				t.Errorf("%s: program %d while capturing, the same as before", k, id)
			}
		}
		send(l, 1, f)
		if !strings.Contains(out, "4 frames captured, 0 lost") {
			t.Errorf("capture's summary:\n%s\nwant \"4 frames captured, 0 lost\"", out)
		}
		if after := l.Programs(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("programs after the capture %v, before it %v", after, before)
		}
		captureFile(l, "in.pcap", []string{"-c", "2", "--direction", "in"}, []sent{{2, b}, {1, a}, {3, e}, {1, d}}, [][]byte{a, d}, nil)
		captureFile(l, "out.pcap", []string{"-c", "2", "--direction", "out"}, []sent{{1, a}, {2, b}, {1, d}, {3, e}}, [][]byte{b, e}, nil)

		// Verdicts: text lines, and pcapng comments.
		bad := harness.Marked(harness.HostMAC(2), net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}, "bad source")
		p := startCapture(l, harness.PortName(1), "-c", "3", "--direction", "in")
		send(l, 1, a)
		send(l, 1, d)
		send(l, 1, bad)
		out = waitCapture(t, p)
		for _, want := range []string{"in     60 bytes  flooded", "in     60 bytes  forwarded to " + harness.PortName(2), "in     60 bytes  dropped (bad_source)"} {
			if !strings.Contains(out, want) {
				t.Errorf("text capture has no line with %q:\n%s", want, out)
			}
		}
		p = startCapture(l, harness.PortName(1), "-c", "1", "--json")
		send(l, 1, bad)
		var jf ctl.CaptureFrame
		for _, line := range strings.Split(waitCapture(t, p), "\n") {
			if strings.HasPrefix(line, "{") {
				if err := json.Unmarshal([]byte(line), &jf); err != nil {
					t.Errorf("--json: %v: %s", err, line)
				}
			}
		}
		if jf.Direction != "in" || jf.Verdict != "dropped" || jf.Reason != "bad_source" || jf.Length != 60 || jf.Data != hex.EncodeToString(bad) {
			t.Errorf("--json: %+v", jf)
		}
		captureFile(l, "verdicts.pcapng", []string{"-c", "3", "--verdicts"}, []sent{{1, bad}, {2, b}, {1, d}}, [][]byte{bad, b, d}, nil)
		wantComments(t, filepath.Join(l.Dir, "verdicts.pcapng"), []string{"in: dropped (bad_source)", "out: forwarded", "in: forwarded to " + harness.PortName(2)})

		// docs/operations.md's example: pcap on stdout, read by tcpdump from a pipe.
		pipeErr, pipeOut := filepath.Join(l.Dir, "pipe.err"), filepath.Join(l.Dir, "pipe.out")
		p = l.SW.Start(t, "sh", "-c", fmt.Sprintf("%s capture --socket %s br0 %s -c 2 -w - 2>%s | tcpdump -r - -xx -nn -tt >%s 2>/dev/null",
			harness.Bin, l.Sock, harness.PortName(1), pipeErr, pipeOut))
		deadline := time.Now().Add(10 * time.Second)
		for b, _ := os.ReadFile(pipeErr); !bytes.Contains(b, []byte("capturing port")); b, _ = os.ReadFile(pipeErr) {
			if time.Now().After(deadline) {
				t.Fatalf("trestle capture -w - | tcpdump -r - did not start: %s", b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		send(l, 1, a)
		send(l, 2, b)
		waitCapture(t, p)
		piped, _ := os.ReadFile(pipeOut)
		wantFrames(t, "-w - | tcpdump -r -", parseTcpdump(t, string(piped)), [][]byte{a, b})

		if after := l.Programs(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("programs after the captures %v, before them %v", after, before)
		}
		// One at a time; unknown ports and bridges are named.
		p = startCapture(l, harness.PortName(2))
		if out, err := l.CLI("capture", "br0", harness.PortName(1)); err == nil || !strings.Contains(out, "being captured already") {
			t.Errorf("a second capture: %v\n%s", err, out)
		}
		p.Stop()
		if !strings.Contains(p.Out.String(), "0 lost") {
			t.Errorf("a capture stopped by SIGTERM did not say what it captured:\n%s", p.Out.String())
		}
		if out, err := l.CLI("capture", "br0", "nosuch"); err == nil || !strings.Contains(out, `bridge "br0" has no port "nosuch"`) {
			t.Errorf("capture of an unknown port: %v\n%s", err, out)
		}
		if out, err := l.CLI("capture", "br9", harness.PortName(1)); err == nil || !strings.Contains(out, `no bridge "br9"`) {
			t.Errorf("capture on an unknown bridge: %v\n%s", err, out)
		}
		// A client that goes away ends the capture too.
		p = startCapture(l, harness.PortName(1))
		_ = p.Cmd.Process.Kill()
		<-p.Done()
		deadline = time.Now().Add(5 * time.Second)
		for fmt.Sprint(l.Programs()) != fmt.Sprint(before) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if after := l.Programs(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("programs after a killed capture %v, before it %v", after, before)
		}
		l.Stop()
	})
}

func wantComments(t *testing.T, file string, want []string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("read %s as pcapng: %v", file, err)
	}
	for i, w := range want {
		_, _, opts, err := r.ReadPacketDataWithOptions()
		if err != nil {
			t.Fatalf("%s: frame %d: %v", file, i, err)
		}
		if len(opts.Comments) != 1 || opts.Comments[0] != w {
			t.Errorf("%s: frame %d's comments %q, want %q", file, i, opts.Comments, w)
		}
	}
}

// TestCaptureVLAN, both modes: on a trunk of VLAN 10 (h1) the capture
// holds the tagged frame h1 sent, as it came in, and an access port's (h2)
// untagged frame as the trunk sent it, tagged, the same bytes h1 received.
func TestCaptureVLAN(t *testing.T) {
	t.Parallel()
	testutil.RequireCmd(t, "tcpdump")
	harness.ForModes(t, func(t *testing.T, mode string) {
		l, caps := harness.VLANLab(t, mode, "", "trunk = [10]", "vlan = 10", "vlan = 10")
		before := l.Programs()
		file := filepath.Join(l.Dir, "trunk.pcap")
		p := startCapture(l, harness.PortName(1), "-w", file, "-c", "2")
		in := harness.VFrame(harness.VLANBcast(), harness.HostMAC(1), "tagged in", harness.CTagP(5, 10))
		out := harness.VFrame(harness.VLANBcast(), harness.HostMAC(2), "untagged out")
		send(l, 1, in)
		send(l, 2, out)
		waitCapture(t, p)
		sent := harness.VFrame(harness.VLANBcast(), harness.HostMAC(2), "untagged out", harness.CTag(10))
		wantFrames(t, "trunk", tcpdumpRead(t, file), [][]byte{in, sent})
		caps[1].WaitFor(func(f []byte) bool { return bytes.Equal(f, sent) }, 1, 2*time.Second)
		got := false
		for _, f := range caps[1].Frames() {
			got = got || bytes.Equal(f, sent)
		}
		if !got {
			t.Errorf("h1 did not receive the frame the capture says its port sent: %s", hex.EncodeToString(sent))
		}
		file = filepath.Join(l.Dir, "access.pcap")
		p = startCapture(l, harness.PortName(2), "-w", file, "-c", "1", "--direction", "out")
		send(l, 1, in)
		waitCapture(t, p)
		wantFrames(t, "access", tcpdumpRead(t, file), [][]byte{harness.VFrame(harness.VLANBcast(), harness.HostMAC(1), "tagged in")})
		if after := l.Programs(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("programs after the captures %v, before them %v", after, before)
		}
		l.Stop()
	})
}

// TestCapturePersist: a daemon with persist stopped while a capture runs
// leaves every pinned link with the program it ran before the capture.
func TestCapturePersist(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewPersistLab(t, 2, func(int) string { return fmt.Sprintf("mode = %q\n", mode) })
		l.StartNet(harness.Bin)
		before := l.Programs()
		p := startCapture(l, harness.PortName(1))
		if during := l.Programs(); fmt.Sprint(during) == fmt.Sprint(before) {
			t.Fatalf("programs while capturing %v, the same as before", during)
		}
		l.Signal(syscall.SIGTERM)
		if after := l.Programs(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("pinned programs after the daemon stopped during a capture %v, before it %v", after, before)
		}
		p.Stop()
	})
}
