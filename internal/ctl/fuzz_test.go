package ctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fuzzServer is a control socket served by a handler that answers every
// request with the request itself, and a capture stream that sends its
// header and end at once (or refuses a negative snap length), so that a
// test sees what the server made of the bytes it got.
func fuzzServer(t testing.TB) string {
	dir, err := os.MkdirTemp("", "ctlfuzz") // short: a socket path has 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.sock")
	srv, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv.HandleStream(CmdCapture, func(_ context.Context, req Request, s *Stream) error {
		if req.Snaplen < 0 {
			return errors.New("snaplen must not be negative")
		}
		if err := s.Header(req); err != nil {
			return err
		}
		return s.End(CaptureEnd{})
	})
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, func(_ context.Context, req Request) (any, error) { return req, nil })
	t.Cleanup(func() {
		cancel()
		srv.Close()
		os.RemoveAll(dir)
	})
	return path
}

// exchange writes data to the socket, ends its side, and reads the answer.
func exchange(t *testing.T, path string, data []byte) []byte {
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		// The server may answer and close before it has read it all.
		_, _ = c.Write(data)
		_ = c.(*net.UnixConn).CloseWrite()
	}()
	out, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("read the answer: %v", err)
	}
	return out
}

// FuzzServer writes any bytes to the control socket. Whatever they are, the
// server answers once, in JSON, and goes on serving: an error for bytes
// that are no request (and for more than it reads of one), the request as
// it was sent for one; a stream's header and end for a capture.
//
//	go test -run '^$' -fuzz '^FuzzServer$' ./internal/ctl
func FuzzServer(f *testing.F) {
	for _, s := range []string{
		`{"cmd":"show"}`,
		`{"cmd":"fdb.add","bridge":"br0","mac":"02:00:00:00:00:01","port":"p1","vlan":10}`,
		`{"cmd":"rule.add","bridge":"br0","args":["action=pass","proto=tcp"],"index":1}`,
		`{"cmd":"capture","bridge":"br0","port":"p1","direction":"in","snaplen":128}`,
		`{"cmd":"capture","snaplen":-1}`,
		`{"cmd":"show"} trailing`,
		`{"cmd":`,
		`[1,2,3]`,
		`null`,
		"\x00\xff\xfe",
		`{"vlan":70000}`,
		`{"cmd":"show","cmd":"stats"}`,
		strings.Repeat("[", 20000),
		"",
	} {
		f.Add([]byte(s))
	}
	path := fuzzServer(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		out := exchange(t, path, data)
		line, rest, ok := bytes.Cut(out, []byte("\n"))
		if !ok {
			t.Fatalf("no answer, or not a line: %q", out)
		}
		var resp Response
		if err := json.Unmarshal(line, &resp); err != nil {
			t.Fatalf("the answer is not a Response: %v: %q", err, line)
		}
		// What the server should have read: one JSON value, from at
		// most maxRequest bytes.
		var req Request
		err := json.NewDecoder(io.LimitReader(bytes.NewReader(data), maxRequest)).Decode(&req)
		if err != nil {
			if !strings.HasPrefix(resp.Error, "bad request: ") {
				t.Fatalf("bytes that are no request answered %q", line)
			}
			if len(rest) > 0 {
				t.Fatalf("more than one answer: %q", out)
			}
			return
		}
		if req.Cmd == CmdCapture && req.Snaplen < 0 {
			if resp.Error == "" || len(rest) > 0 {
				t.Fatalf("a refused stream answered %q then %q", line, rest)
			}
			return
		}
		if resp.Error != "" {
			t.Fatalf("a request answered with error %q", resp.Error)
		}
		var got Request
		if err := json.Unmarshal(resp.Data, &got); err != nil {
			t.Fatalf("answer data: %v", err)
		}
		want, _ := json.Marshal(req)
		if again, _ := json.Marshal(got); !bytes.Equal(again, want) {
			t.Fatalf("the handler got %s, the client sent %s", again, want)
		}
		if req.Cmd == CmdCapture {
			// The end: kind 2, a length, and the JSON of CaptureEnd.
			r := bufio.NewReader(bytes.NewReader(rest))
			var head [5]byte
			if _, err := io.ReadFull(r, head[:]); err != nil || head[0] != msgEnd {
				t.Fatalf("a capture's header was not followed by its end: %q", rest)
			}
		} else if len(rest) > 0 {
			t.Fatalf("more than one answer: %q", out)
		}
	})
}

// A request longer than the server reads, or one that never ends, is cut
// off with an error that says so, while the client is still sending.
func TestRequestTooLong(t *testing.T) {
	path := fuzzServer(t)
	for _, body := range []io.Reader{
		strings.NewReader(`{"cmd":"show","bridge":"` + strings.Repeat("b", maxRequest) + `"}`),
		endless{}, // spaces, forever
	} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		go func() { _, _ = io.Copy(c, body) }()
		var resp Response
		err = json.NewDecoder(c).Decode(&resp)
		c.Close()
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		if want := "bad request: longer than 65536 bytes"; !strings.HasPrefix(resp.Error, want) {
			t.Errorf("answer %q, want it to start %q", resp.Error, want)
		}
	}
}

type endless struct{}

func (endless) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = ' '
	}
	return len(b), nil
}
