package teamnotify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a webhook request's signature:
//
//	X-Foreman-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
//
// The HMAC is of "<t>.<body>" with the shared secret: the timestamp is
// signed with the body, so a request replayed later is refused by a
// receiver that checks it is recent (VerifySignature).
const SignatureHeader = "X-Foreman-Signature"

// DeliveryHeader carries the notification's ID, the same on every
// attempt: a receiver drops an ID it has already handled.
const DeliveryHeader = "X-Foreman-Delivery"

// DefaultTolerance is how old a signed request VerifySignature accepts
// by default.
const DefaultTolerance = 5 * time.Minute

// ErrBadSignature is matched by VerifySignature's errors.
var ErrBadSignature = errors.New("teamnotify: bad signature")

// Sign returns the SignatureHeader value for body sent at now.
func Sign(secret, body []byte, now time.Time) string {
	ts := strconv.FormatInt(now.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// VerifySignature checks a SignatureHeader value against the body
// received, for a receiver written in Go: the HMAC must match (compared
// in constant time) and the timestamp be within tolerance of now (0:
// DefaultTolerance), either way. Errors match ErrBadSignature.
func VerifySignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if s, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, s)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: %q is not t=<unix seconds>,v1=<hex>", ErrBadSignature, header)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now (tolerance %s): a replay or a wrong clock", ErrBadSignature,
			time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: the HMAC does not match the body (another secret, or a changed body)", ErrBadSignature)
}
