package store

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The read API's limits (SPEC §5) hold per key and per project, whichever
// process serves the call: on SQLite, where one process serves, they are
// counted in memory; on PostgreSQL, in rows every replica shares.

// AllowRequest takes one request from the key's allowance of perSecond a
// second with bursts of burst, or says how long to wait for the next.
func (s *Store) AllowRequest(ctx context.Context, keyID string, perSecond, burst int) (retry time.Duration, ok bool, err error) {
	retry, ok, err = s.b.allow(ctx, keyID, perSecond, burst)
	return retry, ok, s.unavailable(err)
}

// TakeWaitSlot takes one of the project's slots concurrent waits, for at
// most hold (a process that dies holding one loses it after that); ok is
// false when all are taken. release gives it back.
func (s *Store) TakeWaitSlot(ctx context.Context, projectID string, slots int, hold time.Duration) (release func(), ok bool, err error) {
	release, ok, err = s.b.waitSlot(ctx, projectID, slots, hold)
	return release, ok, s.unavailable(err)
}

// localLimits counts the limits in this process.
type localLimits struct {
	mu       sync.Mutex
	limiters map[string]*rate.Limiter // by key id
	waits    map[string]int           // by project id
}

func (l *localLimits) allow(keyID string, perSecond, burst int) (time.Duration, bool) {
	l.mu.Lock()
	if l.limiters == nil {
		l.limiters = make(map[string]*rate.Limiter)
	}
	lim, ok := l.limiters[keyID]
	if !ok || lim.Limit() != rate.Limit(perSecond) || lim.Burst() != burst {
		lim = rate.NewLimiter(rate.Limit(perSecond), burst)
		l.limiters[keyID] = lim
	}
	l.mu.Unlock()
	now := time.Now()
	res := lim.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	if delay == 0 {
		return 0, true
	}
	res.CancelAt(now)
	return delay, false
}

func (l *localLimits) waitSlot(projectID string, slots int) (func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waits == nil {
		l.waits = make(map[string]int)
	}
	if l.waits[projectID] >= slots {
		return nil, false
	}
	l.waits[projectID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.waits[projectID]--; l.waits[projectID] <= 0 {
				delete(l.waits, projectID)
			}
		})
	}, true
}
