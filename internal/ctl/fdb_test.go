package ctl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// fdbServer serves fdb.show with h on a socket of its own.
func fdbServer(t *testing.T, h StreamHandler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.sock")
	srv, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	srv.HandleStream(CmdFDBShow, h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go srv.Serve(ctx, func(context.Context, Request) (any, error) { return nil, errors.New("not this") })
	return path
}

// TestFDBGathers: the chunks of fdb.show, in the table's order and split
// into messages, become one table sorted by bridge, VLAN and MAC; a chunk
// larger than a message is split and arrives whole.
func TestFDBGathers(t *testing.T) {
	var sent []FDBEntry
	for i := range 3 * fdbMessage / 2 {
		// Reverse order, two bridges and two VLANs.
		sent = append(sent, FDBEntry{Bridge: []string{"br1", "br0"}[i%2], VLAN: uint16(i % 3), MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", 255-i/256, 255-i%256), Port: "p1"})
	}
	path := fdbServer(t, func(_ context.Context, req Request, s *Stream) error {
		if req.Bridge != "brX" {
			return fmt.Errorf("asked for bridge %q", req.Bridge)
		}
		if err := s.Header(FDBHeader{Chunk: len(sent)}); err != nil {
			return err
		}
		if err := s.FDBChunk(sent[:7]); err != nil {
			return err
		}
		if err := s.FDBChunk(sent[7:]); err != nil {
			return err
		}
		return s.EndFDB(FDBEnd{Entries: len(sent)})
	})
	es, err := FDB(path, "brX")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(sent) {
		t.Fatalf("got %d entries, want %d", len(es), len(sent))
	}
	for i := 1; i < len(es); i++ {
		a, b := es[i-1], es[i]
		if a.Bridge > b.Bridge || a.Bridge == b.Bridge && (a.VLAN > b.VLAN || a.VLAN == b.VLAN && a.MAC >= b.MAC) {
			t.Fatalf("entries %d and %d out of order: %+v, %+v", i-1, i, a, b)
		}
	}
}

// TestFDBNeverPartial: a walk the daemon cuts short (its end says why), an
// end whose count is not what came, a stream without its end, and an error
// before the header are errors, never a part of the table.
func TestFDBNeverPartial(t *testing.T) {
	one := []FDBEntry{{Bridge: "br0", MAC: "02:00:00:00:00:01", Port: "p1"}}
	for _, tc := range []struct {
		name string
		h    StreamHandler
		want string
	}{
		{"walk failed", func(_ context.Context, _ Request, s *Stream) error {
			_ = s.Header(FDBHeader{Chunk: 1})
			_ = s.FDBChunk(one)
			return s.EndFDB(FDBEnd{Entries: 1, Error: "dump fdb: no room"})
		}, "dump fdb: no room"},
		{"count differs", func(_ context.Context, _ Request, s *Stream) error {
			_ = s.Header(FDBHeader{Chunk: 1})
			_ = s.FDBChunk(one)
			return s.EndFDB(FDBEnd{Entries: 2})
		}, "sent 1 entries and counted 2"},
		{"no end", func(_ context.Context, _ Request, s *Stream) error {
			_ = s.Header(FDBHeader{Chunk: 1})
			_ = s.FDBChunk(one)
			return s.Flush()
		}, "without its end"},
		{"no bridge", func(context.Context, Request, *Stream) error {
			return errors.New(`no bridge "brX"`)
		}, `no bridge "brX"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := fdbServer(t, tc.h)
			es, err := FDB(path, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) || es != nil {
				t.Fatalf("got %d entries and error %v, want none and %q", len(es), err, tc.want)
			}
		})
	}
}
