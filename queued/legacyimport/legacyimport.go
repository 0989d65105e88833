// Package legacyimport brings the Python tt-device-queue's history into
// queued: its jobs.sqlite3 (the layout is in docs/switching.md) becomes
// records in queued's bbolt store, once and atomically.
//
// Queued jobs join their card's queue in the old order (rows without a
// card go to card 0); jobs that were running become done and interrupted,
// never run again; finished jobs become history with their status, exit
// code and output (the old output file is copied, mode 0600, into
// queued's output directory), and feed the run-time estimates as queued's
// own history does; each card's state is carried over, so a card that
// died on the current boot stays dead and one that died on an earlier boot
// is revived by queued as after any reboot.
//
// The database is opened read-only through SQLite (modernc.org/sqlite, a
// pure-Go driver, linked only where this package is), so commits still in
// its WAL are read and nothing of it is written. Old job ids stay usable:
// a new id starts with the old one (see newID).
//
// Two ways in: ImportOnStart, which queued runs before it opens its store,
// imports the state directory's own jobs.sqlite3 when there is no store
// yet; ImportInto, behind `tt-device-queue import PATH`, imports any such
// database into the store of a state directory while no queued uses it.
package legacyimport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// DBName is the Python tool's database file in its state directory.
const DBName = "jobs.sqlite3"

// OutputDir is queued's output directory inside its state directory.
const OutputDir = "output"

// ErrAlreadyImported means the database's jobs are in the store already.
var ErrAlreadyImported = errors.New("already imported")

// Options tune an import.
type Options struct {
	// DefaultTimeout replaces a row's missing or zero timeout, as queued's
	// TT_DEVICE_DEFAULT_TIMEOUT does for a submission; 0 means an hour.
	DefaultTimeout time.Duration
	// OutputDir is where output files are copied; default <dir>/output.
	OutputDir string
	// Logger receives one line per import with its counts; default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock for records that need an end time; default
	// time.Now.
	Now func() time.Time
}

func (o *Options) defaults(dir string) {
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = time.Hour
	}
	if o.OutputDir == "" {
		o.OutputDir = filepath.Join(dir, OutputDir)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Report counts what an import did.
type Report struct {
	// Source is the database imported.
	Source string `json:"source"`
	// UserVersion is its PRAGMA user_version; CardColumn the name of its
	// card column, empty for the single-card layout.
	UserVersion int    `json:"user_version"`
	CardColumn  string `json:"card_column,omitempty"`
	// Queued, Interrupted and Finished count the jobs by what they became;
	// Resets counts the queued ones that are card resets.
	Queued      int `json:"queued"`
	Interrupted int `json:"interrupted"`
	Finished    int `json:"finished"`
	Resets      int `json:"resets"`
	// DeadCards are the cards the database says are dead.
	DeadCards []int `json:"dead_cards,omitempty"`
	// KeptCards are cards whose record queued had already and kept.
	KeptCards []int `json:"kept_cards,omitempty"`
	// DroppedEnv counts env entries left out (names queued refuses).
	DroppedEnv int `json:"dropped_env"`
	// MissingOutput counts finished or interrupted jobs whose output file
	// could not be copied; their LogError says why.
	MissingOutput int `json:"missing_output"`
	// Renamed maps old ids that are not a prefix of their new id.
	Renamed map[string]string `json:"renamed,omitempty"`
}

// ImportOnStart imports dir's jobs.sqlite3 when dir holds one and no
// store yet: the store is built beside, under a scratch name, and appears
// as dir/queue.db only once complete, so a crash leaves either no store
// (and the next start imports again) or the whole import. It reports
// whether it imported.
func ImportOnStart(dir string, opt Options) (Report, bool, error) {
	src := filepath.Join(dir, DBName)
	if _, err := os.Stat(filepath.Join(dir, store.FileName)); err == nil || !errors.Is(err, os.ErrNotExist) {
		return Report{}, false, nil // a store exists (or cannot be checked: Open will say why)
	}
	if _, err := os.Stat(src); err != nil {
		return Report{}, false, nil
	}
	rep, err := ImportInto(dir, src, opt)
	if err != nil {
		return rep, false, fmt.Errorf("importing the Python tt-device-queue's %s (queued does so once, when it starts on a state directory without %s): %w; fix that, or move %s aside to start without its jobs",
			src, store.FileName, err, DBName)
	}
	return rep, true, nil
}

// ImportInto imports the database at source (the file, or the directory
// holding jobs.sqlite3) into the store in dir. Without a store in dir it
// builds one as ImportOnStart does; with one, it adds the records in one
// transaction, after the store's own jobs. It fails with store.ErrLocked
// while a queued uses dir, and with ErrAlreadyImported when the jobs are
// there already.
func ImportInto(dir, source string, opt Options) (Report, error) {
	opt.defaults(dir)
	if fi, err := os.Stat(source); err == nil && fi.IsDir() {
		source = filepath.Join(source, DBName)
	}
	if _, err := os.Stat(source); err != nil {
		return Report{}, fmt.Errorf("the Python tt-device-queue's database: %w", err)
	}
	l, err := read(context.Background(), source)
	if err != nil {
		return Report{}, err
	}
	c, err := convert(l, opt.DefaultTimeout, opt.Now())
	if err != nil {
		return Report{}, fmt.Errorf("importing %s: %w", source, err)
	}
	c.report.Source = source
	if len(c.renamedIDs) > 0 {
		c.report.Renamed = c.renamedIDs
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return c.report, fmt.Errorf("creating state directory: %w", err)
	}
	copied, err := copyOutputs(c, opt.OutputDir)
	if err != nil {
		return c.report, err
	}
	err = write(dir, c)
	if err != nil {
		for _, p := range copied {
			os.Remove(p)
		}
		return c.report, err
	}
	r := c.report
	opt.Logger.Info("imported the Python tt-device-queue's database", "source", source, "queued", r.Queued,
		"interrupted", r.Interrupted, "finished", r.Finished, "resets", r.Resets, "dead_cards", r.DeadCards,
		"kept_cards", r.KeptCards, "dropped_env", r.DroppedEnv, "missing_output", r.MissingOutput, "renamed_ids", len(r.Renamed))
	for old, id := range r.Renamed {
		opt.Logger.Info("imported job has a new id", "old_id", old, "id", id)
	}
	return r, nil
}

// write stores the records: into the existing store, or into a new one
// that is moved into place only when complete.
func write(dir string, c *converted) error {
	if _, err := os.Stat(filepath.Join(dir, store.FileName)); err == nil {
		return writeExisting(dir, c)
	}
	scratch, err := os.MkdirTemp(dir, ".import-")
	if err != nil {
		return fmt.Errorf("importing: %w", err)
	}
	defer os.RemoveAll(scratch)
	if err := writeExisting(scratch, c); err != nil {
		return err
	}
	if err := syncFile(filepath.Join(scratch, store.FileName)); err != nil {
		return err
	}
	// Link, unlike rename, never replaces a store that appeared meanwhile
	// (a queued started on the directory): then import into that one.
	err = os.Link(filepath.Join(scratch, store.FileName), filepath.Join(dir, store.FileName))
	if errors.Is(err, os.ErrExist) {
		return writeExisting(dir, c)
	}
	if err != nil {
		return fmt.Errorf("moving the imported store into place: %w", err)
	}
	return syncFile(dir)
}

// writeExisting imports into the store in dir in one transaction.
func writeExisting(dir string, c *converted) error {
	st, err := store.Open(dir, store.Options{LockTimeout: 500 * time.Millisecond})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("a queued is using %s: stop queued (systemctl --user stop queued), import, then start it again: %w", dir, err)
	}
	if err != nil {
		return err
	}
	kept, err := st.Import(c.cards, c.jobs)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, store.ErrExists) {
		return fmt.Errorf("%s: its jobs are in %s already: %w", c.report.Source, dir, ErrAlreadyImported)
	}
	c.report.KeptCards = kept
	return err
}

// copyOutputs copies each job's old output file to queued's output
// directory (mode 0600) and sets the record's log fields; it returns the
// files it created. A missing or unreadable old file leaves the job
// without output and says so in LogError.
func copyOutputs(c *converted, outDir string) ([]string, error) {
	if len(c.outputs) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", outDir, err)
	}
	var created []string
	for i := range c.jobs {
		j := &c.jobs[i]
		src, ok := c.outputs[j.ID]
		if !ok {
			continue
		}
		dst := filepath.Join(outDir, j.ID+".log")
		n, err := copyFile(src, dst)
		if n >= 0 {
			created = append(created, dst)
		}
		if err != nil {
			c.report.MissingOutput++
			j.LogError = fmt.Sprintf("output not imported: %v", err)
			continue
		}
		j.LogBytes = n
	}
	return created, nil
}

// copyFile copies src to a new dst (0600) and returns its size; -1 when
// dst was not created.
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return -1, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return -1, fmt.Errorf("creating %s: %w", dst, err)
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return n, nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return nil
}
