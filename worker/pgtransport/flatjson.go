package pgtransport

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// A hand-written codec for the flat JSON objects the transport writes
// (messages and assignments: strings, small integers, booleans). Every hand-off
// encodes and decodes a message and an assignment; encoding/json spent
// about a fifth of a worker host's CPU on them (reflection, and the stack
// growth of a fresh goroutine's deep calls). The encoder writes exactly
// what encoding/json writes (tested byte for byte); the decoder reads only
// what it is sure to read as encoding/json does (exact field names, plain
// strings and integers) and hands anything else to encoding/json, so the
// result is the same for any input.

// appendJSONString appends s as encoding/json writes it: a string of
// printable ASCII without '"', '\\', '<', '>' or '&' is copied, anything
// else is escaped by encoding/json itself.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string: cannot fail
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64; ok is false
// for NaN and the infinities, which it refuses.
func appendJSONFloat(dst []byte, f float64) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' { // clean up e-09 to e-9, as encoding/json does
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

// appendField appends a member's name (with the comma before it when it
// is not the first).
func appendField(dst []byte, name string) []byte {
	if dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// flatValue is one member's value in a flat object: a string (str), an
// integer (num) or a boolean (bit).
type flatValue struct {
	kind byte // 's', 'n' or 'b'
	str  string
	num  int64
	bit  bool
}

// scanFlat reads a JSON object whose members are plain strings, integers
// and booleans, calling set for each; it returns false, having stopped,
// at anything else (nested values, null, fractions, \u escapes, invalid
// UTF-8, a member set refuses, trailing data), and the caller then reads
// the input with encoding/json instead. The keys and the values of
// strings without escapes are substrings of b: a decoded body costs one
// allocation (the string it was read into), not one per member.
func scanFlat(b string, set func(key string, v flatValue) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		key, next, ok := scanString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return false
		}
		var v flatValue
		switch c := b[i]; {
		case c == '"':
			v.kind = 's'
			v.str, i, ok = scanString(b, i)
		case c == '-' || (c >= '0' && c <= '9'):
			v.kind = 'n'
			v.num, i, ok = scanInt(b, i)
		case hasWord(b, i, "true"):
			v.kind, v.bit, i, ok = 'b', true, i+4, true
		case hasWord(b, i, "false"):
			v.kind, i, ok = 'b', i+5, true
		default:
			return false
		}
		if !ok || !set(key, v) {
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipSpace(b string, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasWord(b string, i int, w string) bool {
	return len(b)-i >= len(w) && b[i:i+len(w)] == w
}

// scanString reads the string starting at b[i] (a '"'); it handles the
// one-letter escapes and valid UTF-8 and refuses \u escapes and control
// characters.
func scanString(b string, i int) (string, int, bool) {
	start := i + 1
	ascii := true
	j := start
	for ; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			break
		}
		if c == '\\' {
			return scanEscaped(b, start)
		}
		if c < 0x20 {
			return "", 0, false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if j >= len(b) {
		return "", 0, false
	}
	s := b[start:j]
	if !ascii && !utf8.ValidString(s) {
		return "", 0, false
	}
	return s, j + 1, true
}

// scanEscaped reads a string with escapes, from its first byte at b[start].
func scanEscaped(b string, start int) (string, int, bool) {
	out := make([]byte, 0, 64)
	for j := start; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", 0, false
			}
			return string(out), j + 1, true
		case c < 0x20:
			return "", 0, false
		case c != '\\':
			out = append(out, c)
			continue
		}
		if j++; j >= len(b) {
			return "", 0, false
		}
		switch b[j] {
		case '"', '\\', '/':
			out = append(out, b[j])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default: // \u, and anything invalid
			return "", 0, false
		}
	}
	return "", 0, false
}

// scanInt reads an integer of at most 18 digits (no fraction, no
// exponent, no leading zero).
func scanInt(b string, i int) (int64, int, bool) {
	neg := b[i] == '-'
	if neg {
		i++
	}
	start := i
	var n int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	digits := i - start
	if digits == 0 || digits > 18 || (digits > 1 && b[start] == '0') {
		return 0, 0, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, 0, false
	}
	if neg {
		if n == 0 {
			// "-0": encoding/json takes it for a signed field and refuses
			// it for an unsigned one; it decides (a fuzzed input).
			return 0, 0, false
		}
		n = -n
	}
	return n, i, true
}

// decodeIDs reads a JSON array of strings, as encoding/json reads it into
// a []string: a notification's ids (one a hand-off at full tilt, where
// encoding/json's reflection cost about 1 % of the coordinator's CPU). It
// reads plain arrays of plain strings itself, as substrings of b, and
// hands anything else (null, escapes it does not read, other values, bad
// input) to encoding/json.
func decodeIDs(b string) ([]string, error) {
	if ids, ok := scanStrings(b); ok {
		return ids, nil
	}
	var ids []string
	err := json.Unmarshal([]byte(b), &ids)
	return ids, err
}

// scanStrings reads a JSON array of plain strings (see scanString).
func scanStrings(b string) ([]string, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	ids := []string{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return ids, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		s, next, ok := scanString(b, i)
		if !ok {
			return nil, false
		}
		ids = append(ids, s)
		i = skipSpace(b, next)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return ids, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}
