package mcp

import (
	"strconv"
	"strings"
	"testing"
)

// The record of ended sessions keeps the most recent maxEnded, each in a
// fixed size however long the id a caller ended.
func TestEndedSessionsKeepTheMostRecent(t *testing.T) {
	e := &endedSessions{ids: map[sessionDigest]bool{}}
	long := strings.Repeat("x", 60<<10)
	e.add(long)
	for i := range maxEnded {
		e.add("s" + strconv.Itoa(i))
	}
	if e.has(long) {
		t.Error("the oldest id is still held after maxEnded more")
	}
	if !e.has("s0") || !e.has("s"+strconv.Itoa(maxEnded-1)) {
		t.Error("a recent id is not held")
	}
	e.add("s1") // already held: nothing moves
	e.add("new")
	if e.has("s0") || !e.has("s1") || !e.has("new") || len(e.ids) != maxEnded || len(e.order) != maxEnded {
		t.Errorf("after one more: s0 %v s1 %v new %v, %d ids, %d in order", e.has("s0"), e.has("s1"), e.has("new"), len(e.ids), len(e.order))
	}
}
