package capture

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/capturedev/capture/store"
)

// endpointInfo is what a capture needs to know about its endpoint.
type endpointInfo struct {
	bodyLimit int64
	// custom is nil when the endpoint answers with the default
	// {"id":"req_…"}.
	custom *store.Response
	// version is the settings version it was read under.
	version int64
}

// endpointCache holds endpoints read under one settings version, so that
// a capture costs no read of its endpoint. Any change to an endpoint or a
// plan, by this process or an admin command, moves the version; the store
// learns of it in the capture's own write transaction, and the answer
// given after the commit uses the settings in force when the capture
// arrived (settled). Before the commit the cached settings may be one
// change behind, which matters only for a body larger than every plan
// allows (fresh).
type endpointCache struct {
	current atomic.Pointer[cacheGeneration]
}

// cacheGeneration is the endpoints read under one settings version. A new
// version starts an empty generation, which drops every stale entry at once.
type cacheGeneration struct {
	version int64
	entries sync.Map // endpoint id → endpointInfo
}

// lookup returns the endpoint as cached under the latest version the store
// has seen committed.
func (c *endpointCache) lookup(ctx context.Context, st Store, id string) (endpointInfo, error) {
	return c.under(ctx, st, id, st.SettingsSeen())
}

// fresh returns the endpoint with every change committed so far.
func (c *endpointCache) fresh(ctx context.Context, st Store, id string) (endpointInfo, error) {
	version, err := st.SettingsVersion(ctx)
	if err != nil {
		return endpointInfo{}, err
	}
	return c.under(ctx, st, id, version)
}

// settled returns info, or the endpoint read again when settings changed
// before the capture was stored.
func (c *endpointCache) settled(ctx context.Context, st Store, id string, info endpointInfo) (endpointInfo, error) {
	if v := st.SettingsSeen(); v != info.version {
		return c.under(ctx, st, id, v)
	}
	return info, nil
}

func (c *endpointCache) under(ctx context.Context, st Store, id string, version int64) (endpointInfo, error) {
	g := c.current.Load()
	if g == nil || g.version < version {
		// Several captures may see the new version at once; one
		// generation wins and the others use it.
		next := &cacheGeneration{version: version}
		if c.current.CompareAndSwap(g, next) {
			g = next
		} else {
			g = c.current.Load()
		}
	}
	if g.version == version {
		if v, ok := g.entries.Load(id); ok {
			return v.(endpointInfo), nil
		}
	}
	// Read after the version was: what is stored under it is at least as
	// new.
	info, err := loadEndpoint(ctx, st, id)
	info.version = version
	if err == nil && g.version == version {
		g.entries.Store(id, info)
	}
	return info, err
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
