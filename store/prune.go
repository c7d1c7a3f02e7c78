package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// pruneChunk bounds each delete so ingest queued behind the pruner waits
// for one small transaction at most.
const pruneChunk = 500

type captureTable struct {
	table, owner, ownerTable, counter string
}

var (
	messagesTable = captureTable{table: "messages", owner: "inbox_id", ownerTable: "inboxes", counter: "message_count"}
	requestsTable = captureTable{table: "requests", owner: "endpoint_id", ownerTable: "endpoints", counter: "request_count"}
	captureTables = []captureTable{messagesTable, requestsTable}
)

// deleteCapture deletes one capture of the project and keeps its
// collection's counter right.
func (s *Store) deleteCapture(ctx context.Context, ct captureTable, kind, projectID, id string) error {
	return s.write(ctx, func(t *wtx) error {
		err := t.removeCapture(ct, id, `IN (SELECT id FROM `+ct.ownerTable+` WHERE project_id = ?2)`, projectID)
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: no %s %q", ErrNotFound, kind, id)
		}
		return err
	})
}

// removeCapture deletes the capture id when its collection matches owner
// (SQL after the collection column, with ownerArg as ?2), and keeps the
// collection's counter right. ErrNotFound says none matched. The
// collection's waiters wake at the commit: one holding the deleted capture
// as its cursor answers invalid_cursor then, not when the next capture
// comes, nor with nothing at its deadline.
func (t *wtx) removeCapture(ct captureTable, id, owner string, ownerArg any) error {
	var collection string
	err := t.queryRow(`DELETE FROM `+ct.table+` WHERE id = ?1 AND `+ct.owner+` `+owner+` RETURNING `+ct.owner, id, ownerArg).Scan(&collection)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	if _, err := t.exec(`UPDATE `+ct.ownerTable+` SET `+ct.counter+` = `+ct.counter+` - 1 WHERE id = ?`, collection); err != nil {
		return err
	}
	t.wakeAfterCommit(collection)
	return nil
}

// Prune deletes captures older than their plan's retention and, in each
// inbox and endpoint, the oldest captures beyond the plan's cap. It returns
// how many it deleted. Replicas sharing a database prune one at a time: one
// that finds another pruning leaves it to that one. On SQLite it then
// takes out of the search vocabulary the terms deleted captures left, when
// enough have gathered to pay for it (tidyVocabulary).
func (s *Store) Prune(ctx context.Context, at time.Time) (int64, error) {
	var total int64
	_, err := s.b.exclusively(ctx, "prune", false, func() (err error) {
		total, err = s.prune(ctx, at)
		return err
	})
	if err != nil {
		return total, err
	}
	_, err = s.tidyVocabulary(ctx)
	return total, err
}

func (s *Store) prune(ctx context.Context, at time.Time) (int64, error) {
	var total int64
	for _, plan := range plans {
		cutoff := ms(at.Add(-plan.Retention))
		for _, ct := range captureTables {
			n, err := s.pruneWhere(ctx, ct,
				`received_at < ? AND `+ct.owner+` IN (SELECT o.id FROM `+ct.ownerTable+` o JOIN projects p ON p.id = o.project_id WHERE p.plan = ?)`,
				cutoff, plan.Name)
			total += n
			if err != nil {
				return total, err
			}
		}
	}
	for _, ct := range captureTables {
		n, err := s.pruneOverCap(ctx, ct)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneWhere deletes, chunk by chunk, the captures matching cond.
func (s *Store) pruneWhere(ctx context.Context, ct captureTable, cond string, args ...any) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.write(ctx, func(t *wtx) error {
			rows, err := t.query(`DELETE FROM `+ct.table+` WHERE seq IN (SELECT seq FROM `+ct.table+` WHERE `+cond+
				` ORDER BY seq LIMIT `+fmt.Sprint(pruneChunk)+`) RETURNING `+ct.owner, args...)
			if err != nil {
				return err
			}
			counts := map[string]int64{}
			for rows.Next() {
				var owner string
				if err := rows.Scan(&owner); err != nil {
					rows.Close()
					return err
				}
				counts[owner]++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			n = 0
			// In the order of their ids, as the writer bumps them. Each
			// collection's waiters wake once for the chunk (a cursor among
			// the pruned is told at once), not once for each capture.
			for _, owner := range slices.Sorted(maps.Keys(counts)) {
				c := counts[owner]
				n += c
				t.wakeAfterCommit(owner)
				if _, err := t.exec(`UPDATE `+ct.ownerTable+` SET `+ct.counter+` = `+ct.counter+` - ? WHERE id = ?`, c, owner); err != nil {
					return err
				}
			}
			return nil
		})
		total += n
		if err != nil || n < pruneChunk {
			return total, err
		}
	}
}

func (s *Store) pruneOverCap(ctx context.Context, ct captureTable) (int64, error) {
	type over struct {
		id     string
		excess int64
	}
	var list []over
	var capByPlan = map[string]int64{}
	for _, p := range plans {
		capByPlan[p.Name] = p.CapturesPerCollection
	}
	rows, err := s.query(ctx, `SELECT o.id, o.`+ct.counter+`, p.plan FROM `+ct.ownerTable+` o
		JOIN projects p ON p.id = o.project_id`)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var id, plan string
		var count int64
		if err := rows.Scan(&id, &count, &plan); err != nil {
			rows.Close()
			return 0, err
		}
		if c, ok := capByPlan[plan]; ok && count > c {
			list = append(list, over{id, count - c})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var total int64
	for _, o := range list {
		// The newest seq to delete: the excess-th oldest of the collection.
		var last int64
		err := s.queryRow(ctx, `SELECT seq FROM `+ct.table+` WHERE `+ct.owner+` = ? ORDER BY seq LIMIT 1 OFFSET ?`,
			o.id, o.excess-1).Scan(&last)
		if err != nil {
			return total, err
		}
		n, err := s.pruneWhere(ctx, ct, ct.owner+` = ? AND seq <= ?`, o.id, last)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
