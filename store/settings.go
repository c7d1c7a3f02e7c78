package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
)

// settings_version is bumped by triggers on every change to a project's
// plan, a key, an inbox or an endpoint, so that listeners may cache
// settings and still see every change at once.
//
// The writer keeps it current: in each of its transactions that may have
// been preceded by a change made elsewhere (the backend says when; on
// SQLite PRAGMA data_version tells, which costs a pragma and captures
// nothing), or that may itself change a setting, it reads the version and
// publishes it after the commit (SettingsSeen). A caller that must see
// changes made this very moment (SettingsVersion) asks the database.
const settingsVersionQuery = `SELECT version FROM settings_version`

// settingsSeen is the newest settings version known to be committed.
type settingsSeen struct{ v atomic.Int64 }

// publish records a committed version; versions only grow.
func (w *settingsSeen) publish(v int64) {
	for {
		old := w.v.Load()
		if v <= old || w.v.CompareAndSwap(old, v) {
			return
		}
	}
}

// SettingsVersion returns a number that changes whenever a project's
// plan, a key, an inbox or an endpoint is created, changed or deleted, by
// this process or any other sharing the database, read now: every change
// committed before the call is counted. It costs a query.
func (s *Store) SettingsVersion(ctx context.Context) (int64, error) {
	v, err := s.b.settingsVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("settings version: %w", err)
	}
	s.settings.publish(v)
	return s.settings.v.Load(), nil
}

// SettingsSeen is the settings version as of this store's latest write
// transaction, and costs nothing. Once a write (a capture) has returned,
// it counts every change committed, by anyone, before that write was made:
// a listener that checks its cached settings against it after storing a
// capture answers with the settings in force when the capture arrived.
func (s *Store) SettingsSeen() int64 { return s.settings.v.Load() }

// dataVersionWatch reads the settings version on SQLite for
// SettingsVersion: on a connection of its own, whose data_version moves
// with every commit, the writer's included, it reads the table only when
// something was committed since it last looked.
type dataVersionWatch struct {
	seen        *settingsSeen
	db          *sql.DB
	conn        *sql.Conn
	mu          sync.Mutex
	dataVersion *sql.Stmt
	readVersion *sql.Stmt
	known       bool
	lastData    int64
}

func newDataVersionWatch(ctx context.Context, path string, seen *settingsSeen) (*dataVersionWatch, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?"+pragmas+"&_pragma=query_only(1)"+existingOnly)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	w := &dataVersionWatch{seen: seen, db: db, conn: conn}
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

func (w *dataVersionWatch) close() error {
	for _, st := range []*sql.Stmt{w.dataVersion, w.readVersion} {
		if st != nil {
			st.Close()
		}
	}
	w.conn.Close()
	return w.db.Close()
}

func (w *dataVersionWatch) check(ctx context.Context) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var data int64
	if err := w.dataVersion.QueryRowContext(ctx).Scan(&data); err != nil {
		return 0, err
	}
	if !w.known || data != w.lastData {
		// Read after data_version: a commit between the two shows up as
		// a change on the next check, never as a missed one.
		var v int64
		if err := w.readVersion.QueryRowContext(ctx).Scan(&v); err != nil {
			return 0, err
		}
		w.known, w.lastData = true, data
		w.seen.publish(v)
	}
	return w.seen.v.Load(), nil
}
