package faults

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/tests/harness"
)

// TestFaultsUnderLoad: while a stream h1 -> h2 runs, everything else goes
// wrong: a port's interface is deleted, created again, renamed and named
// back; the config is replaced by garbage and reloaded (through the socket
// and by SIGHUP); the control socket gets random bytes and 1000 clients at
// once; the generator and the sink of a second stream are killed mid-run.
// The stream loses no frame and floods none, the daemon lives on and
// answers, and it logged each fault it could see.
func TestFaultsUnderLoad(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewLab(t, 4)
			cfg := l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }) +
				fmt.Sprintf("\n[[bridge.port]]\ninterface = \"port-x\"\nmode = %q\n", mode)
			l.WriteConfig(cfg)
			addX := "link add port-x type veth peer name peer-x\nlink set port-x up\nlink set peer-x up\n"
			if out, err := l.SW.Exec("sh", "-c", "printf '"+strings.ReplaceAll(addX, "\n", "\\n")+"' | ip -batch -"); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			l.Start()
			l.PingAll()

			sink2, sink3, sink4 := l.StartSinkOn(2), l.StartSinkOn(3), l.StartSinkOn(4)
			gen := l.Host(1).Start(t, harness.Bin, "gen", "--dev", "eth0", "--mode", "packet", "--dst-mac", harness.HostMAC(2).String(),
				"--rate", "20000", "--duration", "10s", "--json")
			// The second stream, h3 -> h4, whose ends are killed.
			gen3 := l.Host(3).Start(t, harness.Bin, "gen", "--dev", "eth0", "--mode", "packet", "--dst-mac", harness.HostMAC(4).String(),
				"--rate", "20000", "--duration", "10s", "--flows", "1", "--json")
			step := func(what string, f func()) {
				time.Sleep(700 * time.Millisecond)
				t.Logf("%s", what)
				f()
			}
			ipBatch := func(cmds string) {
				t.Helper()
				if out, err := l.SW.Exec("sh", "-c", "printf '"+strings.ReplaceAll(cmds, "\n", "\\n")+"' | ip -batch -"); err != nil {
					t.Fatalf("ip %q: %v %s", cmds, err, out)
				}
			}
			step("delete port-x", func() { ipBatch("link del port-x\n") })
			step("create port-x again", func() { ipBatch(addX) })
			step("rename port-x, and back", func() {
				ipBatch("link set port-x down\nlink set port-x name port-y\nlink set port-y up\n")
				time.Sleep(300 * time.Millisecond)
				ipBatch("link set port-y down\nlink set port-y name port-x\nlink set port-x up\n")
			})
			step("garbage config, reloaded through the socket and by SIGHUP", func() {
				garbage := make([]byte, 4096)
				rand.Read(garbage)
				if err := os.WriteFile(l.Cfg, garbage, 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := l.CLI("reload"); err == nil {
					t.Errorf("reload of garbage succeeded: %s", out)
				}
				l.Daemon.Cmd.Process.Signal(syscall.SIGHUP)
				time.Sleep(200 * time.Millisecond)
				l.WriteConfig(cfg)
			})
			step("random bytes and 1000 clients on the control socket", func() {
				var wg sync.WaitGroup
				var mu sync.Mutex
				answered, failed := 0, map[string]int{}
				for i := 0; i < 100; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, err := net.Dial("unix", l.Sock)
						if err != nil {
							return
						}
						defer c.Close()
						junk := make([]byte, 1+i*97)
						rand.Read(junk)
						c.SetDeadline(time.Now().Add(5 * time.Second))
						c.Write(junk)
						c.(*net.UnixConn).CloseWrite()
						buf := make([]byte, 512)
						c.Read(buf)
					}()
				}
				for i := 0; i < 1000; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var ps []ctl.PortStats
						err := ctl.Call(l.Sock, ctl.Request{Cmd: ctl.CmdStats}, &ps)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							failed[err.Error()]++
						} else if len(ps) == 5 {
							answered++
						}
					}()
				}
				wg.Wait()
				if answered != 1000 {
					t.Errorf("%d of 1000 concurrent clients were answered with every port; errors: %v", answered, failed)
				}
			})
			step("kill -9 the second stream's generator and sink", func() {
				gen3.Cmd.Process.Signal(syscall.SIGKILL)
				sink4.Cmd.Process.Signal(syscall.SIGKILL)
			})
			harness.StreamLossless(t, gen, sink2, sink3)

			select {
			case <-l.Daemon.Done():
				t.Fatalf("the daemon exited:\n%s", l.Daemon.Out.String())
			default:
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				st := l.Show()
				if p := st.Bridges[0].Ports[4]; p.Name == "port-x" && p.State == "up" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("port-x is not up again after the faults: %+v", st.Bridges[0].Ports[4])
				}
				time.Sleep(100 * time.Millisecond)
			}
			l.PingAll()
			log := l.Daemon.Out.String()
			for _, want := range []string{
				`msg="port down" .*bridge=br0 port=port-x`,
				`msg="port up" .*bridge=br0 port=port-x`,
				`msg="reload rejected; running state kept"`,
				`msg="bad request on the control socket"`,
			} {
				if !regexp.MustCompile(want).MatchString(log) {
					t.Errorf("the daemon did not log %s:\n%s", want, log)
				}
			}
			if n := strings.Count(log, "reload rejected"); n != 2 {
				t.Errorf("%d reloads logged as rejected, want 2 (socket and SIGHUP)", n)
			}
			if n := strings.Count(log, "bad request on the control socket"); n > 10 {
				t.Errorf("%d lines for the bad requests: the log is not rate-limited", n)
			}
			l.Stop()
		})
	}
}
