package apiclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// MessageRaw fetches a message byte for byte, as it was received.
func (c *Client) MessageRaw(ctx context.Context, id string) ([]byte, error) {
	b, _, err := c.getBytes(ctx, "/messages/"+url.PathEscape(id)+"/raw")
	return b, err
}

// AttachmentData fetches the bytes of one attachment of a message and the
// content type the server gives them.
func (c *Client) AttachmentData(ctx context.Context, messageID, attachmentID string) ([]byte, string, error) {
	b, h, err := c.getBytes(ctx, "/messages/"+url.PathEscape(messageID)+"/attachments/"+url.PathEscape(attachmentID))
	if err != nil {
		return nil, "", err
	}
	return b, h.Get("Content-Type"), nil
}

// getBytes is do for the routes that answer with something other than
// JSON; errors still come as the API's envelope.
func (c *Client) getBytes(ctx context.Context, path string) ([]byte, http.Header, error) {
	callCtx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(callCtx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return nil, nil, c.apiError(ctx, resp)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, c.transportError(ctx, err)
	}
	return b, resp.Header, nil
}
