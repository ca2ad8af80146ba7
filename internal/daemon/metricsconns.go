package daemon

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit holds the metrics endpoint to max connections, as
// netutil.LimitListener did, but without letting idle ones lock scrapes
// out: a connection that arrives at the limit takes the place of the one
// idle longest (connected without a request yet, or kept alive between
// requests), which is closed. Only when every connection is busy with a
// request is the newcomer closed at once. 50 clients that connect and
// say nothing would otherwise hold every slot until their read timeout,
// and a scrape would wait that long.
type connLimit struct {
	net.Listener
	max   int
	mu    sync.Mutex
	conns map[net.Conn]*connIdle
}

type connIdle struct {
	idle  bool
	since time.Time
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{Listener: ln, max: max, conns: map[net.Conn]*connIdle{}}
}

// Accept hands the server each new connection, making room for it first.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim net.Conn
		if len(l.conns) >= l.max {
			var oldest time.Time
			for oc, st := range l.conns {
				if st.idle && (victim == nil || st.since.Before(oldest)) {
					victim, oldest = oc, st.since
				}
			}
			if victim == nil {
				l.mu.Unlock()
				c.Close() // every connection is serving a request
				continue
			}
			delete(l.conns, victim)
		}
		l.conns[c] = &connIdle{idle: true, since: time.Now()}
		l.mu.Unlock()
		if victim != nil {
			victim.Close()
		}
		return c, nil
	}
}

// track is the server's ConnState hook: it follows which connections are
// idle, and forgets the closed ones.
func (l *connLimit) track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	case http.StateActive:
		if st := l.conns[c]; st != nil {
			st.idle = false
		}
	case http.StateIdle:
		if st := l.conns[c]; st != nil {
			st.idle, st.since = true, time.Now()
		}
	}
}

// open is how many connections it holds.
func (l *connLimit) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
