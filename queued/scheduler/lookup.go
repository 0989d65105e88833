package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// jobIndex finds jobs: by id prefix, by id, by filter, and with their
// output for a long-poll. Active jobs come from memory, the rest from the
// store.
type jobIndex struct{ *core }

// maxListedMatches is how many matches an ambiguous prefix's error names.
const maxListedMatches = 5

// resolve turns a unique id prefix into the full id: ErrNotFound when no
// job matches, ErrAmbiguous when several do.
func (s jobIndex) resolve(prefix string) (string, error) {
	found := map[string]bool{}
	s.mu.Lock()
	for id, j := range s.jobs {
		if j.durable && len(id) >= len(prefix) && id[:len(prefix)] == prefix {
			found[id] = true
		}
	}
	s.mu.Unlock()
	ids, err := s.st.Match(prefix, maxListedMatches+1)
	if err != nil {
		return "", err
	}
	for _, id := range ids {
		found[id] = true
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("job %s: %w", prefix, ErrNotFound)
	case 1:
		for id := range found {
			return id, nil
		}
	}
	list := make([]string, 0, len(found))
	for id := range found {
		list = append(list, id)
	}
	sort.Strings(list)
	more := ""
	if len(list) > maxListedMatches {
		list, more = list[:maxListedMatches], " and more"
	}
	return "", fmt.Errorf("%q matches %s%s; give more of the id: %w", prefix, strings.Join(list, ", "), more, ErrAmbiguous)
}

// job returns a job by full id, brief (its command a preview, no
// environment), from memory when it is active, else from the store.
func (s jobIndex) job(id string) (JobInfo, error) {
	s.mu.Lock()
	if j := s.jobs[id]; j != nil && j.durable {
		info := s.infoLocked(j)
		s.mu.Unlock()
		return info, nil
	}
	s.mu.Unlock()
	rec, err := s.st.Brief(id)
	if errors.Is(err, store.ErrNotFound) {
		return JobInfo{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return JobInfo{}, err
	}
	return JobInfo{Job: rec}, nil
}

// record returns a job by full id, whole: as job, with its command and
// environment read from the store.
func (s jobIndex) record(id string) (JobInfo, error) {
	info, err := s.job(id)
	if err != nil || !info.Brief {
		return info, err
	}
	whole, err := s.st.Job(id)
	if errors.Is(err, store.ErrNotFound) {
		return JobInfo{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return JobInfo{}, err
	}
	if !whole.Brief {
		info.Job = info.Job.WithSpec(whole.Spec())
	}
	return info, nil
}

// wholeRecord is rec, a brief record from memory, with its command and
// environment read from the store, for a job about to start; a reset or
// a hold runs nothing of its record and is returned as it is. Only the
// spec is read: the rest of the record is rec.
func (s *core) wholeRecord(rec store.Job) (store.Job, error) {
	if rec.Kind != store.KindJob || !rec.Brief {
		return rec, nil
	}
	sp, err := s.st.Spec(rec.ID)
	if err != nil {
		return rec, fmt.Errorf("reading the command and environment of job %s from the store: %w", rec.ID, err)
	}
	return rec.WithSpec(sp), nil
}

// Watch is a job's state and output at one moment, with channels that close
// when either changes, so a long-poll waits without polling.
type Watch struct {
	Info JobInfo
	// Path is the output file.
	Path string
	// Done means the job is over and its output file complete.
	Done bool
	// OutputChanged closes when output grows or the output file is closed;
	// nil when there is no live output.
	OutputChanged <-chan struct{}
	// JobChanged closes at the job's next transition; nil when Done.
	JobChanged <-chan struct{}
	// Read reads output by offset (runner.Log.Read, or runner.ReadOutput
	// of the file once the job's log is gone): data, next offset, size.
	Read func(offset, limit int64) ([]byte, int64, int64, error)
}

// fileReader reads a job's output file laid out as its record says.
func fileReader(path string, rec *store.Job) func(offset, limit int64) ([]byte, int64, int64, error) {
	lay := runner.Layout{CutAt: rec.LogCutAt, Cut: rec.LogCutBytes}
	return func(offset, limit int64) ([]byte, int64, int64, error) {
		return runner.ReadOutput(path, lay, offset, limit)
	}
}

// watch returns the job's current Watch. Read the output after calling it:
// the channels were taken first, so no change is missed.
func (s jobIndex) watch(id string) (Watch, error) {
	s.mu.Lock()
	if j := s.jobs[id]; j != nil && j.durable {
		w := Watch{Info: s.infoLocked(j), Path: s.outputPath(id)}
		w.Read = fileReader(w.Path, &w.Info.Job)
		if j.log != nil {
			w.Read = j.log.Read
		}
		if j.rec.State == store.StateDone {
			w.Done = true
		} else {
			w.JobChanged = j.changed
			if j.log != nil {
				if st := j.log.State(); !st.Closed {
					w.OutputChanged = st.Changed
				}
			}
		}
		s.mu.Unlock()
		return w, nil
	}
	s.mu.Unlock()
	info, err := s.job(id)
	if err != nil {
		return Watch{}, err
	}
	// A record not in memory is settled, so it is done (or the service
	// restarted past it and it is done too).
	path := s.outputPath(id)
	return Watch{Info: info, Path: path, Done: info.State == store.StateDone, Read: fileReader(path, &info.Job)}, nil
}

// infoLocked is a job's record plus position and estimate.
func (s *core) infoLocked(j *job) JobInfo {
	info := JobInfo{Job: j.rec, Held: j.held, WaitsFor: j.waitsFor()}
	cards := s.cardsOf(j)
	if len(cards) == 0 {
		return info
	}
	now := s.opt.Now()
	switch j.rec.State {
	case store.StateQueued:
		// A job of several cards starts when the last of them is free for
		// it: its place and wait are the worst over its cards.
		for _, c := range cards {
			info.EstimatedRun, info.EstimateKnown = c.runEstimate(j), c.estimateKnown(j)
			wait := c.currentRemaining(now)
			for i, q := range c.queue {
				if q == j {
					info.Position = max(info.Position, i+1)
					info.EstimatedWait = max(info.EstimatedWait, wait)
					break
				}
				wait += c.runEstimate(q)
			}
		}
	case store.StateRunning:
		c := cards[0]
		info.EstimatedRun, info.EstimateKnown = c.runEstimate(j), c.estimateKnown(j)
		info.EstimatedWait = c.remaining(j, now)
		info.Overdue = c.overdue(j, now)
		if j.log != nil {
			ls := j.log.State()
			info.LogBytes, info.LogTruncated, info.DroppedLogBytes = ls.Size, ls.Truncated, ls.Dropped
			info.LogCutAt, info.LogCutBytes = ls.Layout.CutAt, ls.Layout.Cut
		}
	}
	return info
}
