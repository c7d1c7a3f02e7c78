package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
	// sources, when set, are where the rows come from instead of the
	// table: each gives rows in seq order, and the page merges them.
	sources []source
	// filtered says scan may reject rows (errSkipRow): the query then
	// has no LIMIT and is read until the page is full.
	filtered bool
	// windowed bounds a filtered query by a LIMIT that widens until the
	// page fills: PostgreSQL's driver reads a result to its end even
	// when the page is full, so an unbounded one would send every match.
	windowed bool
}

// source is one way to the rows of a keyset: a search index joined to the
// table.
type source struct {
	from   string // FROM clause, joining the table
	seqCol string // equals the table's seq; orders and bounds the rows
	where  string // a condition of this source, with its arguments
	args   []any
	// ownerBounds bounds seqCol by the collection's oldest and newest
	// seq, so an index shared by all collections skips the others' rows.
	ownerBounds bool
}

// errSkipRow is what a scan returns for a row the page leaves out.
var errSkipRow = errors.New("row left out")

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

	order := "DESC"
	var cursorSeq int64
	if cursor := p.Before + p.After; cursor != "" {
		err := s.queryRow(ctx,
			`SELECT seq FROM `+k.table+` WHERE id = ? AND `+k.ownerCol+` = ?`, cursor, k.owner).Scan(&cursorSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return List[T]{}, fmt.Errorf("%w: %q is not in this collection", ErrInvalidCursor, cursor)
		}
		if err != nil {
			return List[T]{}, err
		}
		if p.After != "" {
			order = "ASC"
		}
	}

	sources := k.sources
	if len(sources) == 0 {
		sources = []source{{from: k.table, seqCol: k.table + ".seq"}}
	}
	var selects []string
	var args []any
	for _, src := range sources {
		conds := []string{k.table + "." + k.ownerCol + " = ?"}
		args = append(args, k.owner)
		conds = append(conds, k.where...)
		args = append(args, k.whereArgs...)
		if src.where != "" {
			conds = append(conds, src.where)
			args = append(args, src.args...)
		}
		if p.Before != "" {
			conds = append(conds, src.seqCol+" < ?")
			args = append(args, cursorSeq)
		} else if p.After != "" {
			conds = append(conds, src.seqCol+" > ?")
			args = append(args, cursorSeq)
		}
		if src.ownerBounds {
			// A virtual table takes one bound each way, so the cursor's
			// bound replaces the collection's on its side.
			if p.After == "" {
				conds = append(conds, src.seqCol+` >= (SELECT min(seq) FROM `+k.table+` WHERE `+k.ownerCol+` = ?)`)
				args = append(args, k.owner)
			}
			if p.Before == "" {
				conds = append(conds, src.seqCol+` <= (SELECT max(seq) FROM `+k.table+` WHERE `+k.ownerCol+` = ?)`)
				args = append(args, k.owner)
			}
		}
		selects = append(selects, `SELECT `+src.seqCol+`, `+k.table+`.id, `+k.columns+` FROM `+src.from+` `+k.joins+
			` WHERE `+strings.Join(conds, " AND "))
	}
	orderBy := sources[0].seqCol
	if len(sources) > 1 {
		// SQLite merges the sources, each read in order, as far as needed.
		orderBy = "1"
	}
	q := strings.Join(selects, " UNION ALL ") + ` ORDER BY ` + orderBy + ` ` + order
	window := 0 // read to the end
	switch {
	case !k.filtered:
		window = limit + 1
	case k.windowed:
		window = 4 * (limit + 1)
	}
	var items []T
	var ids []string
	for {
		var read int
		var err error
		items, ids, read, err = pageRows(ctx, s, q, args, window, limit, scan)
		if err != nil {
			return List[T]{}, err
		}
		// A window that ran out before the page filled may have left
		// matching rows out: read again through a wider one.
		if !k.filtered || window == 0 || read < window || len(ids) > limit {
			break
		}
		window *= 8
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

// pageRows runs q, bounded to window rows unless window is 0, and scans
// up to limit items and one more row, which only says that more exist
// (its id is ""). read is how many rows it read.
func pageRows[T any](ctx context.Context, s *Store, q string, args []any, window, limit int,
	scan func(*sql.Rows, *row) (T, error)) (items []T, ids []string, read int, err error) {
	if window > 0 {
		q += ` LIMIT ?`
		args = append(slices.Clip(args), window)
	}
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		read++
		if len(items) == limit {
			ids = append(ids, "")
			break
		}
		var base row
		item, err := scan(rows.Rows, &base)
		if errors.Is(err, errSkipRow) {
			continue
		}
		if err != nil {
			return nil, nil, 0, rows.fail(err)
		}
		items = append(items, item)
		ids = append(ids, base.id)
	}
	return items, ids, read, rows.Err()
}
