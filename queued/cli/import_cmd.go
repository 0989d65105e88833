package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/store"
)

// ImportCmd brings the Python tt-device-queue's jobs into queued's store.
// It writes the store itself rather than asking the daemon: the import is
// one bbolt transaction beside the daemon's own start-time recovery, which
// then treats the imported jobs exactly like its own (queues, dead cards,
// estimates), so the daemon must not be running on the state directory;
// the store's file lock enforces that.
type ImportCmd struct {
	Path string `arg:"" placeholder:"PATH" help:"The Python tool's jobs.sqlite3, or the directory holding it (its logs-v2/)."`
}

// Run imports and prints what was imported.
func (c *ImportCmd) Run(a *App) error {
	dir, err := config.StateDir(os.LookupEnv)
	if err != nil {
		return usageErr("%w", err)
	}
	src, err := filepath.Abs(c.Path)
	if err == nil {
		_, err = os.Stat(src)
	}
	if err != nil {
		return usageErr("import %s: %w", c.Path, err)
	}
	cfg, err := config.FromEnv(os.LookupEnv)
	if err != nil {
		cfg = config.Default()
	}
	rep, err := legacyimport.ImportInto(dir, src, legacyimport.Options{
		DefaultTimeout: cfg.DefaultTimeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	switch {
	case errors.Is(err, store.ErrLocked), errors.Is(err, legacyimport.ErrAlreadyImported):
		return &Error{Code: ExitRefused, Err: err}
	case err != nil:
		return &Error{Code: ExitRefused, Err: fmt.Errorf("import: %w", err)}
	}
	if a.JSON {
		return a.printJSON(rep)
	}
	fmt.Fprintf(a.Out, "imported %d jobs from %s into %s: %d queued, %d interrupted (never run again), %d finished\n",
		rep.Queued+rep.Interrupted+rep.Finished, rep.Source, dir, rep.Queued, rep.Interrupted, rep.Finished)
	if len(rep.DeadCards) > 0 {
		fmt.Fprintf(a.Out, "dead cards: %s (they stay dead on this boot; a reboot, or reset --device N, revives them)\n", joinInts(rep.DeadCards))
	}
	if len(rep.KeptCards) > 0 {
		fmt.Fprintf(a.Out, "queued's own state of cards %s was kept\n", joinInts(rep.KeptCards))
	}
	if rep.MissingOutput > 0 {
		fmt.Fprintf(a.Out, "%d jobs had no output file to copy (job shows why)\n", rep.MissingOutput)
	}
	olds := make([]string, 0, len(rep.Renamed))
	for old := range rep.Renamed {
		olds = append(olds, old)
	}
	sort.Strings(olds)
	for _, old := range olds {
		fmt.Fprintf(a.Out, "job %s is now %s\n", old, rep.Renamed[old])
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
