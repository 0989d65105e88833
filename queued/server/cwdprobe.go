package server

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// cwdProbeTimeout bounds the submit-time look at a working directory: one
// on a network or FUSE mount that stopped answering would otherwise hold
// the request (and an OS thread) forever.
const cwdProbeTimeout = 2 * time.Second

// maxStuckProbes bounds the looks still blocked in the kernel past their
// timeout; each holds a thread until its mount answers or is aborted.
const maxStuckProbes = 8

// errProbeHangs is a working directory whose file system does not answer.
var errProbeHangs = errors.New("did not answer")

// cwdProber looks at the working directories of submissions, within
// cwdProbeTimeout each, and counts the looks still blocked past it.
type cwdProber struct {
	stuck atomic.Int64 // looks past their timeout, still blocked
}

// probeDir stats dir for a user-mode submission, within cwdProbeTimeout.
// A look that does not finish in time is left to finish on its own (a
// stat cannot be cancelled) and counted in p.stuck until it does; while
// maxStuckProbes are, further looks are refused at once rather than add
// to them.
func (p *cwdProber) probeDir(dir string) (os.FileInfo, error) {
	if n := p.stuck.Load(); n >= maxStuckProbes {
		return nil, fmt.Errorf("%d earlier looks at working directories are still waiting for their file systems: %w", n, errProbeHangs)
	}
	type answer struct {
		fi  os.FileInfo
		err error
	}
	done := make(chan answer, 1)
	var late atomic.Bool // the caller gave up: this look counts as stuck
	go func() {
		fi, err := os.Stat(dir)
		done <- answer{fi, err}
		if late.Swap(false) {
			p.stuck.Add(-1)
		}
	}()
	t := time.NewTimer(cwdProbeTimeout)
	defer t.Stop()
	select {
	case a := <-done:
		return a.fi, a.err
	case <-t.C:
		p.stuck.Add(1)
		late.Store(true)
		select {
		case a := <-done: // it answered just now
			if late.Swap(false) {
				p.stuck.Add(-1)
			}
			return a.fi, a.err
		default:
		}
		return nil, fmt.Errorf("its file system %w within %s (a network or FUSE mount that does not answer?)", errProbeHangs, cwdProbeTimeout)
	}
}
