package agentcmd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// outputLine is one line read from the agent, or the end of one stream.
type outputLine struct {
	stderr bool
	text   string
	// eof marks the end of the stream; text is empty.
	eof bool
}

// readLines sends r's lines to out, splitting lines longer than maxLine, and
// then one eof line. It returns when r is exhausted, fails or is closed.
func readLines(r io.Reader, stderr bool, maxLine int, out chan<- outputLine) {
	br := bufio.NewReaderSize(r, min(maxLine, 64<<10))
	var buf []byte
	split := false // the current line has already been sent in part
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			for len(buf) >= maxLine {
				out <- outputLine{stderr: stderr, text: string(buf[:maxLine])}
				buf = append(buf[:0], buf[maxLine:]...)
				split = true
			}
			continue
		}
		if len(buf) > 0 {
			line := bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
			// A split line whose pieces ended exactly at its newline has
			// nothing left to send.
			if len(line) > 0 || !split {
				out <- outputLine{stderr: stderr, text: string(line)}
			}
			buf, split = buf[:0], false
		}
		if err != nil {
			out <- outputLine{stderr: stderr, eof: true}
			return
		}
	}
}

// tail keeps the last limit bytes written to it.
type tail struct {
	limit   int
	buf     []byte
	dropped int64
}

func newTail(limit int) *tail { return &tail{limit: limit} }

// addLine appends line and a newline.
func (t *tail) addLine(line string) {
	t.buf = append(t.buf, line...)
	t.buf = append(t.buf, '\n')
	// Compact only once the buffer is twice the limit, so that appending
	// stays amortised O(1).
	if len(t.buf) > 2*t.limit {
		drop := len(t.buf) - t.limit
		t.dropped += int64(drop)
		t.buf = append(t.buf[:0], t.buf[drop:]...)
	}
}

// String returns the kept bytes, starting on a UTF-8 boundary and marked
// when earlier output was dropped.
func (t *tail) String() string {
	b := t.buf
	dropped := t.dropped
	if len(b) > t.limit {
		dropped += int64(len(b) - t.limit)
		b = b[len(b)-t.limit:]
	}
	if dropped == 0 {
		return string(b)
	}
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
		dropped++
	}
	return fmt.Sprintf("[… %d earlier bytes omitted …]\n%s", dropped, b)
}

// byteSize is n in the largest binary unit that keeps it whole or tenths.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', -1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
