package wait

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/forward/internal/capturetest"
)

// deadline bounds each test's wait; nothing here should come near it.
const deadline = 30 * time.Second

func finder(srv *capturetest.Server, pollWait time.Duration) *Finder {
	return &Finder{Client: srv.Client(), PollWait: pollWait, retryBase: 20 * time.Millisecond}
}

// A wait longer than one long-poll chains them: a capture that arrives
// after the first held poll came back empty is still found, and one that
// does not match the filters does not end the wait.
func TestChainedPolls(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	before := srv.Post(t, "POST", "/run/1/hook", nil, []byte("before the start"))
	since := time.Now()
	f := finder(srv, time.Second)
	var holds []time.Duration
	var posted []string
	f.polled = func(hold time.Duration, found int) {
		holds = append(holds, hold)
		if hold == 0 || found > 0 {
			return
		}
		// After each empty held poll: first a capture the filters
		// reject, then the one waited for.
		switch len(posted) {
		case 0:
			posted = append(posted, srv.Post(t, "POST", "/run/2/hook", nil, []byte("another run")))
		case 1:
			posted = append(posted, srv.Post(t, "POST", "/run/1/hook", nil, []byte("this run")))
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	got, err := f.NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Path: "/run/1/", Since: since})
	if err != nil {
		t.Fatalf("NextRequest: %v (polls %v)", err, holds)
	}
	if len(posted) != 2 || got.ID != posted[1] || got.ID == before {
		t.Fatalf("found %s, want %v[1]; polls %v", got.ID, posted, holds)
	}
	held := 0
	for _, h := range holds {
		if h > 0 {
			held++
		}
	}
	if held < 3 || holds[0] != 0 {
		t.Errorf("polls %v: want a first pass that does not hold, then at least three held polls", holds)
	}
}

// Several matches: the oldest one received after since, also when more
// than a page of them match.
func TestOldestMatch(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	since := time.Now().Add(-time.Minute)
	srv.Post(t, "POST", "/other", nil, nil)
	var ids []string
	for i := range 105 {
		ids = append(ids, srv.Post(t, "POST", fmt.Sprintf("/new/%d", i), nil, nil))
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	got, err := finder(srv, time.Second).NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Path: "/new/", Since: since})
	if err != nil || got.ID != ids[0] {
		t.Errorf("NextRequest = %s, %v; want the oldest, %s", got.ID, err, ids[0])
	}
}

// A cursor deleted between polls (a purge, the pruner) starts the search
// over instead of failing the wait.
func TestCursorGone(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	c := srv.Client()
	old := srv.Post(t, "POST", "/old", nil, nil)
	since := time.Now()
	f := finder(srv, time.Second)
	want := ""
	f.polled = func(hold time.Duration, found int) {
		if hold > 0 && found == 0 && want == "" {
			// The cursor is now old: delete it, then capture the match.
			if err := c.DeleteRequest(t.Context(), old); err != nil {
				t.Error(err)
			}
			want = srv.Post(t, "POST", "/new", nil, nil)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	got, err := f.NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Since: since})
	if err != nil || got.ID != want {
		t.Errorf("NextRequest = %s, %v; want %s", got.ID, err, want)
	}
}

func TestTimesOut(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	_, err := finder(srv, time.Second).NextMessage(ctx, srv.InboxID, apiclient.MessageQuery{To: "nobody@", Since: time.Now()})
	if !errors.Is(err, ErrTimedOut) || errors.Is(err, apiclient.ErrUnreachable) {
		t.Errorf("NextMessage = %v, want ErrTimedOut", err)
	}

	// An API that stops answering is retried until the deadline, which
	// then names it.
	srv.Stop(t)
	ctx, cancel = context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err = finder(srv, time.Second).NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Since: time.Now()})
	if !errors.Is(err, ErrTimedOut) || !errors.Is(err, apiclient.ErrUnreachable) {
		t.Errorf("NextRequest with the API down = %v, want ErrTimedOut naming the outage", err)
	}
}

// After starts the wait past a capture already seen: a caller that looks
// at each match in turn (a message of the right kind) moves on with it.
func TestAfter(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	since := time.Now().Add(-time.Minute)
	first := srv.Post(t, "POST", "/a/1", nil, nil)
	srv.Post(t, "POST", "/b/2", nil, nil)
	second := srv.Post(t, "POST", "/a/3", nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	f := finder(srv, time.Second)
	for _, tt := range []struct{ after, want string }{{"", first}, {first, second}} {
		got, err := f.NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Path: "/a/", Since: since, After: tt.after})
		if err != nil || got.ID != tt.want {
			t.Errorf("NextRequest after %q = %s, %v; want %s", tt.after, got.ID, err, tt.want)
		}
	}

	// Past the last match, it waits for the next one.
	var third string
	f.polled = func(hold time.Duration, found int) {
		if hold > 0 && found == 0 && third == "" {
			third = srv.Post(t, "POST", "/a/4", nil, nil)
		}
	}
	got, err := f.NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Path: "/a/", Since: since, After: second})
	if err != nil || got.ID != third {
		t.Errorf("NextRequest after the last = %s, %v; want %s", got.ID, err, third)
	}
}

// Until in the past still looks once at what is there, and holds no poll.
func TestUntilPassed(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	since := time.Now().Add(-time.Minute)
	id := srv.Post(t, "POST", "/here", nil, nil)
	f := finder(srv, time.Second)
	f.Until = time.Now()
	f.polled = func(hold time.Duration, _ int) {
		if hold > 0 {
			t.Errorf("a poll held %s after Until", hold)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	if got, err := f.NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Since: since}); err != nil || got.ID != id {
		t.Errorf("NextRequest = %s, %v; want %s at once", got.ID, err, id)
	}
	if _, err := f.NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Path: "/elsewhere", Since: since}); !errors.Is(err, ErrTimedOut) {
		t.Errorf("NextRequest without a match = %v, want ErrTimedOut", err)
	}
	if _, err := f.NextMessage(ctx, srv.InboxID, apiclient.MessageQuery{Since: since}); !errors.Is(err, ErrTimedOut) {
		t.Errorf("NextMessage on an empty inbox = %v, want ErrTimedOut", err)
	}
}

// A wait already over still looks past its cursor once.
func TestUntilPassedAfter(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	since := time.Now().Add(-time.Minute)
	first := srv.Post(t, "POST", "/a/1", nil, nil)
	second := srv.Post(t, "POST", "/a/2", nil, nil)
	f := finder(srv, time.Second)
	f.Until = time.Now().Add(-time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	if got, err := f.NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Since: since, After: first}); err != nil || got.ID != second {
		t.Errorf("NextRequest after %s = %s, %v; want %s", first, got.ID, err, second)
	}
	if _, err := f.NextRequest(ctx, srv.EndpointID, apiclient.RequestQuery{Since: since, After: second}); !errors.Is(err, ErrTimedOut) {
		t.Errorf("NextRequest after the last = %v, want ErrTimedOut", err)
	}
}

// A serve down when the next pause would pass the deadline is asked once
// more at the deadline itself: back by then, what it holds is found.
func TestLastTryAtTheDeadline(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	since := time.Now()
	srv.Stop(t)
	// The tries fail at 0 s and 2 s; the next pause, 4 s, would pass the
	// deadline. The serve comes back with a request before the try at the
	// deadline, however long its restart takes on a busy machine.
	var want string
	f := &Finder{Client: srv.Client(), PollWait: time.Second, retryBase: 2 * time.Second, Until: time.Now().Add(3 * time.Second),
		beforeLastTry: func() {
			srv.Restart(t)
			want = srv.Post(t, "POST", "/late", nil, []byte("back in time"))
		}}
	got, err := f.NextRequest(t.Context(), srv.EndpointID, apiclient.RequestQuery{Since: since})
	if want == "" {
		t.Fatal("the wait gave up before its last try")
	}
	if err != nil || got.ID != want {
		t.Errorf("NextRequest = %s, %v; want %s, found at the last try", got.ID, err, want)
	}
}
