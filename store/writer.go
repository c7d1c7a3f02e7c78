package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// maxBatch bounds one group commit so a burst cannot hold the write lock
// (and every caller of the batch) for long.
const maxBatch = 512

type writeOp struct {
	fn func(*wtx) error
	// request, when set, is a captured request's row: the batch inserts
	// every such row with one multi-row statement instead of running fn.
	request *requestRow
	done    chan error
	// wake lists the collections whose waiters the commit must wake.
	wake []string
}

type writer struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	vocab *vocabulary
}

// wtx is the write transaction an operation runs in. Statements are
// prepared once on the writer connection and reused.
type wtx struct {
	ctx  context.Context
	w    *writer
	wake []string
	// bumps collects counter increments that the batch applies once per
	// collection instead of once per capture.
	bumps map[bump]int64
}

type bump struct{ table, column, id string }

func (t *wtx) stmt(query string) (*sql.Stmt, error) {
	if st, ok := t.w.stmts[query]; ok {
		return st, nil
	}
	st, err := t.w.conn.PrepareContext(t.ctx, query)
	if err != nil {
		return nil, err
	}
	t.w.stmts[query] = st
	return st, nil
}

func (t *wtx) exec(query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

func (t *wtx) queryRow(query string, args ...any) *sql.Row {
	st, err := t.stmt(query)
	if err != nil {
		// Surface the prepare error through Scan, as database/sql does.
		return t.w.conn.QueryRowContext(t.ctx, query, args...)
	}
	return st.QueryRowContext(t.ctx, args...)
}

func (t *wtx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

// maxRowsPerInsert bounds a multi-row INSERT well below SQLite's limit of
// bound parameters (32766).
const maxRowsPerInsert = 64

// insertRows inserts rows (each with one value per column) with as few
// statements as possible.
func (t *wtx) insertRows(table, columns string, rows [][]any) error {
	for len(rows) > 0 {
		n := min(len(rows), maxRowsPerInsert)
		width := len(rows[0])
		one := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
		query := "INSERT INTO " + table + " (" + columns + ") VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
		args := make([]any, 0, n*width)
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		if _, err := t.exec(query, args...); err != nil {
			return fmt.Errorf("insert into %s: %w", table, err)
		}
		rows = rows[n:]
	}
	return nil
}

// countCapture adds one to a collection's capture counter before the
// batch commits.
func (t *wtx) countCapture(table, column, id string) { t.bumps[bump{table, column, id}]++ }

// wakeAfterCommit marks a collection whose waiters the commit wakes.
func (t *wtx) wakeAfterCommit(collectionID string) { t.wake = append(t.wake, collectionID) }

// write runs fn in a write transaction, possibly together with other
// callers' operations, and returns once that transaction has committed (or
// fn failed). The caller's context only bounds queueing: once the operation
// is queued its outcome is always reported, so nothing committed is ever
// reported as failed.
func (s *Store) write(ctx context.Context, fn func(*wtx) error) error {
	return s.enqueue(ctx, &writeOp{fn: fn, done: make(chan error, 1)})
}

func (s *Store) enqueue(ctx context.Context, op *writeOp) error {
	select {
	case s.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return ErrClosed
	}
	select {
	case err := <-op.done:
		return err
	case <-s.writerDone:
		select {
		case err := <-op.done:
			return err
		default:
			return ErrClosed
		}
	}
}

func (s *Store) runWriter(w *writer) {
	defer close(s.writerDone)
	defer func() {
		for _, st := range w.stmts {
			st.Close()
		}
		w.conn.Close()
	}()
	batch := make([]*writeOp, 0, maxBatch)
	for {
		var first *writeOp
		select {
		case first = <-s.ops:
		case <-s.quit:
			// Finish what was queued before Close.
			for {
				select {
				case op := <-s.ops:
					s.commit(w, []*writeOp{op})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		// Each commit costs about as much as many inserts, so give callers
		// that are about to queue (often on the other core, or runnable
		// behind this goroutine) a moment to join the batch. Yielding costs
		// microseconds; stop as soon as a round brings nothing new.
		for round := 0; round < maxGatherRounds && len(batch) < maxBatch; round++ {
			before := len(batch)
			batch = drain(s.ops, batch)
			if round > 0 && len(batch) == before {
				break
			}
			runtime.Gosched()
		}
		batch = drain(s.ops, batch)
		s.commit(w, batch)
	}
}

const maxGatherRounds = 4

// drain appends the operations already queued, up to maxBatch.
func drain(ops <-chan *writeOp, batch []*writeOp) []*writeOp {
	for len(batch) < maxBatch {
		select {
		case op := <-ops:
			batch = append(batch, op)
		default:
			return batch
		}
	}
	return batch
}

// commit runs a batch in one transaction. When one operation fails, the
// batch is rolled back and each operation runs again alone, so one caller's
// bad input never fails another's write.
func (s *Store) commit(w *writer, batch []*writeOp) {
	ctx := context.Background()
	err := s.runTx(ctx, w, batch)
	if err == nil {
		w.vocab.committed()
		var wake []string
		for _, op := range batch {
			wake = append(wake, op.wake...)
			op.done <- nil
		}
		s.notify.notify(wake)
		return
	}
	w.vocab.forget()
	if len(batch) == 1 {
		batch[0].done <- err
		return
	}
	for _, op := range batch {
		s.commit(w, []*writeOp{op})
	}
}

func (s *Store) runTx(ctx context.Context, w *writer, batch []*writeOp) (err error) {
	t := &wtx{ctx: ctx, w: w}
	if _, err := t.exec("BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			if _, rerr := t.exec("ROLLBACK"); rerr != nil {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
			}
		}
	}()
	bumps := make(map[bump]int64)
	var rows []*requestRow
	for _, op := range batch {
		if op.request != nil {
			rows = append(rows, op.request)
			bumps[bump{"endpoints", "request_count", op.request.endpointID}]++
			op.wake = []string{op.request.endpointID}
			continue
		}
		t := &wtx{ctx: ctx, w: w, bumps: bumps}
		if err := op.fn(t); err != nil {
			return err
		}
		op.wake = t.wake
	}
	if err := t.insertRequests(rows); err != nil {
		return err
	}
	if err := t.flushTerms(); err != nil {
		return err
	}
	for b, n := range bumps {
		if _, err := t.exec(`UPDATE `+b.table+` SET `+b.column+` = `+b.column+` + ? WHERE id = ?`, n, b.id); err != nil {
			return err
		}
	}
	if _, err := t.exec("COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
