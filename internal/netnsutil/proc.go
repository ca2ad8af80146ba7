package netnsutil

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is a long-running process started in a namespace, the one kind of
// the tests (internal/testutil: stopped by a test's cleanup) and the lab
// (internal/lab: stopped when its run's Net closes). Its stdout and stderr
// both go to Out. StartProc already waits for it: do not call Cmd.Wait;
// use Done, Err or Stop.
type Proc struct {
	Name string // the command's name, for messages
	Cmd  *exec.Cmd
	Out  *SafeBuffer

	done chan struct{}
	err  error // set before done is closed
}

// SafeBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type SafeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SafeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SafeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StopGrace is how long Stop waits after SIGTERM before sending SIGKILL.
const StopGrace = 5 * time.Second

// StartProc starts cmd (made by NS.Command or NS.NetOnly) as a Proc named
// name, so that it dies with this process (Start).
func StartProc(name string, cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{Name: name, Cmd: cmd, Out: &SafeBuffer{}, done: make(chan struct{})}
	cmd.Stdout = p.Out
	cmd.Stderr = p.Out
	// A grandchild holding the output pipe must not block Wait forever.
	cmd.WaitDelay = time.Second
	if err := Start(cmd); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Output is what the process wrote so far.
func (p *Proc) Output() string { return p.Out.String() }

// Done is closed when the process has exited and its output is collected.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the result of Cmd.Wait; it is only meaningful after Done.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop is StopWith(SIGTERM, StopGrace).
func (p *Proc) Stop() error { return p.StopWith(syscall.SIGTERM, StopGrace) }

// StopWith sends sig to the process, SIGKILL if it is still running after
// grace, waits for it, and returns the result of Cmd.Wait. It is harmless
// after the process has exited by itself. Signals go through a pidfd, so
// an exited and reused PID is never hit.
func (p *Proc) StopWith(sig os.Signal, grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
	return p.err
}
