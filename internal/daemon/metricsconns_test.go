package daemon

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// At the limit, a new connection takes the place of the one idle
// longest; when every connection is busy it is closed itself.
func TestConnLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimit(ln, 2)
	defer l.Close()
	accept := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		done := make(chan net.Conn, 1)
		go func() {
			s, err := l.Accept()
			if err != nil {
				s = nil
			}
			done <- s
		}()
		select {
		case s := <-done:
			return s
		case <-time.After(time.Second):
			return nil
		}
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err != nil && !isTimeout(err)
	}
	a, b := accept(), accept()
	if a == nil || b == nil || l.open() != 2 {
		t.Fatalf("two connections: %v %v, open %d", a, b, l.open())
	}
	l.track(b, http.StateActive)
	c := accept() // a is idle, and the older of the idle
	if c == nil || !closed(a) || closed(b) || l.open() != 2 {
		t.Fatalf("at the limit: new %v, a closed %v, b closed %v, open %d", c, closed(a), closed(b), l.open())
	}
	l.track(c, http.StateActive)
	if d := accept(); d != nil {
		t.Fatalf("every connection busy: a fourth was handed on (%v)", d)
	}
	l.track(b, http.StateClosed)
	if l.open() != 1 {
		t.Fatalf("after a close: open %d, want 1", l.open())
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
