package ctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// fdb.show is a stream (capture.go's framing): the daemon walks the table a
// chunk at a time and sends each as it goes, so that what it holds of the
// table is a chunk, whatever the table's size (issue 29). The header is an
// FDBHeader; each message of kind msgFDB is a JSON array of FDBEntry, in
// the table's own order; the end is an FDBEnd, with the count of entries
// sent or the error that cut the walk short. The client (FDB) gathers the
// chunks and sorts them, so that `trestle fdb show` prints one table and
// `--json` one document, as they did when the daemon answered whole.

// FDBHeader is the daemon's answer to fdb.show: chunks follow.
type FDBHeader struct {
	// Chunk is the most entries a chunk holds.
	Chunk int `json:"chunk"`
}

// FDBEnd is the last message of fdb.show.
type FDBEnd struct {
	Entries int    `json:"entries"` // sent, in every chunk together
	Error   string `json:"error,omitempty"`
}

// fdbMessage is the most entries one message carries: a chunk is split so
// that a message stays far below maxMessage (an entry is a few hundred
// bytes of JSON at most).
const fdbMessage = 256

const msgFDB = 4

// FDBChunk sends entries of the table (buffered: EndFDB sends what is
// held, and a full buffer goes as it fills).
func (s *Stream) FDBChunk(es []FDBEntry) error {
	for len(es) > 0 {
		n := min(len(es), fdbMessage)
		b, err := json.Marshal(es[:n])
		if err != nil {
			return err
		}
		if err := s.message(msgFDB, b); err != nil {
			return err
		}
		es = es[n:]
	}
	return nil
}

// EndFDB sends the last message of fdb.show.
func (s *Stream) EndFDB(e FDBEnd) error { return s.end(e) }

// FDB asks the daemon at path for the learning table (of bridge, or of
// every bridge: ""), and returns it whole, sorted by bridge, VLAN and MAC,
// or an error: never a part of it.
func FDB(path, bridge string) ([]FDBEntry, error) {
	return FDBOf(path, Request{Bridge: bridge})
}

// FDBOf is FDB of a request's bridge and filters: its Port and OnlyVLAN
// (`trestle fdb show BRIDGE --port P --vlan V`). The filters are applied
// here too, so that a daemon of an earlier release, which sends every
// entry, is answered as this one is.
func FDBOf(path string, req Request) ([]FDBEntry, error) {
	es, err := FDBWithin(path, req, 60*time.Second)
	if err != nil {
		return nil, err
	}
	out := es[:0]
	for _, e := range es {
		if (req.Port == "" || e.Port == req.Port) && (req.OnlyVLAN == nil || e.VLAN == *req.OnlyVLAN) {
			out = append(out, e)
		}
	}
	return out, nil
}

// FDBWithin is FDBOf, unfiltered here, that gives up after d.
func FDBWithin(path string, req Request, d time.Duration) ([]FDBEntry, error) {
	req.Cmd = CmdFDBShow
	conn, r, err := openStream(path, req)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(d))
	out := []FDBEntry{}
	for {
		kind, b, err := readMessage(r)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, errors.New("fdb show: the daemon ended the table without its end (it stopped?)")
			}
			return nil, fmt.Errorf("fdb show: %w", err)
		}
		switch kind {
		case msgFDB:
			var es []FDBEntry
			if err := json.Unmarshal(b, &es); err != nil {
				return nil, unreadable("a chunk of the table")
			}
			out = append(out, es...)
		case msgEnd:
			var e FDBEnd
			if err := json.Unmarshal(b, &e); err != nil {
				return nil, unreadable("the end of the table")
			}
			if e.Error != "" {
				return nil, &DaemonError{Msg: e.Error}
			}
			if e.Entries != len(out) {
				return nil, fmt.Errorf("fdb show: the daemon sent %d entries and counted %d", len(out), e.Entries)
			}
			SortFDB(out)
			return out, nil
		default:
			return nil, fmt.Errorf("fdb show: message of unknown kind %d", kind)
		}
	}
}

// SortFDB sorts entries as `trestle fdb show` lists them: by bridge, VLAN
// and MAC.
func SortFDB(es []FDBEntry) {
	slices.SortFunc(es, func(a, b FDBEntry) int {
		if c := strings.Compare(a.Bridge, b.Bridge); c != 0 {
			return c
		}
		if a.VLAN != b.VLAN {
			return int(a.VLAN) - int(b.VLAN)
		}
		return strings.Compare(a.MAC, b.MAC)
	})
}
