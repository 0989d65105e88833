package runner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/queued/execjob"
)

// startWatch follows an iteration's helper through its start by its
// status pipe (see helper.go).
type startWatch struct {
	// done receives one value when the start is decided: nil once the
	// program was executed, else why it was not (a *startError).
	done  chan error
	stage atomic.Value // string: the step the helper reported last
}

// startError is a step of the helper that failed or never finished.
type startError struct {
	stage string
	errno syscall.Errno // 0 when the helper gave a message instead
	msg   string
	died  bool // the helper ended without saying why (killed)
}

func (e *startError) Error() string {
	if e.errno != 0 {
		return e.errno.Error()
	}
	return e.msg
}

func (e *startError) Unwrap() error {
	if e.errno != 0 {
		return e.errno
	}
	return nil
}

// watchStart reads the helper's status pipe sr until it closes.
func watchStart(sr *os.File) *startWatch {
	w := &startWatch{done: make(chan error, 1)}
	w.stage.Store(execjob.StageSetup)
	go func() {
		defer sr.Close()
		sc := bufio.NewScanner(sr)
		for sc.Scan() {
			st, err := execjob.ParseStatus(sc.Text())
			if err != nil {
				continue
			}
			w.stage.Store(st.Stage)
			if st.Errno != 0 || st.Msg != "" {
				w.done <- &startError{stage: st.Stage, errno: st.Errno, msg: st.Msg}
				return
			}
		}
		// The pipe closes at the execve (close-on-exec), or when the
		// helper dies: only the first follows the exec step.
		if stage := w.stage.Load().(string); stage == execjob.StageExec {
			w.done <- nil
		} else {
			w.done <- &startError{stage: stage, msg: "queued's exec helper ended before it started the program", died: true}
		}
	}()
	return w
}

// killedByUs reports whether err says only that the helper died: after a
// kill of ours (a timeout, a stop, the start bound) that is no error of
// the start's.
func killedByUs(err error) bool {
	var se *startError
	return errors.As(err, &se) && se.died
}

// describe is the run's error for a start that failed: which step, for
// whom, on what.
func (w *startWatch) describe(spec *Spec, err error) error {
	var se *startError
	if !errors.As(err, &se) {
		return err
	}
	a := spec.Account
	switch {
	case se.stage == execjob.StageChdir && a != nil:
		// The user's own view: chdir as the user says permission denied
		// for a path below a directory they cannot search, whether it
		// exists or not, so root's view of which paths exist never leaks.
		return fmt.Errorf("working directory %s: %w for user %s (uid %d)", spec.Dir, err, a.Name, a.UID)
	case se.stage == execjob.StageChdir:
		return fmt.Errorf("working directory %s: %w", spec.Dir, err)
	case se.stage == execjob.StageExec && a != nil:
		return fmt.Errorf("starting %s as user %s (uid %d): %w", spec.Shell[0], a.Name, a.UID, err)
	case se.stage == execjob.StageExec:
		return fmt.Errorf("starting %s: %w", spec.Shell[0], err)
	case a != nil:
		return fmt.Errorf("preparing to run as user %s (uid %d): %w", a.Name, a.UID, err)
	}
	return fmt.Errorf("preparing to run the program: %w", err)
}

// inUserStage reports whether the helper last reported a step that
// depends on what the program's user chose (the working directory, the
// shell), not on queued's own setup.
func (w *startWatch) inUserStage() bool {
	st := w.stage.Load().(string)
	return st == execjob.StageChdir || st == execjob.StageExec
}

// stuckAtStop is the run's error for a start a stop cut off in a user
// step; ErrStartHung is in its chain.
func (w *startWatch) stuckAtStop(spec *Spec) error {
	if w.stage.Load().(string) == execjob.StageChdir {
		return fmt.Errorf("entering the working directory %s %w before the job was stopped (a network or FUSE mount that does not answer?)", spec.Dir, ErrStartHung)
	}
	return fmt.Errorf("starting %s %w before the job was stopped", spec.Shell[0], ErrStartHung)
}

// hung is the run's error for a start still going after limit.
func (w *startWatch) hung(spec *Spec, limit time.Duration) error {
	switch w.stage.Load().(string) {
	case execjob.StageChdir:
		return fmt.Errorf("entering the working directory %s %w within %s (a network or FUSE mount that does not answer?); the job was killed",
			spec.Dir, ErrStartHung, limit)
	case execjob.StageExec:
		return fmt.Errorf("starting %s %w within %s; the job was killed", spec.Shell[0], ErrStartHung, limit)
	}
	return fmt.Errorf("preparing to run the program %w within %s; the job was killed", ErrStartHung, limit)
}
