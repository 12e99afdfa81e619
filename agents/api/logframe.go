package api

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// LogFramesContentType is the media type of the binary log encoding, which
// the runner serves when asked with format=frames. The Go client uses it;
// the JSON-lines format (format=ndjson, the default) is for people and curl.
//
// A frame is a 21-byte header — big-endian uint64 seq, int64 unix time in
// nanoseconds, one byte stream (1 stdout, 2 stderr), uint32 data length —
// followed by the data.
const LogFramesContentType = "application/x-hoist-log-frames"

// FrameHeaderSize is the size of a log frame's header in bytes.
const FrameHeaderSize = 21

// MaxFrameData bounds the data of one frame; longer frames are corrupt.
const MaxFrameData = 16 << 20

// AppendFrame appends the frame encoding of l to b.
func AppendFrame(b []byte, l LogLine) []byte {
	var h [FrameHeaderSize]byte
	binary.BigEndian.PutUint64(h[0:8], uint64(l.Seq))
	binary.BigEndian.PutUint64(h[8:16], uint64(l.Time.UnixNano()))
	h[16] = streamByte(l.Stream)
	binary.BigEndian.PutUint32(h[17:21], uint32(len(l.Data)))
	b = append(b, h[:]...)
	return append(b, l.Data...)
}

// ReadFrame reads one frame from r. It returns io.EOF at a clean end and
// io.ErrUnexpectedEOF for a truncated frame.
func ReadFrame(r *bufio.Reader) (LogLine, error) {
	var h [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return LogLine{}, err
	}
	n := binary.BigEndian.Uint32(h[17:21])
	if n > MaxFrameData {
		return LogLine{}, fmt.Errorf("log frame of %d bytes: %w", n, errCorruptFrame)
	}
	l := LogLine{
		Seq:    int64(binary.BigEndian.Uint64(h[0:8])),
		Time:   time.Unix(0, int64(binary.BigEndian.Uint64(h[8:16]))).UTC(),
		Stream: streamName(h[16]),
		Data:   make([]byte, n),
	}
	if _, err := io.ReadFull(r, l.Data); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return LogLine{}, err
	}
	return l, nil
}

var errCorruptFrame = errors.New("corrupt log frame")

func streamByte(s string) byte {
	if s == StreamStderr {
		return 2
	}
	return 1
}

func streamName(b byte) string {
	if b == 2 {
		return StreamStderr
	}
	return StreamStdout
}
