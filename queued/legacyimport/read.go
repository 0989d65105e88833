package legacyimport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// maxUserVersion is the newest layout read: the current Python tool's
// (1d677f3). It reads every older layout whose jobs table has the columns
// in requiredColumns (user_version 1, written by the previous release,
// bb03448, differs only in its device_state table, which it migrates), and
// refuses a newer one; so does the import.
const maxUserVersion = 2

// requiredColumns are the jobs columns the Python tool requires of an
// existing database; without them it is the original pre-v2 layout,
// which the tool refuses ("incompatible jobs database"). The import
// needs cmd too.
var requiredColumns = []string{"seq", "id", "cmd", "status", "log_truncated", "dropped_log_bytes"}

// ErrLayout refuses a database laid out as the Python tool would not read
// it either: newer than it, or the original pre-v2 layout.
var ErrLayout = errors.New("a layout the Python tt-device-queue does not read")

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

// read reads the jobs in submission order and the card states from the
// private copy at path (see snapshot), in one read transaction. The copy
// is opened read-write: SQLite may have to replay its WAL and rebuild its
// -shm, both private to the copy. name is the source, for messages.
func read(ctx context.Context, path, name string) (*legacyDB, error) {
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	defer tx.Rollback()
	var l legacyDB
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&l.userVersion); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if l.userVersion > maxUserVersion {
		return nil, fmt.Errorf("%s has user_version %d, a newer layout than the Python tt-device-queue this queued knows (%d); it is not imported, lest its new fields be lost: %w",
			name, l.userVersion, maxUserVersion, ErrLayout)
	}
	cols, err := columns(ctx, tx, "jobs")
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(cols) > 0 {
		for _, need := range requiredColumns {
			if !cols[need] {
				return nil, fmt.Errorf("%s: table jobs has no column %s: the original pre-v2 layout (or not the Python tt-device-queue's database), which the Python tool refuses too: %w",
					name, need, ErrLayout)
			}
		}
		for _, c := range cardColumns {
			if cols[c] {
				l.cardColumn = c
				break
			}
		}
		if l.jobs, err = rows(ctx, tx, "SELECT * FROM jobs ORDER BY seq"); err != nil {
			return nil, fmt.Errorf("reading the jobs of %s: %w", name, err)
		}
	}
	stateCols, err := columns(ctx, tx, "device_state")
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(stateCols) > 0 {
		if l.states, err = rows(ctx, tx, "SELECT * FROM device_state"); err != nil {
			return nil, fmt.Errorf("reading the card states of %s: %w", name, err)
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
