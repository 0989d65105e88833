package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/store"
)

// ImportCmd brings the Python tt-device-queue's jobs into queued's store.
// It writes the store itself rather than asking the daemon: the import is
// one bbolt transaction beside the daemon's own start-time recovery, which
// then treats the imported jobs exactly like its own (queues, dead cards,
// estimates), so the daemon must not be running on the state directory;
// the store's file lock enforces that. The Python tool must be stopped
// too: a database in use is refused.
type ImportCmd struct {
	Path   string `arg:"" placeholder:"PATH" help:"The Python tool's jobs.sqlite3, or the directory holding it (its logs-v2/)."`
	System bool   `help:"Import into the system-mode queued's store (TT_DEVICE_LOG_DIR, default /var/lib/tt-device-queue), as root: the jobs become the database owner's."`
}

// Run imports and prints what was imported.
func (c *ImportCmd) Run(a *App) error {
	lookup := os.LookupEnv
	if c.System {
		lookup = func(name string) (string, bool) {
			if name == "TT_DEVICE_SOCKET" {
				if v, ok := os.LookupEnv(name); ok && strings.TrimSpace(v) != "" {
					return v, ok
				}
				return api.SystemSocket, true
			}
			return os.LookupEnv(name)
		}
	}
	cfg, err := config.FromEnv(lookup)
	if err != nil {
		return usageErr("%w", err)
	}
	system := cfg.Mode.System()
	if system && os.Geteuid() != 0 {
		return usageErr("import into the system-mode queued's store (%s) must run as root", cfg.StateDir)
	}
	src, err := filepath.Abs(c.Path)
	if err == nil {
		_, err = os.Lstat(src)
	}
	if err != nil {
		return usageErr("import %s: %w", c.Path, err)
	}
	rep, err := legacyimport.ImportInto(cfg.StateDir, src, legacyimport.Options{
		DefaultTimeout: cfg.DefaultTimeout, MaxLogBytes: cfg.MaxLogBytes, Mode: cfg.Mode, Port: cfg.Port,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	switch {
	case errors.Is(err, store.ErrLocked), errors.Is(err, legacyimport.ErrAlreadyImported), errors.Is(err, legacyimport.ErrInUse):
		return &Error{Code: ExitRefused, Err: err}
	case err != nil:
		return &Error{Code: ExitRefused, Err: fmt.Errorf("import: %w", err)}
	}
	if a.JSON {
		return a.printJSON(rep)
	}
	fmt.Fprintf(a.Out, "imported %d jobs from %s into %s: %d queued, %d interrupted (never run again), %d finished\n",
		rep.Queued+rep.Interrupted+rep.Finished, rep.Source, cfg.StateDir, rep.Queued, rep.Interrupted, rep.Finished)
	if system {
		fmt.Fprintf(a.Out, "the jobs are %s's, the owner of %s\n", rep.Owner, rep.Source)
	}
	if rep.Updated > 0 {
		fmt.Fprintf(a.Out, "%d jobs imported before were updated: the Python tool ran them since\n", rep.Updated)
	}
	if len(rep.PendingResets) > 0 {
		fmt.Fprintf(a.Out, "pending resets of cards %s run before anything else on them\n", joinInts(rep.PendingResets))
	}
	if len(rep.DeadCards) > 0 {
		fmt.Fprintf(a.Out, "dead cards: %s (they stay dead on this boot; a reboot, or reset --device N, revives them)\n", joinInts(rep.DeadCards))
	}
	if len(rep.KeptCards) > 0 {
		fmt.Fprintf(a.Out, "queued's own state of cards %s was kept\n", joinInts(rep.KeptCards))
	}
	if rep.OverBudget > 0 {
		fmt.Fprintf(a.Out, "%d jobs were over queued's record budget of %d bytes (cmd and env): imported cut, never run (job shows why)\n", rep.OverBudget, api.MaxRecordBytes)
	}
	if rep.MissingOutput > 0 {
		fmt.Fprintf(a.Out, "%d jobs had no output file to copy (job shows why)\n", rep.MissingOutput)
	}
	if rep.CutOutputs > 0 {
		fmt.Fprintf(a.Out, "%d output files were larger than TT_DEVICE_MAX_LOG_BYTES: their first and last halves were kept\n", rep.CutOutputs)
	}
	olds := make([]string, 0, len(rep.Renamed))
	for old := range rep.Renamed {
		olds = append(olds, old)
	}
	sort.Strings(olds)
	for _, old := range olds {
		why := ""
		if slices.Contains(rep.TakenIDs, old) {
			why = " (" + old + " is another job's id here; the job keeps it as its legacy_id)"
		}
		fmt.Fprintf(a.Out, "job %s is now %s%s\n", old, rep.Renamed[old], why)
	}
	for _, old := range slices.Sorted(maps.Keys(rep.Refused)) {
		fmt.Fprintf(a.Out, "job %s was not imported: %s\n", old, rep.Refused[old])
	}
	return nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = itoa(n)
	}
	return strings.Join(s, ", ")
}
