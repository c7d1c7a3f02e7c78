package api

import (
	"context"
	"sync"
	"time"
)

// settingsPoll is how often held waits look for a changed setting. A key
// revoked by an admin command in another process is announced to no one
// on SQLite, so the settings version is read: while waits are held only,
// once for all of them.
const settingsPoll = 250 * time.Millisecond

// settingsBell rings the waits held in this process when the settings
// version moves (a key revoked, a plan changed…), so that each checks its
// key again and a revoked one ends at once, giving back its wait slot,
// rather than when a capture or its timeout wakes it.
type settingsBell struct {
	version func(context.Context) (int64, error)
	every   time.Duration

	mu      sync.Mutex
	known   int64         // the version last read
	ring    chan struct{} // closed when a version other than known is read
	holders int
	stop    chan struct{} // closed when the last holder lets go
}

// hold returns a channel closed at the first change of the settings read
// after hold began, and let to call once no longer listening. The
// version is read before hold returns: a change committed before then is
// one the caller must look for itself, and any later one rings.
func (b *settingsBell) hold(ctx context.Context) (ring <-chan struct{}, let func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holders == 0 {
		v, err := b.version(ctx)
		if err != nil {
			return nil, nil, err
		}
		b.known, b.ring, b.stop = v, make(chan struct{}), make(chan struct{})
		go b.poll(b.stop)
	}
	b.holders++
	return b.ring, sync.OnceFunc(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.holders--; b.holders == 0 {
			close(b.stop)
		}
	}), nil
}

// current is the channel closed at the next change read, for a holder.
func (b *settingsBell) current() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ring
}

// poll reads the version every b.every until stop is closed.
func (b *settingsBell) poll(stop chan struct{}) {
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := b.version(ctx)
		cancel()
		if err != nil {
			// The database is out of reach: the waits find out when
			// they look, and the next tick reads again.
			continue
		}
		b.mu.Lock()
		if b.stop != stop {
			// Every holder let go while this read ran; a new poll may
			// already serve new ones.
			b.mu.Unlock()
			return
		}
		if v != b.known {
			b.known = v
			close(b.ring)
			b.ring = make(chan struct{})
		}
		b.mu.Unlock()
	}
}
