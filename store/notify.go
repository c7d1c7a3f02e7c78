package store

import "sync"

// notifier wakes readers waiting for new captures in a collection. A waiter
// takes the channel before it queries, so a commit between its query and its
// select still closes the channel it holds: nothing is missed and nothing polls.
type notifier struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

func newNotifier() *notifier { return &notifier{chans: make(map[string]chan struct{})} }

func (n *notifier) watch(key string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.chans[key]
	if !ok {
		c = make(chan struct{})
		n.chans[key] = c
	}
	return c
}

func (n *notifier) notify(keys []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		if c, ok := n.chans[k]; ok {
			close(c)
			delete(n.chans, k)
		}
	}
}

// wakeAll wakes every waiter, for when commits may have gone unheard.
func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, c := range n.chans {
		close(c)
		delete(n.chans, k)
	}
}
