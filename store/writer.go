package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// maxBatch bounds one group commit so a burst cannot hold the write lock
// (and every caller of the batch) for long.
const maxBatch = 512

// commitTimeout is how long a write may wait for its commit. Past it the
// caller of a capture gets ErrUnavailable and the capture is dropped: never
// written when still queued, taken back when its commit lands later (a
// sender told "try again" must not find its capture stored twice). Other
// writes are dropped when still queued, else heard to their end.
const commitTimeout = 5 * time.Second

// The life of a writeOp. It is queued until the writer, holding the write
// lock, claims it, or until its caller stops waiting and abandons it:
// whichever comes first wins, so an abandoned operation is never written.
// A claimed one is reported to its caller once its transaction ends, or,
// a capture only, left by a caller whose deadline passed first (a disk
// that stalls the COMMIT). COMMIT is never cancelled, so a left capture may
// still land:
// the writer then takes its captures out again (takeBack), since its
// caller was told to try again and must not find it stored twice.
const (
	opQueued int32 = iota
	opClaimed
	opAbandoned
	opReported
	opLeft
)

type writeOp struct {
	fn func(*wtx) error
	// request, when set, is a captured request's row: the batch inserts
	// every such row with one multi-row statement instead of running fn.
	request *requestRow
	done    chan error
	state   atomic.Int32
	// wake lists the collections whose waiters the commit of fn must
	// wake (a request wakes its endpoint's).
	wake []string
	// queued is when the operation was handed to the writer; capture and
	// collections say what it stores: a message into each inbox of
	// collections when capture is EmailCapture (request says its own).
	// ids are the ids of the captures it stores, one per collection (the
	// request's alone), for taking them out again when its caller left.
	queued      time.Time
	capture     CaptureKind
	collections []string
	ids         []string
}

// claim takes the operation for the transaction about to write it; false
// means its caller gave up on it.
func (op *writeOp) claim() bool {
	return op.state.CompareAndSwap(opQueued, opClaimed) || op.state.Load() == opClaimed
}

// leave is its caller giving up on the operation at its deadline. False
// means the caller must wait for the outcome: the writer is reporting it
// already, or the operation is claimed and is not a capture. Only a
// capture can be taken back (takeBackLeft) should its commit land after
// all; any other write (an inbox created, a purge) is heard to its end,
// so that nothing committed is reported as failed.
func (op *writeOp) leave() bool {
	if op.state.CompareAndSwap(opQueued, opAbandoned) {
		// The writer never reads an abandoned operation again; let what
		// it holds (a request body, a message) go now rather than when
		// the queue reaches it.
		op.fn, op.request = nil, nil
		return true
	}
	return op.isCapture() && op.state.CompareAndSwap(opClaimed, opLeft)
}

// isCapture says whether op stores captures that takeBackLeft can remove.
func (op *writeOp) isCapture() bool { return op.request != nil || op.capture == EmailCapture }

// settle decides, for the writer, that the operation's caller hears its
// outcome; false means the caller left.
func (op *writeOp) settle() bool { return op.state.CompareAndSwap(opClaimed, opReported) }

// stored lists the captures op writes: its request, or its messages.
func (op *writeOp) stored() []storedCapture {
	switch {
	case op.request != nil && len(op.ids) == 1:
		return []storedCapture{{requestsTable, op.request.endpointID, op.ids[0]}}
	case op.capture == EmailCapture && len(op.ids) == len(op.collections):
		out := make([]storedCapture, len(op.ids))
		for i, id := range op.ids {
			out[i] = storedCapture{messagesTable, op.collections[i], id}
		}
		return out
	}
	return nil
}

// storedCapture is one capture in its collection.
type storedCapture struct {
	table          captureTable
	collection, id string
}

type writer struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	vocab *vocabulary
	// takeBack holds the captures committed after their callers left,
	// until a transaction has deleted them.
	takeBack []storedCapture
}

// prepareControl prepares the statements that begin and end transactions
// while none is open: PostgreSQL refuses to prepare anything, ROLLBACK
// included, inside a transaction that failed, though it runs a ROLLBACK
// prepared before.
func (w *writer) prepareControl(ctx context.Context, b backend) error {
	for _, q := range []string{b.begin(), "COMMIT", "ROLLBACK"} {
		st, err := w.conn.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		w.stmts[q] = st
	}
	return nil
}

// renew replaces a connection that broke (PostgreSQL restarted, the
// network dropped) with a new one from the store's writer pool; a working
// one is kept.
func (w *writer) renew(s *Store) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if w.conn.PingContext(ctx) == nil {
		return
	}
	// The read pool's idle connections broke with this one: were they
	// kept, reads would fail after commits (and /readyz) work again.
	s.dropIdleReads()
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return
	}
	w.closeStmts()
	w.conn.Close()
	w.conn = conn
	w.prepareControl(ctx, s.b)
}

// dropIdleReads closes the read pool's idle connections, once the server
// they lead to has gone away (restarted, out of reach). pgx checks only
// those idle for over a second before handing them out, so each would
// otherwise fail one more read.
func (s *Store) dropIdleReads() {
	s.rdb.SetMaxIdleConns(0)
	s.rdb.SetMaxIdleConns(readIdleConns)
}

func (w *writer) closeStmts() {
	for q, st := range w.stmts {
		st.Close()
		delete(w.stmts, q)
	}
}

// wtx is the write transaction an operation runs in. Statements are
// prepared once on the writer connection and reused.
type wtx struct {
	ctx  context.Context
	w    *writer
	b    backend
	wake []string
}

func (t *wtx) stmt(query string) (*sql.Stmt, error) {
	if st, ok := t.w.stmts[query]; ok {
		return st, nil
	}
	st, err := t.w.conn.PrepareContext(t.ctx, t.b.rebind(query))
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
	return st.ExecContext(t.ctx, t.b.args(args)...)
}

func (t *wtx) queryRow(query string, args ...any) scanner {
	st, err := t.stmt(query)
	if err != nil {
		// Not run again unprepared: on PostgreSQL the failed prepare has
		// aborted the transaction, which would hide why.
		return errRow{err}
	}
	return st.QueryRowContext(t.ctx, t.b.args(args)...)
}

// scanner is a row to scan: a *sql.Row, or the error that kept it from
// being read.
type scanner interface{ Scan(dest ...any) error }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (t *wtx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, t.b.args(args)...)
}

// maxRowsPerInsert bounds a multi-row INSERT well below SQLite's limit of
// bound parameters (32766).
const maxRowsPerInsert = 64

// maxBytesPerInsert bounds the values one INSERT binds: the driver copies
// every bound string and blob into SQLite's memory for the statement's
// life, so a batch of large webhook bodies goes one row per statement
// rather than all at once.
const maxBytesPerInsert = 1 << 20

// insertRows inserts rows (each with one value per column) with as few
// statements as possible.
func (t *wtx) insertRows(table, columns string, rows [][]any) error {
	for len(rows) > 0 {
		n, size := 0, 0
		for n < min(len(rows), maxRowsPerInsert) {
			b := rowBytes(rows[n])
			if n > 0 && size+b > maxBytesPerInsert {
				break
			}
			size += b
			n++
		}
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

// rowBytes is what binding a row copies: its strings and blobs.
func rowBytes(row []any) int {
	n := 0
	for _, v := range row {
		switch v := v.(type) {
		case []byte:
			n += len(v)
		case string:
			n += len(v)
		}
	}
	return n
}

// lock holds name until the transaction ends, against other processes'
// transactions that take it (see backend.lockTx).
func (t *wtx) lock(name string) error { return t.b.lockTx(t, name) }

// wakeAfterCommit marks a collection whose waiters the commit wakes.
func (t *wtx) wakeAfterCommit(collectionID string) { t.wake = append(t.wake, collectionID) }

// write runs fn in a write transaction, possibly together with other
// callers' operations, and returns once that transaction has committed (or
// fn failed). The caller's context only bounds queueing. An operation the
// writer has not claimed within commitTimeout is dropped and reported as
// ErrUnavailable; one it has claimed is heard to its end (only captures
// are refused then, and taken back: see leave).
func (s *Store) write(ctx context.Context, fn func(*wtx) error) error {
	return s.enqueue(ctx, &writeOp{fn: fn, done: make(chan error, 1)})
}

// errNoCommit is what a caller hears when the writer could not reach its
// operation in time.
var errNoCommit = fmt.Errorf("%w: %s", ErrUnavailable, noCommit)

// noCommit is errNoCommit's reason, as Why gives it.
var noCommit = fmt.Sprintf("nothing committed within %s (the database is locked by another process, or the disk stalled)", commitTimeout)

// errNoAnswer is errNoCommit on PostgreSQL, whose causes differ: no disk
// of this process stalls there, but the server can stop answering (it
// hangs, or a network partition hides it), and another process (a
// replica, an administration command) can hold a row the write waits for.
var errNoAnswer = fmt.Errorf("%w: %s", ErrUnavailable, noAnswer)

// noAnswer is errNoAnswer's reason, as Why gives it.
var noAnswer = fmt.Sprintf("nothing committed within %s (the database did not answer in time, or is locked by another process)", commitTimeout)

// noCommitErr is what a caller hears when nothing committed in time: the
// error whose reason names this database's causes.
func (s *Store) noCommitErr() error {
	if s.Shared() {
		return errNoAnswer
	}
	return errNoCommit
}

func (s *Store) enqueue(ctx context.Context, op *writeOp) error {
	op.queued = time.Now()
	deadline := time.NewTimer(commitTimeout)
	defer deadline.Stop()
	select {
	case s.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return ErrClosed
	case <-deadline.C:
		return s.noCommitErr()
	}
	select {
	case err := <-op.done:
		return err
	case <-deadline.C:
		if op.leave() {
			return s.noCommitErr()
		}
		// The writer has settled it and is sending its outcome now, or
		// it is not a capture and is heard to its end.
		return s.outcome(op)
	case <-s.writerDone:
		return s.outcome(op)
	}
}

// outcome waits for a queued operation's result, or ErrClosed when the
// writer stopped without reaching it.
func (s *Store) outcome(op *writeOp) error {
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
		w.closeStmts()
		w.conn.Close()
	}()
	batch := make([]*writeOp, 0, maxBatch)
	for {
		var first *writeOp
		select {
		case first = <-s.ops:
		case <-s.quit:
			// Finish what was queued before Close, in one transaction:
			// one at a time, each would wait out the busy timeout again
			// while another process holds the lock. Those whose callers
			// gave up are not begun for.
			var rest []*writeOp
			for op := range drainAll(s.ops) {
				if op.state.Load() != opAbandoned {
					rest = append(rest, op)
				}
			}
			if rest = s.refuseWhileFull(rest); len(rest) > 0 {
				s.commit(w, rest)
			}
			s.takeBackLeft(w)
			return
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
		if batch = s.refuseWhileFull(batch); len(batch) > 0 {
			s.commit(w, batch)
		}
		s.takeBackLeft(w)
	}
}

// reserveReleases is how many times the room kept for deletions was
// given back (0 on PostgreSQL).
func (s *Store) reserveReleases() int64 {
	if b, ok := s.b.(*sqliteDB); ok {
		return b.reserve.releases()
	}
	return 0
}

// refuseWhileFull answers the captures of batch with errRoomKept while the
// disk is full (reserve.go) and returns the rest: deletions, and every
// other write, which are small, go through on the room kept for them.
func (s *Store) refuseWhileFull(batch []*writeOp) []*writeOp {
	b, ok := s.b.(*sqliteDB)
	if !ok || b.reserve.room() {
		return batch
	}
	rest := batch[:0]
	for _, op := range batch {
		if !op.isCapture() {
			rest = append(rest, op)
		} else if op.claim() && op.settle() {
			op.done <- errRoomKept
		}
	}
	return rest
}

const maxGatherRounds = 4

// drainAll yields the operations queued now, until the queue is empty.
func drainAll(ops <-chan *writeOp) iter.Seq[*writeOp] {
	return func(yield func(*writeOp) bool) {
		for {
			select {
			case op := <-ops:
				if !yield(op) {
					return
				}
			default:
				return
			}
		}
	}
}

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
// bad input never fails another's write. When the database itself fails
// (locked past the busy timeout), every operation hears it at once.
func (s *Store) commit(w *writer, batch []*writeOp) {
	ctx := context.Background()
	released := s.reserveReleases()
	batch, err := s.runTx(ctx, w, batch)
	if err == nil && len(batch) == 0 {
		// Every caller gave up on its operation: the transaction was
		// rolled back, and no commit is counted or observed.
		return
	}
	if err == nil {
		w.vocab.committed()
		// Settled before any is observed or told: a caller that left
		// before this point hears nothing more, and what the commit
		// stored for it is taken out again (takeBackLeft) rather than
		// counted or announced to this process's waiters (PostgreSQL
		// announced it to other replicas inside the transaction).
		heard := batch[:0:0]
		for _, op := range batch {
			if op.settle() {
				heard = append(heard, op)
			} else {
				w.takeBack = append(w.takeBack, op.stored()...)
			}
		}
		s.commits.Add(1)
		diskWorks()
		if len(heard) == 0 {
			return
		}
		// Observed before any caller hears of its commit, so that what a
		// caller does next is never counted in this batch's stead.
		s.observeCommit(heard)
		var wake []string
		for _, op := range heard {
			if op.request != nil {
				wake = append(wake, op.request.endpointID)
			} else {
				wake = append(wake, op.wake...)
			}
			op.done <- nil
		}
		s.notify.notify(wake)
		return
	}
	w.vocab.forget()
	if errors.Is(err, ErrDiskFull) && s.reserveReleases() != released {
		// This transaction found the disk full and gave back the room
		// kept for deletions: its captures hear it, the rest runs again,
		// each alone, on that room (once: a second failure is heard).
		for _, op := range batch {
			if !op.isCapture() {
				s.commit(w, []*writeOp{op})
			} else if op.settle() {
				op.done <- err
			}
		}
		return
	}
	if s.Shared() && errors.Is(err, ErrUnavailable) && errors.Is(err, context.DeadlineExceeded) {
		// The oldest operation's deadline cut the transaction short (a
		// lock held elsewhere): only those whose own time is up hear it.
		// The others were queued later and may still commit, in a
		// transaction of their own, bounded by the oldest of them.
		var later []*writeOp
		for _, op := range batch {
			if time.Since(op.queued) < commitTimeout {
				later = append(later, op)
			} else if op.settle() {
				op.done <- err
			}
		}
		w.renew(s)
		if len(later) > 0 {
			s.commit(w, later)
		}
		return
	}
	if len(batch) == 1 || errors.Is(err, ErrUnavailable) {
		if errors.Is(err, ErrUnavailable) {
			w.renew(s)
		}
		for _, op := range batch {
			if op.settle() {
				op.done <- err
			}
		}
		return
	}
	// Alone, each again: one whose caller left meanwhile is not claimed
	// (runTx), so not run.
	for _, op := range batch {
		s.commit(w, []*writeOp{op})
	}
}

// takeBackLeft deletes the captures committed after their callers left
// (told ErrUnavailable, so to try again), as DeleteRequest and
// DeleteMessage would, waking no waiter of this process. Until a
// transaction goes through, they are tried again after each batch. The
// list is kept in memory only: a crash between the two commits keeps them.
// Between the two commits a reader may see them, and on PostgreSQL the
// first commit announced them to the other replicas, whose waiters may
// hand them out.
func (s *Store) takeBackLeft(w *writer) {
	if len(w.takeBack) == 0 {
		return
	}
	undo := w.takeBack
	op := &writeOp{done: make(chan error, 1), fn: func(t *wtx) error {
		for _, c := range undo {
			if err := t.removeCapture(c.table, c.id, "= ?2", c.collection); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		return nil
	}}
	// Its own deadline (PostgreSQL's statements are bounded from queued).
	op.queued = time.Now()
	op.state.Store(opClaimed)
	if _, err := s.runTx(context.Background(), w, []*writeOp{op}); err != nil {
		w.vocab.forget()
		if errors.Is(err, ErrUnavailable) {
			w.renew(s)
			return
		}
		// Not the database's state but the delete itself failed: trying
		// again would fail again after every batch. Said, for those
		// captures stay stored though their senders were refused.
		s.log.Error("could not take back captures committed after their senders were refused", "captures", len(undo), "err", err)
		w.takeBack = nil
		return
	}
	w.vocab.committed()
	s.commits.Add(1)
	w.takeBack = nil
}

// runTx writes the operations of batch that can still be claimed in one
// transaction and returns them: those it committed, or those that hear err.
func (s *Store) runTx(ctx context.Context, w *writer, batch []*writeOp) (claimed []*writeOp, err error) {
	t := &wtx{ctx: ctx, w: w, b: s.b}
	_, err = t.control(s.b.begin())
	if err != nil && s.Shared() && IsUnavailable(err) {
		// A connection PostgreSQL dropped while it was idle (a restart)
		// fails its first statement. Nothing has begun: begin again on a
		// new one, rather than refuse the first capture after every
		// restart.
		w.renew(s)
		_, err = t.control(s.b.begin())
	}
	// Claimed only now, with the write lock held: until then a caller
	// whose deadline passed may still take its operation back.
	claimed = make([]*writeOp, 0, len(batch))
	for _, op := range batch {
		if op.claim() {
			claimed = append(claimed, op)
		}
	}
	if err != nil {
		return claimed, s.unavailable(fmt.Errorf("begin: %w", err))
	}
	// No caller waits for its commit past commitTimeout. SQLite's BEGIN
	// IMMEDIATE takes the write lock or fails within the busy timeout,
	// before anything is claimed; PostgreSQL locks row by row inside the
	// transaction, so there a statement still waiting at the oldest
	// caller's deadline is cancelled, and the batch fails as unavailable.
	// (Not on SQLite: its driver watches a cancellable context with a
	// goroutine per statement, which costs the hot path.) COMMIT itself
	// is never cancelled: one that went through must not be reported as
	// failed.
	if !s.Shared() {
		return claimed, s.writeClaimed(t, claimed)
	}
	oldest := time.Now()
	for _, op := range claimed {
		if op.queued.Before(oldest) {
			oldest = op.queued
		}
	}
	var cancel context.CancelFunc
	t.ctx, cancel = context.WithDeadline(ctx, oldest.Add(commitTimeout))
	defer cancel()
	return claimed, s.writeClaimed(t, claimed)
}

// control runs BEGIN, COMMIT or ROLLBACK, whatever the transaction's
// context says.
func (t *wtx) control(q string) (sql.Result, error) {
	st, err := t.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(context.WithoutCancel(t.ctx))
}

// unavailable marks err as ErrUnavailable when the database could not take
// the write (locked elsewhere, unreachable) rather than refused it.
func (s *Store) unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", s.noCommitErr(), err)
	}
	why, ok := s.b.unavailable(err)
	switch {
	case !ok:
		return err
	case why == ErrDiskFull.Error():
		if b, ok := s.b.(*sqliteDB); ok {
			b.reserve.exhausted()
		}
		return fmt.Errorf("%w: %w: %w", ErrUnavailable, ErrDiskFull, err)
	case why != "":
		return unavailableBecause(why, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (s *Store) writeClaimed(t *wtx, batch []*writeOp) (err error) {
	if len(batch) == 0 {
		_, err := t.control("ROLLBACK")
		return err
	}
	defer func() {
		if err != nil {
			// SQLite has already rolled back a transaction whose COMMIT
			// failed for want of disk space or an I/O error; saying that
			// ROLLBACK found none would only bury the reason.
			if _, rerr := t.control("ROLLBACK"); rerr != nil && !strings.Contains(rerr.Error(), "no transaction is active") {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
			}
			err = s.unavailable(err)
		}
	}()
	// Settings changed elsewhere since the last batch, or possibly by this
	// one (anything but a capture may; a capture never does): read the
	// version before COMMIT, publish it after.
	readSettings, err := s.b.writerBegun(t)
	if err != nil {
		return err
	}
	// The collections' counters go up first, once per collection and in
	// the order of their ids. On PostgreSQL that takes each collection's
	// row lock before any capture in it draws its seq, so that replicas
	// committing into one collection draw seqs in the order they commit:
	// a reader paging forward with after= never meets a seq lower than
	// one it has already seen appear later. Sorted, two batches never wait
	// for each other in a circle.
	bumps := make(map[counted]int64)
	var rows []*requestRow
	for _, op := range batch {
		readSettings = readSettings || (op.request == nil && op.capture == NotACapture)
		if op.request != nil {
			bumps[counted{requestsTable, op.request.endpointID}]++
			continue
		}
		// The only captures that run as fn are messages (InsertMessages),
		// one into each of collections.
		for _, c := range op.collections {
			bumps[counted{messagesTable, c}]++
		}
	}
	for _, c := range slices.SortedFunc(maps.Keys(bumps), func(a, b counted) int { return strings.Compare(a.id, b.id) }) {
		if _, err := t.exec(`UPDATE `+c.table.ownerTable+` SET `+c.table.counter+` = `+c.table.counter+` + ? WHERE id = ?`,
			bumps[c], c.id); err != nil {
			return err
		}
	}
	var wake []string
	for _, op := range batch {
		if op.request != nil {
			rows = append(rows, op.request)
			wake = append(wake, op.request.endpointID)
			continue
		}
		t := &wtx{ctx: t.ctx, w: t.w, b: t.b}
		if err := op.fn(t); err != nil {
			return err
		}
		op.wake = t.wake
		wake = append(wake, t.wake...)
	}
	if err := t.insertRequests(rows); err != nil {
		return err
	}
	if err := t.flushTerms(); err != nil {
		return err
	}
	if len(wake) > 0 {
		slices.Sort(wake)
		if err := s.b.announce(t, slices.Compact(wake)); err != nil {
			return err
		}
	}
	var version int64
	if readSettings {
		if err := t.queryRow(settingsVersionQuery).Scan(&version); err != nil {
			return err
		}
	}
	if stall := s.beforeCommit.Load(); stall != nil {
		(*stall)()
	}
	if _, err := t.control("COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if readSettings {
		s.settings.publish(version)
		s.b.writerCommitted()
	}
	return nil
}

// counted is a collection whose capture counter a batch moves.
type counted struct {
	table captureTable
	id    string
}
