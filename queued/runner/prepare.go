package runner

import (
	"os"

	"github.com/ttkit/ttkit/queued/execjob"
)

// A job's start is committed before its program runs, so that a crash
// never runs a job twice; that commit (two fdatasync on our machines)
// used to come before anything of the start. Prepare takes the helper's
// part off that wait (issue 41): the helper of the run's first
// iteration is handed its request while the commit is in flight, takes
// every step (credentials, keyring, working directory) and waits for its
// Go byte, which Run sends. Without it (Cancel, or a queued that dies
// meanwhile and so closes the request) the helper exits and the program
// never runs.

// handOff delivers a helper's request and then, once decided, its Go
// byte.
type handOff struct {
	verdict chan bool
	// w is the request pipe, written here and not by a goroutine: the
	// request was small enough to go at once, and so does the Go byte
	// (a goroutine's wake on the way was a tenth of a millisecond of
	// every dispatch). Nil once closed, or when a goroutine writes.
	w *os.File
}

// syncRequestMax bounds the requests written at once: the request pipe
// is new and empty, and a pipe holds at least a page, and usually 64
// KiB, before a write waits for the helper to read.
const syncRequestMax = 4096 - 1

// sendRequest writes req to the helper's request pipe w and keeps w
// for the Go byte, which goes once released; a request larger than
// syncRequestMax is written by a goroutine while the helper reads it
// (one that dies meanwhile ends the write), which then writes the Go
// byte as it is decided.
func sendRequest(w *os.File, req *execjob.Request) *handOff {
	body := req.Encode()
	if len(body) <= syncRequestMax {
		if _, err := w.Write(body); err != nil {
			w.Close()
			return &handOff{}
		}
		return &handOff{w: w}
	}
	h := &handOff{verdict: make(chan bool, 1)}
	go func() {
		defer w.Close()
		if _, err := w.Write(body); err != nil {
			return
		}
		if <-h.verdict {
			w.Write([]byte{execjob.Go})
		}
	}()
	return h
}

// release lets the helper execute its program; cancel closes its request
// without the Go byte. Only the first of them counts.
func (h *handOff) release() { h.decide(true) }
func (h *handOff) cancel()  { h.decide(false) }

func (h *handOff) decide(ok bool) {
	switch {
	case h == nil:
	case h.w != nil:
		if ok {
			h.w.Write([]byte{execjob.Go})
		}
		h.w.Close()
		h.w = nil
	case h.verdict != nil:
		select {
		case h.verdict <- ok:
		default:
		}
	}
}

// Prepared is the helper of a run's first iteration, started (or taken
// from the spares) and handed its request ahead of Run. Pass it to Run
// in Spec.Prepared with the same output Log, or end it with Cancel.
type Prepared struct {
	r    *running
	err  error
	used bool
}

// Prepare hands a waiting spare helper (spare.go) spec's first
// iteration, without the Go byte. Its output goes to out, which must be
// the Log the run is given. Without a spare (the first job, or where a
// cgroup of its own holds each job) it prepares nothing and Run starts
// the helper itself: starting one costs CPU the commit beside it would
// wait for, and a stop in the meantime would find the job not yet
// started. An error to start is kept for Run to report, as a start of
// its own would.
func Prepare(spec Spec, out *Log) *Prepared {
	r, err := start(&spec, out, true)
	return &Prepared{r: r, err: err}
}

// take hands the prepared iteration to its run, which releases it once
// its process is recorded. Nil, or already taken, means the run starts
// its own.
func (p *Prepared) take() (*running, error, bool) {
	if p == nil || p.used {
		return nil, nil, false
	}
	p.used = true
	if p.r == nil && p.err == nil {
		return nil, nil, false // nothing was prepared
	}
	return p.r, p.err, true
}

// Cancel ends a prepared helper that no run took; it never executes the
// program. The helper is killed (whatever step it is in: a working
// directory that never answers included) and reaped in the background.
// Cancel after Run, or twice, does nothing.
func (p *Prepared) Cancel() {
	if p == nil || p.used {
		return
	}
	p.used = true
	if p.r == nil {
		return
	}
	p.r.handOff.cancel()
	p.r.killAll()
	go p.r.finish()
}
