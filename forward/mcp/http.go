package mcp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// sessionTimeout closes sessions whose client went away without saying so.
const sessionTimeout = 30 * time.Minute

// caller is the checked key of one HTTP request.
type caller struct {
	client *apiclient.Client
	keyID  string
}

type callerKey struct{}

// HTTPHandler serves MCP over streamable HTTP for the read API at apiBase
// (…/api/v1). Every request must carry `Authorization: Bearer cap_…`; the
// key is checked with GET /me, and the session it opens reads through a
// client with that same key, so it sees that key's project only.
func HTTPHandler(apiBase string, version string) http.Handler {
	// The SDK asks for the server on every request, not once per session,
	// and building one infers every tool's schemas: keep one per key.
	var mu sync.Mutex
	servers := map[string]*mcpsdk.Server{}
	streamable := mcpsdk.NewStreamableHTTPHandler(func(r *http.Request) *mcpsdk.Server {
		c, ok := r.Context().Value(callerKey{}).(caller)
		if !ok {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		s := servers[c.keyID]
		if s == nil {
			s = New(c.client, version)
			servers[c.keyID] = s
		}
		return s
	}, &mcpsdk.StreamableHTTPOptions{SessionTimeout: sessionTimeout})

	// The SDK binds a session to the UserID of the request that opened it
	// and refuses the session's id from anyone else; the key id is that
	// user. The key itself was checked before this point.
	perKey := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, ok := r.Context().Value(callerKey{}).(caller)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.keyID}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := contract.BearerToken(r.Header.Get("Authorization"))
		if !ok {
			contract.WriteError(w, contract.Errorf(contract.CodeUnauthorized,
				"missing or malformed API key: send Authorization: Bearer cap_…"))
			return
		}
		client := apiclient.New(apiBase, key, nil)
		me, err := client.Me(r.Context())
		if err != nil {
			var ae *contract.Error
			if !errors.As(err, &ae) || ae.Code == "" {
				ae = contract.Errorf(contract.CodeInternal, "cannot check the API key: %v", err)
			}
			contract.WriteError(w, ae)
			return
		}
		ctx := context.WithValue(r.Context(), callerKey{}, caller{client: client, keyID: me.Key.ID})
		perKey.ServeHTTP(w, r.WithContext(ctx))
	})
}
