package store

import (
	"crypto/rand"
	"crypto/sha256"
	"time"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomBase62 returns n characters of base62 drawn from crypto/rand, each
// carrying log2(62) ≈ 5.95 bits; rejection sampling keeps them uniform.
func randomBase62(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+4)
	for len(out) < n {
		rand.Read(buf)
		for _, b := range buf {
			// 248 = 4*62: bytes at or above it would bias the low digits.
			if b >= 248 {
				continue
			}
			out = append(out, base62[b%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out)
}

// NewID returns an opaque public id with its type prefix: 8 base62
// characters of the creation time in milliseconds, then 16 random ones
// (about 95 bits). The time prefix makes inserts land at the right edge of
// the id index instead of at random pages, which keeps ingest fast; the
// random part keeps ids unguessable.
func NewID(prefix string) string {
	var b [24]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 7; i >= 0; i-- {
		b[i] = base62[ms%62]
		ms /= 62
	}
	copy(b[8:], randomBase62(16))
	return prefix + string(b[:])
}

// Key secrets are "cap_" and 40 base62 characters (about 238 bits).
func newKeySecret() string { return "cap_" + randomBase62(40) }

// SMTP passwords are shown to users and pasted into configs, so base62 keeps
// them free of quoting trouble; 32 characters are about 190 bits.
func newSMTPPassword() string { return randomBase62(32) }

func hashKey(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}
