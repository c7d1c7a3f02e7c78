package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/capturedev/capture/store"
)

// liveRow is one capture of a live list: the list row to insert, and its
// mark, the part of the row that changes after the capture (a request's
// last delivery).
type liveRow struct {
	id         string
	html, mark []byte
}

// liveList is what the event stream of a list page reads.
type liveList struct {
	collection string
	// rows reads one page of the collection (newest first) as rows, with
	// the store's next cursor.
	rows func(ctx context.Context, pg store.Page) ([]liveRow, string, error)
	// marks reads the marks of the newest n captures; nil for a list whose
	// rows never change.
	marks func(ctx context.Context, n int) ([]liveRow, error)
	// total reads how many captures the whole collection holds, whatever
	// the page's filters, with the words for one capture and for many.
	total     func(ctx context.Context) (int64, error)
	one, many string
}

const (
	// keepAlive is how often an idle stream sends a comment, so that
	// proxies and browsers do not take it for dead.
	keepAlive = 25 * time.Second
	// streamWriteTimeout bounds each write to a reader that stopped reading.
	streamWriteTimeout = 30 * time.Second
	// markInterval spaces the reads of the marks: each reads every row the
	// page shows, and a busy collection wakes its streams at every commit.
	markInterval = 250 * time.Millisecond
	// liveRowsKept is how many rows a live page keeps as new ones arrive
	// (the list's data-keep); the marks of older rows are not followed.
	liveRowsKept = 300
)

// stream sends a list page the captures committed to the collection after
// the page's newest row, and the changed marks of the rows it shows, as
// server-sent events, until the browser leaves, the server shuts down or
// the session ends: signed out, by a new password or by its age, here or
// on another server on the same database. A page whose session ended is
// told to reload, which takes it to the sign-in form.
// It follows the store's rule for waiting: take the notifier's channel,
// then read, then wait on the channel, so that no commit between the read
// and the wait is missed, and nothing polls.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, sess *session, l liveList) {
	ctx := r.Context()
	ended, done := h.streams.add(sess.token)
	defer done()
	expired := time.NewTimer(time.Until(sess.expires))
	defer expired.Stop()
	rc := http.NewResponseController(w)
	// A reconnecting EventSource says where it got to.
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("after")
	}
	started := false
	write := func(b []byte) bool {
		if !started {
			hd := w.Header()
			hd.Set("Content-Type", "text/event-stream")
			hd.Set("Cache-Control", "no-store")
			hd.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// send writes b while the session lives: each write, keep-alives
	// included, checks it first, so that no capture reaches a browser
	// signed out anywhere. auth has just checked it for the first.
	send := func(b []byte) bool {
		if started {
			if _, err := h.store.CheckSession(ctx, sess.token); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					write(reloadEvent)
				}
				return false
			}
		}
		return write(b)
	}
	failed := func(err error) {
		switch msg, bad := searchProblem(err); {
		case bad && !started:
			// Refused before the stream begins, so that EventSource
			// gives up instead of asking again every second.
			h.errorPage(w, r, http.StatusBadRequest, msg)
		case errors.Is(err, store.ErrInvalidCursor), errors.Is(err, store.ErrNotFound):
			// The row the page continues from was deleted, or the
			// collection was: the page reloads to start again from what
			// exists.
			send(reloadEvent)
		case ctx.Err() == nil:
			h.log.Error("web: live list", "collection", l.collection, "err", err)
		}
	}
	marks := markState{known: map[string]string{}, shown: pageLimit}
	// The total last sent: none yet, so the first read sends it, which
	// counts what arrived between the page and its stream.
	sentTotal := int64(-1)
	var marksRead time.Time
	var marksDue <-chan time.Time
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		changed := h.store.Watch(l.collection)
		var buf, rowsBuf bytes.Buffer
		if !started {
			buf.WriteString("retry: 1000\n\n")
		}
		for {
			pg := store.Page{Limit: store.MaxLimit, After: cursor}
			rows, next, err := l.rows(ctx, pg)
			if err != nil {
				failed(err)
				return
			}
			// Oldest first, so that inserting each at the top leaves the
			// newest on top.
			for i := len(rows) - 1; i >= 0; i-- {
				writeEvent(&rowsBuf, rows[i].id, "row", rows[i].html)
				marks.saw(rows[i])
			}
			if len(rows) > 0 {
				cursor = rows[0].id
			}
			// Without a cursor the store's next points at older captures,
			// which the page already has.
			if pg.After == "" || next == "" {
				break
			}
		}
		// The collection's total, read after its rows so that it counts
		// every row sent, goes before them: a page that shows a new row
		// already counts it. A filtered page learns it too, though the
		// captures that do not match send no row.
		if l.total != nil {
			n, err := l.total(ctx)
			if err != nil {
				failed(err)
				return
			}
			if n != sentTotal {
				data, err := json.Marshal(struct {
					Count string `json:"count"`
					Side  string `json:"side"`
				}{plural(n, l.one, l.many), count(n)})
				if err != nil {
					failed(err)
					return
				}
				writeEvent(&buf, "", "total", data)
				sentTotal = n
			}
		}
		buf.Write(rowsBuf.Bytes())
		if l.marks != nil && marksDue == nil {
			if wait := markInterval - time.Since(marksRead); wait > 0 {
				marksDue = time.After(wait)
			} else {
				if err := marks.read(ctx, l, &buf); err != nil {
					failed(err)
					return
				}
				marksRead = time.Now()
			}
		}
		if (buf.Len() > 0 || !started) && !send(buf.Bytes()) {
			return
		}
	wait:
		for {
			select {
			case <-changed:
				break wait
			case <-marksDue:
				marksDue = nil
				buf.Reset()
				if err := marks.read(ctx, l, &buf); err != nil {
					failed(err)
					return
				}
				marksRead = time.Now()
				if buf.Len() > 0 && !send(buf.Bytes()) {
					return
				}
			case <-ctx.Done():
				return
			case <-ended:
				write(reloadEvent)
				return
			case <-expired.C:
				write(reloadEvent)
				return
			case <-ping.C:
				if !send([]byte(": ping\n\n")) {
					return
				}
			}
		}
	}
}

// reloadEvent tells the page to load again: its list cannot go on from
// where it is, or its session ended.
var reloadEvent = []byte("event: reload\ndata: \n\n")

// markState is what a stream knows the page shows: each row's mark as
// last sent, and how many rows there are.
type markState struct {
	known map[string]string
	shown int
}

// saw notes a row sent whole.
func (m *markState) saw(row liveRow) {
	m.known[row.id] = string(row.mark)
	m.shown++
}

// read writes a "mark" event for each row whose mark is not the one the
// page has. A row the page may not have yet gets one too when it has a
// mark; the page ignores a row it lacks.
func (m *markState) read(ctx context.Context, l liveList, buf *bytes.Buffer) error {
	rows, err := l.marks(ctx, min(m.shown, liveRowsKept))
	if err != nil {
		return err
	}
	known := make(map[string]string, len(rows))
	for _, row := range rows {
		mark := string(row.mark)
		known[row.id] = mark
		if mark == m.known[row.id] {
			continue
		}
		data, err := json.Marshal(struct {
			ID   string `json:"id"`
			HTML string `json:"html"`
		}{row.id, mark})
		if err != nil {
			return err
		}
		writeEvent(buf, "", "mark", data)
	}
	m.known = known
	return nil
}

// renderRows renders a page of captures as live rows: each whole with the
// page's row template, and its mark with the mark template, each skipped
// when its name is "".
func renderRows[T any](t *template.Template, rowName, markName string, items []T, id func(T) string, view func(T) any) ([]liveRow, error) {
	rows := make([]liveRow, len(items))
	render := func(name string, v any) ([]byte, error) {
		if name == "" {
			return nil, nil
		}
		var buf bytes.Buffer
		err := t.ExecuteTemplate(&buf, name, v)
		return buf.Bytes(), err
	}
	for i, it := range items {
		v := view(it)
		html, err := render(rowName, v)
		if err != nil {
			return nil, err
		}
		mark, err := render(markName, v)
		if err != nil {
			return nil, err
		}
		rows[i] = liveRow{id: id(it), html: html, mark: mark}
	}
	return rows, nil
}

// writeEvent writes one server-sent event; each line of data becomes a
// data field, which the browser joins back with line breaks. An event
// without an id leaves the stream's last id, where a reconnecting browser
// continues from, as it was.
func writeEvent(buf *bytes.Buffer, id, event string, data []byte) {
	if id != "" {
		buf.WriteString("id: " + id + "\n")
	}
	buf.WriteString("event: " + event + "\n")
	for _, line := range bytes.Split(data, []byte("\n")) {
		buf.WriteString("data: ")
		buf.Write(bytes.TrimSuffix(line, []byte("\r")))
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
}
