package store

import (
	"crypto/rand"
	"crypto/sha256"
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

// NewID returns an opaque public id with its type prefix: 20 base62
// characters are about 119 random bits.
func NewID(prefix string) string { return prefix + randomBase62(20) }

// Key secrets are "cap_" and 40 base62 characters (about 238 bits).
func newKeySecret() string { return "cap_" + randomBase62(40) }

// SMTP passwords are shown to users and pasted into configs, so base62 keeps
// them free of quoting trouble; 32 characters are about 190 bits.
func newSMTPPassword() string { return randomBase62(32) }

func hashKey(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}
