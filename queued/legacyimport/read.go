package legacyimport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// minUserVersion is the oldest layout read: version 1 lacks seq, status
// and the log columns, and the Python tool refuses it too.
const minUserVersion = 2

// row is one jobs row, by column name: int64, float64, string, []byte or
// nil, as SQLite stored it.
type row map[string]any

// stateRow is one device_state row, by column name.
type stateRow = row

// legacyDB is everything read from the database.
type legacyDB struct {
	userVersion int
	cardColumn  string // "device_id", "device" or "" (no card column)
	jobs        []row  // in seq order
	states      []stateRow
}

// cardColumns are the names the per-card generation may give its card
// column, in the order they are looked for.
var cardColumns = []string{"device_id", "device"}

// read opens path read-only through SQLite (so commits still in its WAL
// are seen, and nothing is written: no checkpoint, no journal) and reads
// the jobs in submission order and the card states.
//
// A database without -wal and -shm files beside it (the tool closed it
// cleanly) is complete in its main file and opened immutable, so SQLite
// creates neither; otherwise SQLite reads the WAL through the -shm index,
// updating only that index's read marks, as any reader does. A -wal or
// -shm file that SQLite had to create anyway is removed again.
func read(ctx context.Context, path string) (*legacyDB, error) {
	query := "?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(5000)"
	var created []string
	for _, side := range []string{path + "-wal", path + "-shm"} {
		if _, err := os.Lstat(side); errors.Is(err, os.ErrNotExist) {
			created = append(created, side)
		}
	}
	if len(created) == 2 {
		query = "?mode=ro&immutable=1"
	}
	defer func() {
		for _, side := range created {
			os.Remove(side)
		}
	}()
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + query
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer conn.Close()
	// One read transaction, so the rows and the states are one snapshot
	// even if something else still writes.
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer tx.Rollback()
	var l legacyDB
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&l.userVersion); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if l.userVersion < minUserVersion {
		return nil, fmt.Errorf("%s has user_version %d, an older layout than the Python tt-device-queue reads (%d); it refuses it too, and so does the import",
			path, l.userVersion, minUserVersion)
	}
	cols, err := columns(ctx, tx, "jobs")
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	for _, need := range []string{"seq", "id", "cmd", "status"} {
		if !cols[need] {
			return nil, fmt.Errorf("%s: table jobs has no column %s: not the Python tt-device-queue's database", path, need)
		}
	}
	for _, c := range cardColumns {
		if cols[c] {
			l.cardColumn = c
			break
		}
	}
	if l.jobs, err = rows(ctx, tx, "SELECT * FROM jobs ORDER BY seq"); err != nil {
		return nil, fmt.Errorf("reading the jobs of %s: %w", path, err)
	}
	stateCols, err := columns(ctx, tx, "device_state")
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(stateCols) > 0 {
		if l.states, err = rows(ctx, tx, "SELECT * FROM device_state"); err != nil {
			return nil, fmt.Errorf("reading the card states of %s: %w", path, err)
		}
	}
	return &l, nil
}

// columns returns the set of a table's column names; empty when there is
// no such table.
func columns(ctx context.Context, tx *sql.Tx, table string) (map[string]bool, error) {
	rs, err := tx.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		return nil, fmt.Errorf("listing the columns of %s: %w", table, err)
	}
	defer rs.Close()
	cols := map[string]bool{}
	for rs.Next() {
		var name string
		if err := rs.Scan(&name); err != nil {
			return nil, fmt.Errorf("listing the columns of %s: %w", table, err)
		}
		cols[name] = true
	}
	return cols, rs.Err()
}

// rows runs query and returns every row by column name.
func rows(ctx context.Context, tx *sql.Tx, query string) ([]row, error) {
	rs, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	names, err := rs.Columns()
	if err != nil {
		return nil, err
	}
	var out []row
	for rs.Next() {
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := make(row, len(names))
		for i, n := range names {
			r[n] = vals[i]
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// str is a column as text; "" for NULL or a missing column.
func (r row) str(col string) string {
	switch v := r[col].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// num is a column as a number; ok is false for NULL, a missing column or
// text that is not a number.
func (r row) num(col string) (float64, bool) {
	switch v := r[col].(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}

// int is a column as an integer, 0 when absent.
func (r row) int(col string) int64 {
	f, _ := r.num(col)
	return int64(f)
}
