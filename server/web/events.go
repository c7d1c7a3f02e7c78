package web

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/capturedev/capture/store"
)

// liveRow is one new capture, rendered as the list row to insert.
type liveRow struct {
	id   string
	html []byte
}

// fetchRows reads one page of a collection (newest first) as rows, with
// the store's next cursor.
type fetchRows func(ctx context.Context, pg store.Page) ([]liveRow, string, error)

const (
	// keepAlive is how often an idle stream sends a comment, so that
	// proxies and browsers do not take it for dead.
	keepAlive = 25 * time.Second
	// streamWriteTimeout bounds each write to a reader that stopped reading.
	streamWriteTimeout = 30 * time.Second
)

// stream sends a list page the captures committed to the collection after
// the page's newest row, as server-sent events, until the browser leaves
// or the server shuts down. It follows the store's rule for waiting: take
// the notifier's channel, then read, then wait on the channel, so that no
// commit between the read and the wait is missed, and nothing polls.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, collection string, fetch fetchRows) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	// A reconnecting EventSource says where it got to.
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("after")
	}
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte("retry: 1000\n\n")) {
		return
	}
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		changed := h.store.Watch(collection)
		for {
			pg := store.Page{Limit: store.MaxLimit, After: cursor}
			rows, next, err := fetch(ctx, pg)
			if errors.Is(err, store.ErrInvalidCursor) {
				// The row the page continues from was deleted: the page
				// reloads to start again from what exists.
				write([]byte("event: reload\ndata: \n\n"))
				return
			}
			if err != nil {
				if ctx.Err() == nil {
					h.log.Error("web: live list", "collection", collection, "err", err)
				}
				return
			}
			var buf bytes.Buffer
			// Oldest first, so that inserting each at the top leaves the
			// newest on top.
			for i := len(rows) - 1; i >= 0; i-- {
				writeEvent(&buf, rows[i].id, "row", rows[i].html)
			}
			if len(rows) > 0 {
				cursor = rows[0].id
				if !write(buf.Bytes()) {
					return
				}
			}
			// Without a cursor the store's next points at older captures,
			// which the page already has.
			if pg.After == "" || next == "" {
				break
			}
		}
	wait:
		for {
			select {
			case <-changed:
				break wait
			case <-ctx.Done():
				return
			case <-ping.C:
				if !write([]byte(": ping\n\n")) {
					return
				}
			}
		}
	}
}

// renderRows renders a page of captures as list rows with the page's own
// row template.
func renderRows[T any](t *template.Template, name string, items []T, id func(T) string, view func(T) any) ([]liveRow, error) {
	rows := make([]liveRow, len(items))
	for i, it := range items {
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, name, view(it)); err != nil {
			return nil, err
		}
		rows[i] = liveRow{id: id(it), html: buf.Bytes()}
	}
	return rows, nil
}

// writeEvent writes one server-sent event; each line of data becomes a
// data field, which the browser joins back with line breaks.
func writeEvent(buf *bytes.Buffer, id, event string, data []byte) {
	buf.WriteString("id: " + id + "\nevent: " + event + "\n")
	for _, line := range bytes.Split(data, []byte("\n")) {
		buf.WriteString("data: ")
		buf.Write(bytes.TrimSuffix(line, []byte("\r")))
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
}
