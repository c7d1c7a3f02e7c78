package capture

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capturedev/capture/store"
)

// cacheTTL bounds how long a change made by another process (the admin CLI
// setting a custom response or a plan) takes to reach the listener. Without
// the cache every capture costs two extra reads on the database.
const cacheTTL = time.Second

// endpointInfo is what a capture needs to know about its endpoint.
type endpointInfo struct {
	bodyLimit int64
	// custom is nil when the endpoint answers with the default
	// {"id":"req_…"}.
	custom *store.Response
}

type cacheEntry struct {
	info    endpointInfo
	expires time.Time
	// refreshing elects the one request that reloads an expired entry;
	// the others keep using it meanwhile instead of all hitting the
	// database at once.
	refreshing atomic.Bool
}

// endpointCache holds endpoints by id. Only endpoints that exist get an
// entry, so its size is bounded by the endpoints in the database; expired
// entries are swept now and then all the same.
type endpointCache struct {
	ttl time.Duration // 0 turns the cache off
	now func() time.Time

	entries sync.Map // endpoint id → *cacheEntry
	added   atomic.Int64
}

const sweepEvery = 1024

func (c *endpointCache) lookup(ctx context.Context, st Store, id string, now time.Time) (endpointInfo, error) {
	var stale *cacheEntry
	if c.ttl > 0 {
		if v, ok := c.entries.Load(id); ok {
			e := v.(*cacheEntry)
			if now.Before(e.expires) || !e.refreshing.CompareAndSwap(false, true) {
				return e.info, nil
			}
			stale = e
		}
	}
	info, err := loadEndpoint(ctx, st, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			c.entries.Delete(id)
		} else if stale != nil {
			stale.refreshing.Store(false)
		}
		return endpointInfo{}, err
	}
	if c.ttl > 0 {
		c.entries.Store(id, &cacheEntry{info: info, expires: now.Add(c.ttl)})
		if stale == nil && c.added.Add(1)%sweepEvery == 0 {
			c.sweep(now)
		}
	}
	return info, nil
}

func (c *endpointCache) sweep(now time.Time) {
	c.entries.Range(func(k, v any) bool {
		if !now.Before(v.(*cacheEntry).expires) {
			c.entries.CompareAndDelete(k, v)
		}
		return true
	})
}

func loadEndpoint(ctx context.Context, st Store, id string) (endpointInfo, error) {
	ep, err := st.Endpoint(ctx, "", id)
	if err != nil {
		return endpointInfo{}, err
	}
	p, err := st.Project(ctx, ep.ProjectID)
	if err != nil {
		// %v, not %w: an endpoint whose project cannot be read is a
		// fault, not a missing endpoint.
		return endpointInfo{}, fmt.Errorf("project %s of endpoint %s: %v", ep.ProjectID, id, err)
	}
	info := endpointInfo{bodyLimit: p.Plan.RequestBodyBytes}
	if !isDefault(ep.Response) {
		resp := ep.Response
		info.custom = &resp
	}
	return info, nil
}

func isDefault(r store.Response) bool {
	return r.Status == 200 && len(r.Headers) == 0 && r.Body == "" && r.Delay == 0
}
