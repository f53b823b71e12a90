package intents

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// NewID returns a new intent id: a UUID version 7 (RFC 9562) in its usual text
// form. Its leading 48 bits are the unix milliseconds of now, so ids sort by
// creation time, and the other 74 bits are random.
func NewID() string { return NewIDAt(time.Now().UnixMilli()) }

// NewIDAt is NewID with the time given, for callers that own a clock.
func NewIDAt(unixMs int64) string {
	var u [16]byte
	_, _ = rand.Read(u[6:]) // crypto/rand.Read never fails (Go 1.24+)
	u[0] = byte(unixMs >> 40)
	u[1] = byte(unixMs >> 32)
	u[2] = byte(unixMs >> 24)
	u[3] = byte(unixMs >> 16)
	u[4] = byte(unixMs >> 8)
	u[5] = byte(unixMs)
	u[6] = (u[6] & 0x0f) | 0x70 // version 7
	u[8] = (u[8] & 0x3f) | 0x80 // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
