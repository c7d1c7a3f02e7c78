package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// DefaultLimit and MaxLimit bound a page.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// keyset describes one collection to page through newest first on its
// indexed (collection, seq) order.
type keyset struct {
	table     string // also the alias used in where clauses
	ownerCol  string // the collection column: inbox_id, endpoint_id, project_id
	owner     string
	columns   string // selected after seq and id
	joins     string
	where     []string // extra conditions, ANDed
	whereArgs []any
}

type row struct {
	seq int64
	id  string
}

// page runs the keyset query and returns the rows of one page newest first,
// scanning each with scan, plus the next cursor.
func page[T any](ctx context.Context, s *Store, k keyset, p Page,
	scan func(r *sql.Rows, base *row) (T, error)) (List[T], error) {

	limit := p.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	if limit > MaxLimit {
		limit = MaxLimit
	}
	if p.Before != "" && p.After != "" {
		return List[T]{}, fmt.Errorf("%w: before and after exclude each other", ErrInvalid)
	}

	conds := []string{k.table + "." + k.ownerCol + " = ?"}
	args := []any{k.owner}
	conds = append(conds, k.where...)
	args = append(args, k.whereArgs...)

	order := "DESC"
	if cursor := p.Before + p.After; cursor != "" {
		var seq int64
		err := s.queryRow(ctx,
			`SELECT seq FROM `+k.table+` WHERE id = ? AND `+k.ownerCol+` = ?`, cursor, k.owner).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return List[T]{}, fmt.Errorf("%w: %q is not in this collection", ErrInvalidCursor, cursor)
		}
		if err != nil {
			return List[T]{}, err
		}
		if p.Before != "" {
			conds = append(conds, k.table+".seq < ?")
		} else {
			conds = append(conds, k.table+".seq > ?")
			order = "ASC"
		}
		args = append(args, seq)
	}

	q := `SELECT ` + k.table + `.seq, ` + k.table + `.id, ` + k.columns + ` FROM ` + k.table + ` ` + k.joins +
		` WHERE ` + strings.Join(conds, " AND ") +
		` ORDER BY ` + k.table + `.seq ` + order + ` LIMIT ?`
	args = append(args, limit+1)

	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return List[T]{}, err
	}
	defer rows.Close()
	var items []T
	var ids []string
	for rows.Next() {
		if len(items) == limit {
			// The extra row only says that more exist.
			ids = append(ids, "")
			break
		}
		var base row
		item, err := scan(rows, &base)
		if err != nil {
			return List[T]{}, err
		}
		items = append(items, item)
		ids = append(ids, base.id)
	}
	if err := rows.Err(); err != nil {
		return List[T]{}, err
	}
	more := len(ids) > len(items)
	out := List[T]{Items: items}
	if items == nil {
		out.Items = []T{}
	}
	if more {
		// Oldest of the page going back; newest of the page going forward.
		out.Next = ids[len(items)-1]
	}
	if order == "ASC" {
		for i, j := 0, len(out.Items)-1; i < j; i, j = i+1, j-1 {
			out.Items[i], out.Items[j] = out.Items[j], out.Items[i]
		}
	}
	return out, nil
}

// likeNeedle lower-cases a substring filter for instr() over the
// pre-lowered search columns, which keeps the match case-insensitive for
// every script, not only ASCII as LIKE is.
func likeNeedle(s string) string { return strings.ToLower(s) }
