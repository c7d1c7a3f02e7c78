package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
)

// settingsWatch tracks settings_version, which triggers bump on every
// change to a project's plan, a key, an inbox or an endpoint, so that
// listeners may cache settings and still see every change at once.
//
// Two ways keep it current. The writer, in each of its transactions, asks
// PRAGMA data_version, which on its own connection changes only when
// another connection (an admin command) has committed since; then, or when
// the batch itself may have changed a setting, it reads the version and
// publishes it after the commit (Seen). That costs the transaction a
// pragma and captures nothing. A caller that must see changes made this
// very moment (Check) asks a connection of its own, whose data_version
// moves with every commit, the writer's included.
type settingsWatch struct {
	seen atomic.Int64 // the newest version known to be committed

	// Used by the writer goroutine only.
	writerKnown bool
	writerData  int64

	db          *sql.DB
	conn        *sql.Conn
	mu          sync.Mutex
	dataVersion *sql.Stmt
	readVersion *sql.Stmt
	known       bool
	lastData    int64
}

const settingsVersionQuery = `SELECT version FROM settings_version`

func newSettingsWatch(ctx context.Context, path string) (*settingsWatch, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?"+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	w := &settingsWatch{db: db, conn: conn}
	if w.dataVersion, err = conn.PrepareContext(ctx, `PRAGMA data_version`); err == nil {
		w.readVersion, err = conn.PrepareContext(ctx, settingsVersionQuery)
	}
	if err == nil {
		_, err = w.check(ctx)
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *settingsWatch) close() error {
	for _, st := range []*sql.Stmt{w.dataVersion, w.readVersion} {
		if st != nil {
			st.Close()
		}
	}
	w.conn.Close()
	return w.db.Close()
}

// publish records a committed version; versions only grow.
func (w *settingsWatch) publish(v int64) {
	for {
		old := w.seen.Load()
		if v <= old || w.seen.CompareAndSwap(old, v) {
			return
		}
	}
}

// check reads the version now, the table only when something was
// committed since the last check.
func (w *settingsWatch) check(ctx context.Context) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var data int64
	if err := w.dataVersion.QueryRowContext(ctx).Scan(&data); err != nil {
		return 0, fmt.Errorf("settings version: %w", err)
	}
	if !w.known || data != w.lastData {
		// Read after data_version: a commit between the two shows up as
		// a change on the next check, never as a missed one.
		var v int64
		if err := w.readVersion.QueryRowContext(ctx).Scan(&v); err != nil {
			return 0, fmt.Errorf("settings version: %w", err)
		}
		w.known, w.lastData = true, data
		w.publish(v)
	}
	return w.seen.Load(), nil
}

// SettingsVersion returns a number that changes whenever a project's
// plan, a key, an inbox or an endpoint is created, changed or deleted, by
// this process or any other sharing the database, read now: every change
// committed before the call is counted. It costs a query.
func (s *Store) SettingsVersion(ctx context.Context) (int64, error) {
	return s.settings.check(ctx)
}

// SettingsSeen is the settings version as of this store's latest write
// transaction, and costs nothing. Once a write (a capture) has returned,
// it counts every change committed, by anyone, before that write was made:
// a listener that checks its cached settings against it after storing a
// capture answers with the settings in force when the capture arrived.
func (s *Store) SettingsSeen() int64 { return s.settings.seen.Load() }

// changedElsewhere is the writer's part: called right after BEGIN, it says
// whether another connection committed since the writer last looked.
func (w *settingsWatch) changedElsewhere(t *wtx) (data int64, changed bool, err error) {
	if err := t.queryRow(`PRAGMA data_version`).Scan(&data); err != nil {
		return 0, false, err
	}
	return data, !w.writerKnown || data != w.writerData, nil
}
