package main

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
)

// fakeCtl is a control socket that answers as a daemon would, from the
// answers a test gives it, and keeps the requests it was sent: the CLI's
// commands run against it in-process.
type fakeCtl struct {
	sock string
	mu   sync.Mutex
	reqs []ctl.Request
	// fdb is what fdb.show streams, unfiltered, as a daemon of an earlier
	// release would.
	fdb []ctl.FDBEntry
}

// startFake serves answer on a socket of the test's, and streams: fdb.show
// (of f.fdb) and those of streams.
func startFake(t *testing.T, answer func(req ctl.Request) (any, error), streams ...map[string]ctl.StreamHandler) *fakeCtl {
	t.Helper()
	f := &fakeCtl{sock: filepath.Join(t.TempDir(), "t.sock")}
	srv, err := ctl.Listen(f.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); srv.Close() })
	srv.HandleStream(ctl.CmdFDBShow, func(_ context.Context, req ctl.Request, s *ctl.Stream) error {
		f.keep(req)
		if _, err := answer(req); err != nil {
			return err
		}
		if err := s.Header(ctl.FDBHeader{Chunk: 256}); err != nil {
			return nil
		}
		_ = s.FDBChunk(f.fdb)
		return s.EndFDB(ctl.FDBEnd{Entries: len(f.fdb)})
	})
	for _, m := range streams {
		for cmd, h := range m {
			srv.HandleStream(cmd, h)
		}
	}
	go srv.Serve(ctx, func(_ context.Context, req ctl.Request) (any, error) {
		f.keep(req)
		return answer(req)
	})
	return f
}

func (f *fakeCtl) keep(req ctl.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
}

// requests are the requests the daemon was sent, in order.
func (f *fakeCtl) requests() []ctl.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// last is the last request the daemon was sent.
func (f *fakeCtl) last() ctl.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		return ctl.Request{}
	}
	return f.reqs[len(f.reqs)-1]
}

// env is the environment of a command line that talks to f.
func (f *fakeCtl) env() map[string]string { return map[string]string{"TRESTLE_SOCKET": f.sock} }
