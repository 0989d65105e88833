package legacyimport

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// copyOutputs copies each of jobs' old output file to queued's output
// directory (mode 0600) and sets the record's log fields; it returns the
// files it created. Each old file is read as the database's owner and
// only if it is theirs (source.openOwned), at most limit bytes of it (see
// copyBounded). A file that is missing or refused leaves the job without
// output and says why in LogError. The output of a reset is not copied
// in system mode: reset records are everyone's to read there, and the
// file is one the database's owner chose.
func copyOutputs(jobs []store.Job, c *converted, s *source, o Options) ([]string, error) {
	outDir, limit, system := o.OutputDir, o.MaxLogBytes, o.Mode.System()
	if len(c.outputs) == 0 || len(jobs) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", outDir, err)
	}
	var created []string
	for i := range jobs {
		j := &jobs[i]
		src, ok := c.outputs[j.ID]
		if !ok {
			continue
		}
		if system && j.Kind == store.KindReset {
			j.LogError = "output not imported: a reset's record is everyone's to read in system mode, and its output file was the importing user's"
			continue
		}
		dst := filepath.Join(outDir, j.ID+".log")
		in, fi, err := s.openOwned(src, fileID{})
		if err != nil {
			c.report.MissingOutput++
			j.LogError = fmt.Sprintf("output not imported: %v", err)
			continue
		}
		lay, size, err := copyBounded(in, fi.Size(), dst, limit)
		in.Close()
		if size >= 0 {
			created = append(created, dst)
		}
		if err != nil {
			c.report.MissingOutput++
			j.LogError = fmt.Sprintf("output not imported: %v", err)
			continue
		}
		j.LogBytes = size
		if lay.Cut > 0 {
			j.LogTruncated, j.LogCutAt, j.LogCutBytes = true, lay.CutAt, lay.Cut
			j.DroppedLogBytes += lay.Cut
			c.report.CutOutputs++
		}
		if j.Outcome == store.OutcomeInterrupted && fi.ModTime().After(j.FinishedAt) {
			// The job wrote output then: it was still running.
			j.FinishedAt = fi.ModTime()
			if t := o.Now(); j.FinishedAt.After(t) {
				j.FinishedAt = t
			}
		}
	}
	return created, nil
}

// copyBounded copies size bytes of in to a new file dst (0600), keeping at
// most limit of them as queued's own output files do (runner.Log): a
// larger file keeps its first half of limit and its last half, with
// runner.CutMarker between them saying how much was left out; only those
// parts are read. It returns the layout, the size of the output it
// stands for (size), or -1 when dst was not created.
func copyBounded(in io.ReaderAt, size int64, dst string, limit int64) (runner.Layout, int64, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return runner.Layout{}, -1, fmt.Errorf("creating %s: %w", dst, err)
	}
	var lay runner.Layout
	limit = max(limit, 2)
	if size <= limit {
		err = copyRange(out, in, 0, size)
	} else {
		head := limit / 2
		lay = runner.Layout{CutAt: head, Cut: size - limit}
		err = copyRange(out, in, 0, head)
		if err == nil {
			_, err = io.WriteString(out, runner.CutMarker(lay.Cut))
		}
		if err == nil {
			err = copyRange(out, in, size-(limit-head), limit-head)
		}
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return lay, 0, fmt.Errorf("copying to %s: %w", dst, err)
	}
	return lay, size, nil
}

// copyRange copies n bytes of in from off; a file that shrank meanwhile
// is an error.
func copyRange(out io.Writer, in io.ReaderAt, off, n int64) error {
	got, err := io.Copy(out, io.NewSectionReader(in, off, n))
	if err == nil && got != n {
		err = errors.New("the file shrank while it was read")
	}
	return err
}
