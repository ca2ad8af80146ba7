package ctl

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Streams: a request whose answer goes on until one side ends it
// (`trestle capture`, `trestle events --follow`). The daemon answers the request as any other, with
// one JSON Response, its Data a header; then messages follow, each a kind
// byte, a 4-byte big-endian length and that many bytes: records (a
// capture's frames, binary; events, JSON), and one end (JSON). The client says it has had enough by closing its side of the
// connection (CloseWrite); the daemon then ends the stream with the end
// message and closes it. A client that goes away ends the stream too.

// StreamHandler serves one stream request. An error returned before the
// header was sent is the request's answer.
type StreamHandler func(ctx context.Context, req Request, s *Stream) error

// HandleStream serves requests of cmd with h; call it before Serve.
func (s *Server) HandleStream(cmd string, h StreamHandler) {
	if s.streams == nil {
		s.streams = map[string]StreamHandler{}
	}
	s.streams[cmd] = h
}

// CaptureHeader is the daemon's answer to a capture request.
type CaptureHeader struct {
	Bridge  string `json:"bridge"`
	Port    string `json:"port"`
	Mode    string `json:"mode"` // the port's attach mode
	Snaplen int    `json:"snaplen"`
	// Ports names the ports records may name as egress, by ifindex.
	Ports map[uint32]string `json:"ports"`
	// Reasons names the drop reasons by number; a number past them is
	// a drop in a bridge beyond a patch port whose reason a daemon of an
	// earlier release did not send.
	Reasons []string `json:"reasons"`
}

// CaptureEnd is the last message of a capture.
type CaptureEnd struct {
	Captured uint64 `json:"captured"` // records sent
	Lost     uint64 `json:"lost"`     // frames the datapath could not keep (its ring was full)
	Error    string `json:"error,omitempty"`
}

// Capture directions and verdicts, as records carry them.
const (
	CaptureIn  = 1 // what the port received from its host
	CaptureOut = 2 // what the bridge sent out of it

	VerdictForwarded = 1
	VerdictFlooded   = 2
	VerdictDropped   = 3
)

// CaptureRecord is one captured frame: its bytes as the port received or
// sent them, cut at the snap length; Len is its whole length.
type CaptureRecord struct {
	TimeNs  int64 // Unix time, nanoseconds
	Dir     uint8
	Verdict uint8
	Reason  uint8  // dropped: the reason's number (CaptureHeader.Reasons)
	Beyond  bool   // dropped in a bridge beyond a patch port
	Egress  uint32 // forwarded: the ifindex it left by (0: through patch ports)
	Len     uint32
	Data    []byte
}

const (
	msgRecord = 1
	msgEnd    = 2
	msgEvent  = 3 // events.go
	// recordHead is a record's fixed part: time, dir, verdict, reason,
	// flags (recordBeyond; a pad byte before the flag, which a daemon of an
	// earlier release sends as 0), egress, len.
	recordHead   = 8 + 4 + 4 + 4
	recordBeyond = 1
	maxMessage   = 1 << 20
	// streamWriteTimeout: a client that reads nothing for this long is gone.
	streamWriteTimeout = 10 * time.Second
)

// Stream is the daemon's side of a stream.
type Stream struct {
	c      net.Conn
	w      *bufio.Writer
	header bool
	done   chan struct{}
	buf    []byte
}

func (s *Server) stream(ctx context.Context, c net.Conn, req Request, h StreamHandler) {
	_ = c.SetDeadline(time.Time{})
	st := &Stream{c: c, w: bufio.NewWriterSize(c, 64<<10), done: make(chan struct{})}
	var once sync.Once
	go func() {
		// The client sends nothing more: anything read, or the end of
		// its side, or an error, means it is done.
		var b [1]byte
		_, _ = c.Read(b[:])
		once.Do(func() { close(st.done) })
	}()
	err := h(ctx, req, st)
	if err != nil && !st.header {
		_ = c.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_ = json.NewEncoder(c).Encode(&Response{Error: err.Error()})
	}
}

// Done is closed when the client has stopped the stream or gone away.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Header sends the answer to the request; records may follow.
func (s *Stream) Header(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b, err := json.Marshal(&Response{Data: data})
	if err != nil {
		return err
	}
	s.header = true
	_ = s.c.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return s.w.Flush()
}

func (s *Stream) message(kind byte, payload ...[]byte) error {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	var head [5]byte
	head[0] = kind
	binary.BigEndian.PutUint32(head[1:], uint32(n))
	_ = s.c.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := s.w.Write(head[:]); err != nil {
		return err
	}
	for _, p := range payload {
		if _, err := s.w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// Record sends one captured frame (buffered: Flush sends what is held).
func (s *Stream) Record(r CaptureRecord) error {
	if len(r.Data) > maxMessage-recordHead {
		r.Data = r.Data[:maxMessage-recordHead]
	}
	b := s.buf[:0]
	b = binary.BigEndian.AppendUint64(b, uint64(r.TimeNs))
	var flags byte
	if r.Beyond {
		flags |= recordBeyond
	}
	b = append(b, r.Dir, r.Verdict, r.Reason, flags)
	b = binary.BigEndian.AppendUint32(b, r.Egress)
	b = binary.BigEndian.AppendUint32(b, r.Len)
	s.buf = b
	return s.message(msgRecord, b, r.Data)
}

// Flush sends the records held.
func (s *Stream) Flush() error {
	_ = s.c.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return s.w.Flush()
}

// End sends the last message of a capture.
func (s *Stream) End(e CaptureEnd) error { return s.end(e) }

func (s *Stream) end(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := s.message(msgEnd, b); err != nil {
		return err
	}
	return s.Flush()
}

// CaptureClient is the CLI's side of a capture.
type CaptureClient struct {
	c      *net.UnixConn
	r      *bufio.Reader
	Header CaptureHeader
}

// Capture asks the daemon at path for a capture and reads its header.
func Capture(path string, req Request) (*CaptureClient, error) {
	req.Cmd = CmdCapture
	conn, r, err := openStream(path, req)
	if err != nil {
		return nil, err
	}
	c := &CaptureClient{c: conn.UnixConn, r: r}
	if err := json.Unmarshal(conn.header, &c.Header); err != nil {
		conn.Close()
		return nil, unreadable("the answer to capture")
	}
	return c, nil
}

// streamConn is the client's side of a stream, with the header's data.
type streamConn struct {
	*net.UnixConn
	header json.RawMessage
}

// openStream sends a stream request and reads the answer: an error, or the
// header that records follow.
func openStream(path string, req Request) (*streamConn, *bufio.Reader, error) {
	conn, err := dial(path, 3*time.Second)
	if err != nil {
		return nil, nil, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	const wait = 60 * time.Second
	_ = conn.SetDeadline(time.Now().Add(wait))
	if err := json.NewEncoder(conn).Encode(&req); err != nil {
		conn.Close()
		return nil, nil, answerError(req.Cmd, path, wait, err)
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		conn.Close()
		return nil, nil, answerError(req.Cmd, path, wait, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		conn.Close()
		return nil, nil, answerError(req.Cmd, path, wait, err)
	}
	if len(resp.Errors) > 0 {
		conn.Close()
		return nil, nil, resp.Errors
	}
	if resp.Error != "" {
		conn.Close()
		return nil, nil, &DaemonError{Msg: resp.Error}
	}
	_ = conn.SetDeadline(time.Time{})
	return &streamConn{UnixConn: conn, header: resp.Data}, r, nil
}

// unreadable says that what the daemon sent cannot be read: a daemon of
// another release, whose stream has changed.
func unreadable(what string) error {
	return fmt.Errorf("the daemon sent %s in a form this trestle cannot read (a daemon of another release?)", what)
}

// readMessage reads one message of a stream: its kind and its bytes.
func readMessage(r *bufio.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxMessage {
		return 0, nil, fmt.Errorf("message of %d bytes, more than %d", n, maxMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, fmt.Errorf("read a message: %s", sysText(err))
	}
	return head[0], b, nil
}

// Next reads the next message: a record, or the end (then nothing follows).
func (c *CaptureClient) Next() (*CaptureRecord, *CaptureEnd, error) {
	kind, b, err := readMessage(c.r)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, errors.New("capture: the daemon ended the stream without its end (it stopped?)")
		}
		return nil, nil, fmt.Errorf("capture: %w", err)
	}
	n := uint32(len(b))
	switch kind {
	case msgRecord:
		if n < recordHead {
			return nil, nil, fmt.Errorf("capture: record of %d bytes", n)
		}
		return &CaptureRecord{
			TimeNs: int64(binary.BigEndian.Uint64(b)), Dir: b[8], Verdict: b[9], Reason: b[10], Beyond: b[11]&recordBeyond != 0,
			Egress: binary.BigEndian.Uint32(b[12:]), Len: binary.BigEndian.Uint32(b[16:]), Data: b[recordHead:],
		}, nil, nil
	case msgEnd:
		var e CaptureEnd
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, nil, unreadable("the end of the capture")
		}
		return nil, &e, nil
	}
	return nil, nil, fmt.Errorf("capture: message of unknown kind %d", kind)
}

// Stop asks the daemon to end the capture; its end follows the records
// already on their way.
func (c *CaptureClient) Stop() error { return c.c.CloseWrite() }

// Close drops the connection (the daemon ends the capture, if it runs).
func (c *CaptureClient) Close() error { return c.c.Close() }
