package runner

import (
	"syscall"
	"time"

	"github.com/ttkit/ttkit/queued/account"
)

// Spec describes one program to run.
type Spec struct {
	// Shell is the interpreter prefix, such as {"/usr/bin/bash", "-c"}; the
	// program is its last argument. Shell[0] is an absolute path.
	Shell []string
	// Cmd is the shell program.
	Cmd string
	// Dir is the working directory; empty means queued's own.
	Dir string
	// Env is the complete environment.
	Env []string
	// Account, when set, is the user the program runs as (system mode):
	// the helper sets its supplementary groups, gid and uid before it
	// enters Dir or runs anything, and gives it a session keyring of its
	// own. Nil runs it as queued's own user.
	Account *account.Account
	// Keyring gives the program a new, empty session keyring of its own
	// even without Account: a system-mode queued's root-run resets must
	// not share its keyring either.
	Keyring bool
	// Timeout bounds the whole run, every iteration together, from the
	// start of the first (as the Python tool's job timeout does); on
	// expiry the running iteration is stopped by the kill ladder and the
	// exit code is -9, as the Python tool's was. Zero means no timeout.
	Timeout time.Duration
	// StartTimeout bounds each iteration's start, from the helper's start
	// to the execve of the shell; zero means DefaultStartTimeout. A start
	// that takes longer fails the run.
	StartTimeout time.Duration
	// Repeat is the number of iterations (less than 1 means 1); the first
	// failing iteration ends the run.
	Repeat int
	// KillGrace is the time from SIGINT to SIGTERM on the kill ladder:
	// what tt-metal gets to close the device by itself.
	KillGrace time.Duration
	// TermGrace is the time from SIGTERM to SIGKILL on the kill ladder.
	TermGrace time.Duration
	// IdleTimeout, when above 0, ends an iteration that writes no output
	// for that long (its stdout and stderr together) as hung, by the kill
	// ladder: a job wedged in a card's dispatch prints nothing.
	IdleTimeout time.Duration
	// AbandonAfter bounds the wait for an iteration's leader to die after
	// its SIGKILL (zero means DefaultAbandonAfter): one that does not
	// (asleep in the kernel on a mount that never answers) is abandoned,
	// reported in Result.Abandoned and kept under watch (AbandonedProcs),
	// and the run ends.
	AbandonAfter time.Duration
	// exitWait, when set, replaces waitExited: the tests' seam for a
	// leader whose death is never seen.
	exitWait func(pid int) error
	// TasksMax, when above 0, caps each iteration at that many processes
	// and threads (pids.max of its cgroup), where it has a cgroup of its
	// own (see package jobcgroup); elsewhere it is not enforced.
	TasksMax int
	// OOMScoreAdj, when set, is each iteration's oom_score_adj, set
	// before the switch to Account so the user cannot lower it: the
	// kernel's OOM killer then takes a job before queued.
	OOMScoreAdj *int
	// Notes writes the Python tool's notes into the output, so logs read
	// as they did there: "[tt-device-queue] Repeat i/N" before each
	// iteration of a repeated run, and a line saying the timeout killed it.
	Notes bool
	// Helper is the exec helper's binary (see package execjob); empty
	// means queued-exec beside queued's executable, or else queued itself.
	Helper string
	// SettleLater lets Run return once the run's result and output are
	// known, before what is left of its last iteration is swept and its
	// leader reaped: that goes on in the background, and Result.Settled
	// closes when it is done. The caller must start nothing else on the
	// run's cards before (the scheduler commits the job's end and the
	// next start meanwhile).
	SettleLater bool
	// Prepared, if set, is the first iteration's helper, handed its
	// request ahead of Run (see Prepare); Run sends it its Go byte, or
	// cancels it when nothing is to start.
	Prepared *Prepared
	// OnStart, if set, is called as each iteration's process starts:
	// queued's helper, which becomes the program (Result.Iterations counts
	// only those that did). The scheduler records the process for
	// recovery and shows it at once, even while its start is stuck. It
	// must not block: the timeout and stop are not watched while it runs.
	OnStart func(Proc)
}

// Proc identifies a started iteration: its leader's PID, which is also its
// process group id and its session id, and the leader's start time (field
// 22 of /proc/<pid>/stat, clock ticks since boot), which tells it from a
// later process that reuses the PID.
type Proc struct {
	PID   int
	Start uint64
}

// Result is how a run ended.
type Result struct {
	// ExitCode is the last iteration's exit status; a signal N is -N; -9
	// after a timeout; -1 when the program could not be started, or when
	// the stop came between two iterations or before the program started.
	ExitCode int
	// Iterations counts iterations whose program started; one that could
	// not be started, or was stopped or timed out before it did, is no
	// iteration.
	Iterations int
	// TimedOut is set when the run's timeout ended it.
	TimedOut bool
	// Stopped is set when the stop channel closed during the run; a
	// stopped run's ExitCode is never 0 (-1 when its last iteration exited
	// 0 as the stop came).
	Stopped bool
	// Err says why the program could not be started, if it could not; with
	// TimedOut or Stopped, what the start was still doing then.
	Err error
	// Hung is set when the run's last iteration wrote no output for
	// Spec.IdleTimeout and was stopped for it.
	Hung bool
	// KillSignal is the last rung of the kill ladder the run's last
	// iteration was sent (SIGINT, SIGTERM or SIGKILL), 0 when it was not
	// stopped: a job that needed SIGKILL may have left its card wedged.
	KillSignal syscall.Signal
	// killText says which signals were sent, for the output's notes.
	killText string
	// Settled, when not nil, closes once what was left of the run's last
	// iteration is killed and its leader reaped (Spec.SettleLater); nil
	// means that was done before Run returned.
	Settled <-chan struct{}
	// Abandoned, when set, is the iteration's leader that SIGKILL did not
	// end within Spec.AbandonAfter: the run ended without it (ExitCode
	// -9), and it is watched until it dies (see AbandonedProcs).
	Abandoned *Abandoned
}
