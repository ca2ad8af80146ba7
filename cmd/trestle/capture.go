package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/spf13/cobra"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

func (e *env) captureCmd() *cobra.Command {
	var file, dir string
	var count, snaplen int
	var verdicts bool
	c := &cobra.Command{
		Use:   "capture BRIDGE PORT [-w FILE] [-c COUNT] [--direction in|out|both] [--snaplen N] [--verdicts]",
		Short: "Capture the frames the switch sees on a port, as pcap for tcpdump and Wireshark",
		Long: `Capture the frames the datapath sees on PORT of BRIDGE: what the port received from
its host (in) and what the bridge sent out of it (out), each as it was on
the wire: a frame a VLAN-aware bridge tags or untags for the port is
captured as it left.

Without -w, one line a frame: time, port, direction, length and verdict
(forwarded, flooded, or dropped and why, with the reason names of
'trestle stats'); with --json, one JSON object a frame, its bytes in hex
included. With -w FILE the frames are written as pcap, into a new file
readable by its owner alone (capture never writes over a file that is
there, nor through a symbolic link; a device or a FIFO it writes to);
-w - writes them to stdout, for tcpdump or Wireshark:

  trestle capture br0 p1 -w - | tcpdump -n -r -
  trestle capture br0 p1 --direction in -c 100 -w p1.pcap
  trestle capture br0 p1 -w - --verdicts | wireshark -k -i -

pcap has no room for a verdict: -w with --verdicts writes pcapng instead,
each frame with its verdict as the frame's comment (Wireshark: the
frame.comment field) and its direction in the frame's flags (inbound:
in, outbound: out).

The capture ends after COUNT frames (-c), or on SIGINT or SIGTERM; then
stderr says how many frames were captured and how many the datapath could
not keep because the capture's ring was full (lost). One capture runs at a
time. While none runs, the switch runs programs without any capture code;
a capture moves every port to programs with it, and back when it ends.`,
		Args: nargs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(captureDirections, dir) {
				return usagef("--direction %q: one of %s", dir, strings.Join(captureDirections, ", "))
			}
			if snaplen < 0 || snaplen > maxSnaplen {
				return usagef("--snaplen %d: 0 (the most) to %d bytes", snaplen, maxSnaplen)
			}
			if count < 0 {
				return usagef("--count %d: a number of frames of at least 0 (0: until SIGINT or SIGTERM)", count)
			}
			if e.json && file != "" {
				return usagef("--json prints the frames, --write writes them to a file: give one")
			}
			return e.capture(ctl.Request{Bridge: args[0], Port: args[1], Direction: dir, Snaplen: snaplen}, file, count, verdicts)
		},
	}
	c.Flags().StringVarP(&file, "write", "w", "", "write the frames to FILE as pcap (pcapng with --verdicts); - is stdout")
	c.Flags().IntVarP(&count, "count", "c", 0, "stop after COUNT frames (0: at SIGINT or SIGTERM)")
	c.Flags().StringVar(&dir, "direction", "both", "in (what the port receives), out (what the bridge sends out of it) or both")
	c.Flags().IntVar(&snaplen, "snaplen", 0, fmt.Sprintf("bytes kept of each frame (0: the most, %d)", maxSnaplen))
	c.Flags().BoolVar(&verdicts, "verdicts", false, "with -w: pcapng with each frame's verdict as its comment")
	c.Flags().BoolVar(&e.json, "json", false, "print a JSON object a frame (time, port, direction, length, verdict, reason, egress, data in hex)")
	return c
}

// captureDirections are what --direction takes.
var captureDirections = []string{"in", "out", "both"}

// maxSnaplen is the most of a frame a capture keeps.
const maxSnaplen = datapath.SnapMax

// frameSink is where captured frames go: text lines, pcap or pcapng.
type frameSink interface {
	write(r *ctl.CaptureRecord, verdict string) error
	flush() error
}

func (e *env) capture(req ctl.Request, file string, count int, verdicts bool) error {
	var out io.Writer = e.stdout
	if file != "" && file != "-" {
		f, err := createCaptureFile(file)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
		// A capture that never started leaves no empty file behind.
		defer func() {
			if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
				os.Remove(file)
			}
		}()
	}
	cl, err := ctl.Capture(e.sock(), req)
	if err != nil {
		return err
	}
	defer cl.Close()
	h := cl.Header
	var sink frameSink
	switch {
	case e.json:
		sink = &jsonSink{enc: json.NewEncoder(out), h: h}
	case file == "":
		sink = &textSink{w: escaper{out}, port: h.Port}
	case verdicts:
		sink, err = newNgSink(out, h)
	default:
		sink, err = newPcapSink(out, h)
	}
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	what := "in and out"
	if req.Direction == "in" || req.Direction == "out" {
		what = req.Direction
	}
	fmt.Fprintf(e.stderr, "capturing port %s of bridge %s (%s), %s, %d bytes a frame\n", h.Port, h.Bridge, h.Mode, what, h.Snaplen)

	defer stopOnSignal(cl.Stop)()
	var n uint64
	var end *ctl.CaptureEnd
	stopped := false
	for end == nil {
		var r *ctl.CaptureRecord
		r, end, err = cl.Next()
		if err != nil {
			_ = sink.flush()
			return err
		}
		if r == nil || (count > 0 && n >= uint64(count)) {
			continue // after -c: what was on its way
		}
		if err := sink.write(r, verdictOf(r, h)); err != nil {
			return fmt.Errorf("capture: write: %w", err)
		}
		n++
		if count > 0 && n >= uint64(count) && !stopped {
			stopped = true
			_ = cl.Stop()
		}
		if err := sink.flush(); err != nil {
			return fmt.Errorf("capture: write: %w", err)
		}
	}
	if err := sink.flush(); err != nil {
		return fmt.Errorf("capture: write: %w", err)
	}
	fmt.Fprintf(e.stderr, "%d frames captured, %d lost\n", n, end.Lost)
	if end.Error != "" {
		return fmt.Errorf("capture: %s", end.Error)
	}
	return nil
}

// stopOnSignal calls stop at SIGINT or SIGTERM, until the function it
// returns is called: a stream's client asks the daemon to end the stream
// and reads what was on its way, rather than dying with it.
func stopOnSignal(stop func() error) func() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			_ = stop()
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(sigs)
	}
}

// verdictOf says what became of a frame: "flooded", "forwarded to p2",
// "dropped (bad_source)", "dropped (hairpin, in a bridge beyond a patch
// port)".
func verdictOf(r *ctl.CaptureRecord, h ctl.CaptureHeader) string {
	switch r.Verdict {
	case ctl.VerdictForwarded:
		if r.Dir == ctl.CaptureIn && r.Egress != 0 {
			if name, ok := h.Ports[r.Egress]; ok {
				return "forwarded to " + name
			}
			return fmt.Sprintf("forwarded to ifindex %d", r.Egress)
		}
		if r.Dir == ctl.CaptureIn {
			return "forwarded through patch ports"
		}
		return "forwarded"
	case ctl.VerdictFlooded:
		return "flooded"
	case ctl.VerdictDropped:
		if int(r.Reason) >= len(h.Reasons) {
			return "dropped (in a bridge beyond a patch port)"
		}
		if r.Beyond {
			return "dropped (" + h.Reasons[r.Reason] + ", in a bridge beyond a patch port)"
		}
		return "dropped (" + h.Reasons[r.Reason] + ")"
	}
	return fmt.Sprintf("verdict %d", r.Verdict)
}

func dirName(d uint8) string {
	if d == ctl.CaptureOut {
		return "out"
	}
	return "in"
}

type textSink struct {
	w    io.Writer
	port string
}

func (s *textSink) write(r *ctl.CaptureRecord, verdict string) error {
	t := time.Unix(0, r.TimeNs)
	_, err := fmt.Fprintf(s.w, "%s %s %-3s %5d bytes  %s\n", t.Format("15:04:05.000000"), s.port, dirName(r.Dir), r.Len, verdict)
	return err
}

func (s *textSink) flush() error { return nil }

type jsonSink struct {
	enc *json.Encoder
	h   ctl.CaptureHeader
}

func (s *jsonSink) write(r *ctl.CaptureRecord, _ string) error {
	f := ctl.CaptureFrame{Time: time.Unix(0, r.TimeNs), Port: s.h.Port, Direction: dirName(r.Dir), Length: r.Len, Data: hex.EncodeToString(r.Data)}
	switch r.Verdict {
	case ctl.VerdictForwarded:
		f.Verdict, f.Egress = "forwarded", s.h.Ports[r.Egress]
	case ctl.VerdictFlooded:
		f.Verdict = "flooded"
	case ctl.VerdictDropped:
		f.Verdict, f.Reason = "dropped", "beyond_patch_port"
		if int(r.Reason) < len(s.h.Reasons) {
			f.Reason = s.h.Reasons[r.Reason]
		}
		f.BeyondPatchPort = r.Beyond || int(r.Reason) >= len(s.h.Reasons)
	}
	return s.enc.Encode(f)
}

func (s *jsonSink) flush() error { return nil }

func captureInfo(r *ctl.CaptureRecord) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: time.Unix(0, r.TimeNs), CaptureLength: len(r.Data), Length: int(max(r.Len, uint32(len(r.Data))))}
}

type pcapSink struct{ w *pcapgo.Writer }

func newPcapSink(w io.Writer, h ctl.CaptureHeader) (*pcapSink, error) {
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(uint32(h.Snaplen), layers.LinkTypeEthernet); err != nil {
		return nil, err
	}
	return &pcapSink{w: pw}, nil
}

func (s *pcapSink) write(r *ctl.CaptureRecord, _ string) error {
	return s.w.WritePacket(captureInfo(r), r.Data)
}

func (s *pcapSink) flush() error { return nil }

type ngSink struct{ w *pcapgo.NgWriter }

func newNgSink(w io.Writer, h ctl.CaptureHeader) (*ngSink, error) {
	intf := pcapgo.DefaultNgInterface
	intf.LinkType = layers.LinkTypeEthernet
	intf.Name = h.Port
	intf.Description = fmt.Sprintf("trestle port %s of bridge %s (%s)", h.Port, h.Bridge, h.Mode)
	intf.SnapLength = uint32(h.Snaplen)
	opts := pcapgo.DefaultNgWriterOptions
	opts.SectionInfo.Application = "trestle capture"
	nw, err := pcapgo.NewNgWriterInterface(w, intf, opts)
	if err != nil {
		return nil, err
	}
	return &ngSink{w: nw}, nil
}

func (s *ngSink) write(r *ctl.CaptureRecord, verdict string) error {
	flags := &pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionInbound}
	if r.Dir == ctl.CaptureOut {
		flags.Direction = pcapgo.NgEpbFlagDirectionOutbound
	}
	return s.w.WritePacketWithOptions(captureInfo(r), r.Data,
		pcapgo.NgPacketOptions{Comments: []string{dirName(r.Dir) + ": " + verdict}, Flags: flags})
}

func (s *ngSink) flush() error { return s.w.Flush() }

// createCaptureFile opens what -w names for the frames of other tenants'
// traffic: a new file, readable by its owner alone (0600, whatever the
// umask), never through a symbolic link (O_NOFOLLOW), never over a file that
// is there already (O_EXCL: capture overwrites nothing, so a link or a file
// planted where a root capture will write cannot make it write elsewhere).
// A character device or a FIFO that is there (/dev/null, a named pipe to a
// reader) is written to, not replaced, if this user or root owns it.
func createCaptureFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return openCaptureStream(path)
	}
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	// The mode given to open is masked by the umask; 0600 is also the most
	// a umask leaves, so this only makes sure.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("capture: %w", err)
	}
	return f, nil
}

// openCaptureStream opens an existing path -w names if it is a stream
// (a character device or a FIFO), checked on what was opened, not on the
// name, so that nothing swapped in between is written.
func openCaptureStream(path string) (*os.File, error) {
	refuse := func(what string) error {
		return fmt.Errorf("capture: %s is there already (%s): capture writes only a new file, a device or a FIFO; remove it or name another", path, what)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, refuse("a symbolic link")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, refuse("a symbolic link")
		}
		if errors.Is(err, syscall.ENXIO) {
			return nil, fmt.Errorf("capture: %s is a FIFO with no reader: start the reader first", path)
		}
		return nil, fmt.Errorf("capture: %w", err)
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(fs.ModeCharDevice|fs.ModeNamedPipe) == 0 {
		f.Close()
		return nil, refuse("a file")
	}
	// A FIFO another user made where a capture will write (a shared /tmp)
	// is that user's way to the frames: written only if this user or root
	// owns it. (This open has no O_CREAT, so fs.protected_fifos does not
	// stop it as it stops one that has.)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		f.Close()
		return nil, refuse(fmt.Sprintf("a %s of uid %d, another user", map[bool]string{true: "FIFO", false: "device"}[fi.Mode()&fs.ModeNamedPipe != 0], st.Uid))
	}
	return f, nil
}
