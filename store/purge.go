package store

import (
	"context"
	"database/sql"
)

// purgeChunk is how many captures one transaction of a purge deletes. A
// million captures deleted in one transaction held the write lock for
// half a minute, and every capture arriving meanwhile was refused after
// its 5 s; in chunks, captures are written between them.
const purgeChunk = 1000

// purge deletes every capture the collection held when it began, a chunk
// at a time, oldest first. Captures arriving meanwhile are kept: they came
// after the purge was asked for. A purge cut short (the caller went away,
// the database failed) has deleted the oldest part only, and its caller
// was not told it succeeded.
func (s *Store) purge(ctx context.Context, ct captureTable, ownerID string) error {
	var newest sql.NullInt64
	if err := s.queryRow(ctx, `SELECT max(seq) FROM `+ct.table+` WHERE `+ct.owner+` = ?`, ownerID).Scan(&newest); err != nil {
		return err
	}
	if !newest.Valid {
		return nil
	}
	for {
		var deleted int64
		err := s.write(ctx, func(t *wtx) error {
			res, err := t.exec(`DELETE FROM `+ct.table+` WHERE seq IN (SELECT seq FROM `+ct.table+` WHERE `+ct.owner+` = ? AND seq <= ?
				ORDER BY seq LIMIT ?)`, ownerID, newest.Int64, purgeChunk)
			if err != nil {
				return err
			}
			if deleted, err = res.RowsAffected(); err != nil {
				return err
			}
			// Once a chunk, not once a capture: a waiter whose cursor
			// this chunk deleted answers invalid_cursor at its commit.
			if deleted > 0 {
				t.wakeAfterCommit(ownerID)
			}
			_, err = t.exec(`UPDATE `+ct.ownerTable+` SET `+ct.counter+` = `+ct.counter+` - ? WHERE id = ?`, deleted, ownerID)
			return err
		})
		if err != nil {
			return err
		}
		if deleted < purgeChunk {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
