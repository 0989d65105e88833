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
// a new id starts with the old one (see newID), except where that id is
// another record's already: an import never takes over a stored job. The
// row then gets a fresh id, and every imported record keeps its old id
// (LegacyID) and its database (ImportSource), so only a later import of
// the same database updates it, and never its owner (see merge).
//
// Two ways in: ImportOnStart, which queued runs before it opens its store,
// imports the state directory's own jobs.sqlite3 when there is no store
// yet; ImportInto, behind `tt-device-queue import PATH`, imports any such
// database into the store of a state directory while no queued uses it.
package legacyimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ttkit/ttkit/queued/api"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/config"
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
	// TT_DEVICE_DEFAULT_TIMEOUT does for a submission; 0 means that
	// setting's default.
	DefaultTimeout time.Duration
	// MaxLogBytes bounds each copied output file, as
	// TT_DEVICE_MAX_LOG_BYTES bounds a job's own; 0 means that setting's
	// default.
	MaxLogBytes int64
	// Mode is the importing queued's: in system mode every record becomes
	// the database owner's (OwnerUID, Owner), as a submission is its
	// caller's, and a database of root's is refused. In user mode the
	// database must belong to the user importing.
	Mode api.Mode
	// Port is where the Python tool would answer (TT_DEVICE_PORT); a
	// Python tool answering there about this directory makes the
	// database in use. 0 asks no port.
	Port int
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
		o.DefaultTimeout = config.Default().DefaultTimeout
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = config.Default().MaxLogBytes
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
	// Owner is the user the database belongs to: in system mode, the
	// owner of every imported record.
	Owner string `json:"owner,omitempty"`
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
	// PendingResets are the cards whose reset was pending or interrupted:
	// it runs before anything else on them.
	PendingResets []int `json:"pending_resets,omitempty"`
	// Updated counts jobs imported before that are updated from a
	// database read again (queued jobs the Python tool has run since);
	// Unchanged those already imported as they are.
	Updated   int `json:"updated,omitempty"`
	Unchanged int `json:"unchanged,omitempty"`
	// DeadCards are the cards the database says are dead.
	DeadCards []int `json:"dead_cards,omitempty"`
	// KeptCards are cards whose record queued had already and kept.
	KeptCards []int `json:"kept_cards,omitempty"`
	// DroppedEnv counts env entries left out (names queued refuses, and
	// variables over api.MaxEnvVarBytes).
	DroppedEnv int `json:"dropped_env"`
	// OverBudget counts rows whose cmd and env were over queued's record
	// budget (api.MaxRecordBytes, a cmd of api.MaxCmdBytes): imported cut,
	// and never run (a queued one failed, saying why). Finished counts
	// the queued ones among them.
	OverBudget int `json:"over_budget,omitempty"`
	// MissingOutput counts finished or interrupted jobs whose output file
	// could not be copied or was refused; their LogError says why.
	MissingOutput int `json:"missing_output"`
	// CutOutputs counts output files larger than MaxLogBytes, whose middle
	// was left out.
	CutOutputs int `json:"cut_outputs,omitempty"`
	// Renamed maps old ids that are not a prefix of their new id.
	Renamed map[string]string `json:"renamed,omitempty"`
	// TakenIDs are the old ids (in Renamed) that were another job's id in
	// the store already, queued's own or another import's: their jobs got
	// a fresh id, and the old one stays their legacy_id. An import never
	// takes over a stored job.
	TakenIDs []string `json:"taken_ids,omitempty"`
	// Refused maps the old ids of rows left out to why: a job this
	// database was imported as before, for another user (the file changed
	// hands since); an import never changes a job's owner.
	Refused map[string]string `json:"refused,omitempty"`
}

// ImportOnStart imports dir's jobs.sqlite3, when dir holds one that is
// not in the store as it is now: on the first start (no store yet: the
// store is built beside, under a scratch name, and appears as
// dir/queue.db only once complete, so a crash leaves either no store,
// and the next start imports again, or the whole import), and again
// whenever the database changed since the import recorded in the store
// (see ImportInto). A database in use (ErrInUse) fails the start: the
// Python tool and queued must never both run one queue. It reports
// whether it imported.
func ImportOnStart(dir string, opt Options) (Report, bool, error) {
	src := filepath.Join(dir, DBName)
	if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
		return Report{}, false, nil
	}
	rep, err := ImportInto(dir, src, opt)
	switch {
	case errors.Is(err, ErrAlreadyImported):
		return rep, false, nil
	case err != nil:
		return rep, false, fmt.Errorf("importing the Python tt-device-queue's %s (queued imports it when it starts on a directory that holds one it has not imported as it is now): %w; fix that, or move %s aside to start without its jobs",
			src, err, DBName)
	}
	return rep, true, nil
}

// ImportInto imports the database at source (the file, or the directory
// holding jobs.sqlite3) into the store in dir.
//
// It refuses a database in use (ErrInUse, see checkInUse), one that is a
// symbolic link or not its owner's to import (ErrUnsafe, see openSource),
// and a layout the Python tool would not read (ErrLayout). It reads a
// consistent copy (see snapshot) and never writes, locks or creates
// anything beside the source.
//
// Without a store in dir it builds one as ImportOnStart does; with one,
// it writes in one transaction: new jobs after the store's own, and
// jobs imported before that queued has not run since updated from the
// database (a queued job the Python tool ran meanwhile becomes the
// history the tool recorded). What it read is recorded in the store's
// meta (KeyImports), so the same database, unchanged, is not read again:
// that, and a database with nothing new, fails with ErrAlreadyImported. It
// fails with store.ErrLocked while a queued uses dir.
func ImportInto(dir, source string, opt Options) (Report, error) {
	opt.defaults(dir)
	if fi, err := os.Stat(source); err == nil && fi.IsDir() {
		source = filepath.Join(source, DBName)
	}
	// The absolute path is the source's identity in the store: the
	// records an import of it makes carry it (see merge).
	abs, err := filepath.Abs(source)
	if err != nil {
		return Report{}, fmt.Errorf("the Python tt-device-queue's database %s: %w", source, err)
	}
	source = abs
	s, err := openSource(source, opt.Mode.System())
	if err != nil {
		return Report{}, err
	}
	rep := Report{Source: source, Owner: s.owner.Name}
	if err := checkInUse(s, opt.Port); err != nil {
		return rep, err
	}
	prev, err := readRecord(dir)
	if err != nil {
		return rep, err
	}
	if p, ok := prev.Sources[source]; ok && p.Fingerprint.sameFiles(fingerprint{DB: s.db, WAL: s.wal}) {
		return rep, fmt.Errorf("%s, unchanged since, is in %s already: %w", source, dir, ErrAlreadyImported)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return rep, fmt.Errorf("creating state directory: %w", err)
	}
	scratch, err := os.MkdirTemp(dir, ".import-read-")
	if err != nil {
		return rep, fmt.Errorf("importing: %w", err)
	}
	defer os.RemoveAll(scratch)
	cp, fp, err := snapshot(s, scratch)
	if err != nil {
		return rep, err
	}
	if p, ok := prev.Sources[source]; ok && p.Fingerprint.SHA256 == fp.SHA256 {
		return rep, fmt.Errorf("%s, unchanged since, is in %s already: %w", source, dir, ErrAlreadyImported)
	}
	l, err := read(context.Background(), cp, source)
	if err != nil {
		return rep, err
	}
	co := convertOptions{defaultTimeout: opt.DefaultTimeout, now: opt.Now(), bootID: bootID(), lastWrite: later(s.db.mtime(), s.wal.mtime())}
	if opt.Mode.System() {
		uid := s.owner.UID
		co.ownerUID, co.owner = &uid, s.owner.Name
	}
	c, err := convert(l, co)
	if err != nil {
		return rep, fmt.Errorf("importing %s: %w", source, err)
	}
	c.report.Source, c.report.Owner = source, s.owner.Name
	if len(c.renamedIDs) > 0 {
		c.report.Renamed = c.renamedIDs
	}
	rec := sourceRecord{Fingerprint: fp, ImportedAt: opt.Now().UTC()}
	if err := write(dir, c, s, opt, rec); err != nil {
		return c.report, err
	}
	r := c.report
	opt.Logger.Info("imported the Python tt-device-queue's database", "source", source, "owner", r.Owner, "queued", r.Queued,
		"interrupted", r.Interrupted, "finished", r.Finished, "resets", r.Resets, "pending_resets", r.PendingResets, "updated", r.Updated,
		"unchanged", r.Unchanged, "dead_cards", r.DeadCards, "kept_cards", r.KeptCards, "dropped_env", r.DroppedEnv,
		"over_budget", r.OverBudget, "missing_output", r.MissingOutput, "cut_outputs", r.CutOutputs, "renamed_ids", len(r.Renamed))
	for old, id := range r.Renamed {
		opt.Logger.Info("imported job has a new id", "old_id", old, "id", id)
	}
	return r, nil
}

// bootID is this boot's id, "" where the kernel does not say.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// write stores the records: into the existing store, or into a new one
// that is moved into place only when complete.
func write(dir string, c *converted, s *source, opt Options, rec sourceRecord) error {
	if _, err := os.Stat(filepath.Join(dir, store.FileName)); err == nil {
		return writeExisting(dir, c, s, opt, rec)
	}
	scratch, err := os.MkdirTemp(dir, ".import-")
	if err != nil {
		return fmt.Errorf("importing: %w", err)
	}
	defer os.RemoveAll(scratch)
	if err := writeExisting(scratch, c, s, opt, rec); err != nil {
		return err
	}
	if err := syncFile(filepath.Join(scratch, store.FileName)); err != nil {
		return err
	}
	// Link, unlike rename, never replaces a store that appeared meanwhile
	// (a queued started on the directory): then import into that one.
	err = os.Link(filepath.Join(scratch, store.FileName), filepath.Join(dir, store.FileName))
	if errors.Is(err, os.ErrExist) {
		return writeExisting(dir, c, s, opt, rec)
	}
	if err != nil {
		return fmt.Errorf("moving the imported store into place: %w", err)
	}
	return syncFile(dir)
}

// writeExisting imports into the store in dir in one transaction,
// merging with what an earlier import of the same database stored (see
// merge), and copies the output files of the jobs it adds or updates (a
// job queued ran keeps its own); the copies are removed again if the
// transaction fails.
func writeExisting(dir string, c *converted, s *source, opt Options, rec sourceRecord) error {
	source := s.path
	st, err := store.Open(dir, store.Options{LockTimeout: 500 * time.Millisecond})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("a queued is using %s: stop queued (systemctl --user stop queued), import, then start it again: %w", dir, err)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	all, err := loadRecord(st)
	if err != nil {
		return err
	}
	prev, seen := all.Sources[source]
	b, final, err := merge(st, c, source, prev, seen)
	if err != nil {
		return err
	}
	if all.Sources == nil {
		all.Sources = map[string]sourceRecord{}
	}
	for _, j := range final {
		if j.State == store.StateQueued {
			rec.Queued = append(rec.Queued, j.ID)
		}
	}
	rec.Queued = mergeIDs(prev.Queued, rec.Queued)
	rec.Renamed = prev.Renamed
	if len(c.renamed) > 0 {
		rec.Renamed = maps.Clone(prev.Renamed)
		if rec.Renamed == nil {
			rec.Renamed = map[string]string{}
		}
		maps.Copy(rec.Renamed, c.renamed)
	}
	all.Sources[source] = rec
	if b.Record, err = json.Marshal(all); err != nil {
		return fmt.Errorf("encoding the import record: %w", err)
	}
	if len(b.Add)+len(b.Replace) == 0 {
		// Nothing new: record that this version was read, and say so.
		if _, err := st.ImportBatch(store.ImportBatch{Record: b.Record}); err != nil {
			return err
		}
		if len(c.report.Refused) > 0 {
			return fmt.Errorf("%s: nothing imported: %s: %w", c.report.Source, refusedText(c.report.Refused), ErrUnsafe)
		}
		return fmt.Errorf("%s: its jobs are in %s already: %w", c.report.Source, dir, ErrAlreadyImported)
	}
	var copied []string
	for _, jobs := range [][]store.Job{b.Add, b.Replace} {
		files, err := copyOutputs(jobs, c, s, opt)
		copied = append(copied, files...)
		if err != nil {
			removeAll(copied)
			return err
		}
	}
	kept, err := st.ImportBatch(b)
	if err != nil {
		removeAll(copied)
		return err
	}
	c.report.KeptCards = kept
	return st.Close()
}

// refusedText names the refused rows and why, in id order.
func refusedText(refused map[string]string) string {
	ids := slices.Sorted(maps.Keys(refused))
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = "row " + id + ": " + refused[id]
	}
	return strings.Join(parts, "; ")
}

func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
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
