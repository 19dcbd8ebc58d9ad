package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// stampedReader records when the last Read from the network returned data.
// bufio only reads more when it needs bytes to finish a line, so the last
// byte of a line always arrived in the most recent Read: that instant is the
// line's arrival time, taken before any parsing.
type stampedReader struct {
	r      io.Reader
	lastAt time.Time
}

func (s *stampedReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.lastAt = time.Now()
	}
	return n, err
}

// event is one SSE event's data payload and the arrival of its last data line.
type event struct {
	data []byte
	at   time.Time
	done bool // the data was [DONE]
}

// sseReader splits a response body into data events. It follows the SSE
// rules the OpenAI-style servers use (data lines; blank line ends an event;
// ':' comments and event:/id:/retry: fields ignored) and tolerates servers
// that omit the blank line: a new data line after a complete JSON payload
// ends the previous event.
type sseReader struct {
	stamp   *stampedReader
	br      *bufio.Reader
	long    []byte // assembles a line longer than the bufio buffer
	pending []byte // data of the event being assembled
	spare   []byte // the previous event's data, reused once the caller is done with it
	at      time.Time
	hasData bool
}

const readBufferSize = 64 << 10

// sseReaders recycles readers across requests: a fresh 64 KiB read buffer
// per request was most of the client's garbage (87 KB per 32-token request,
// BenchmarkDo), and every GC cycle it caused competed with the dispatcher
// and the stream readers on a 2-core machine.
var sseReaders = sync.Pool{New: func() any {
	s := &stampedReader{}
	return &sseReader{stamp: s, br: bufio.NewReaderSize(s, readBufferSize)}
}}

// maxPooledBuffer bounds the event buffers a pooled reader keeps (a stream
// with huge events should not pin its buffers for the next request).
const maxPooledBuffer = 1 << 20

// newSSEReader returns a reader of r; release it when done with its events.
func newSSEReader(r io.Reader) *sseReader {
	s := sseReaders.Get().(*sseReader)
	s.stamp.r = r
	s.br.Reset(s.stamp)
	return s
}

// release returns s to the pool; neither s nor any event it returned may be
// used afterwards.
func (s *sseReader) release() {
	s.stamp.r, s.stamp.lastAt = nil, time.Time{}
	s.br.Reset(nil)
	s.at, s.hasData = time.Time{}, false
	s.pending, s.spare = s.pending[:0], s.spare[:0]
	if cap(s.pending) > maxPooledBuffer || cap(s.spare) > maxPooledBuffer {
		s.pending, s.spare = nil, nil
	}
	s.long = nil
	sseReaders.Put(s)
}

// next returns the next event (its data valid until the following call), or io.EOF when the body ended cleanly between
// events, or the read error.
func (s *sseReader) next() (event, error) {
	for {
		line, at, err := s.readLine()
		if err != nil {
			if s.hasData && errors.Is(err, io.EOF) {
				// Body ended without the closing blank line.
				return s.flush(), nil
			}
			return event{}, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if s.hasData {
				return s.flush(), nil
			}
			continue
		}
		if line[0] == ':' {
			continue // comment / keep-alive
		}
		data, ok := fieldValue(line, "data")
		if !ok {
			continue // event:, id:, retry: or an unknown field
		}
		if s.hasData && (bytes.Equal(s.pending, doneMarker) || gjson.ValidBytes(s.pending)) {
			// The previous event was complete but no blank line came.
			ev := s.flush()
			s.add(data, at)
			return ev, nil
		}
		s.add(data, at)
		if bytes.Equal(s.pending, doneMarker) {
			return s.flush(), nil
		}
	}
}

var doneMarker = []byte("[DONE]")

func (s *sseReader) add(data []byte, at time.Time) {
	if s.hasData {
		s.pending = append(s.pending, '\n')
	}
	s.pending = append(s.pending, data...)
	s.at = at
	s.hasData = true
}

// flush ends the event being assembled. Its data stays valid until the
// next call to next (two buffers swap, so reading the line after an event
// does not overwrite the event).
func (s *sseReader) flush() event {
	ev := event{data: s.pending, at: s.at}
	ev.done = bytes.Equal(bytes.TrimSpace(ev.data), doneMarker)
	s.pending, s.spare = s.spare[:0], s.pending
	s.hasData = false
	return ev
}

// readLine returns one line including its '\n' (absent at EOF) and the time
// its last byte arrived. The slice is valid until the next call.
func (s *sseReader) readLine() ([]byte, time.Time, error) {
	line, err := s.br.ReadSlice('\n')
	if err == nil {
		return line, s.stamp.lastAt, nil
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than 64 KiB (e.g. logprobs): keep reading.
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.br.ReadSlice('\n')
			s.long = append(s.long, line...)
		}
		if err == nil || (errors.Is(err, io.EOF) && len(s.long) > 0) {
			return s.long, s.stamp.lastAt, nil
		}
		return nil, time.Time{}, err
	}
	if errors.Is(err, io.EOF) && len(line) > 0 {
		return line, s.stamp.lastAt, nil // last line without '\n'
	}
	return nil, time.Time{}, err
}

// fieldValue parses "name: value" / "name:value"; one leading space of the
// value is dropped, as the SSE spec says.
func fieldValue(line []byte, name string) ([]byte, bool) {
	if !bytes.HasPrefix(line, []byte(name)) {
		return nil, false
	}
	rest := line[len(name):]
	if len(rest) == 0 {
		return rest, true
	}
	if rest[0] != ':' {
		return nil, false
	}
	rest = rest[1:]
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	return rest, true
}
