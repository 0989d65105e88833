package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/internal/procthread"
)

// JobEnvVar is the variable every job process carries with its job id; it
// finds a job's processes when its process group was never recorded.
const JobEnvVar = "TT_QUEUE_JOB_ID"

// Leftover names an interrupted job whose processes may still be alive.
type Leftover struct {
	// JobID is matched against TT_QUEUE_JOB_ID in /proc/<pid>/environ.
	JobID string
	// PGID and LeaderStart are the recorded process group and its leader's
	// start time; zero when the record never became durable.
	PGID        int
	LeaderStart uint64
	// UID is the user the job ran as. Its marker is text that user wrote
	// (or the queue did, for them): a process is killed by marker only if
	// this user could signal it, so root never kills another user's
	// process because of text in its environment.
	UID uint32
}

// ErrSurvivors means processes of an interrupted job were still alive
// after the kill deadline.
var ErrSurvivors = errors.New("leftover processes survived SIGKILL")

// KillLeftovers SIGKILLs what is left of interrupted jobs: each recorded
// process group whose leader is alive with the recorded start time (a PID
// reused by an unrelated process has another start time and is spared),
// with what that leader's session and audit session hold (see trace), and
// every process of the job's user whose environment carries
// TT_QUEUE_JOB_ID=<one of the ids> (the record of the group may have been
// lost in a crash; a job's children inherit the variable). It repeats until a scan finds nothing
// alive, for at most timeout, and returns the PIDs it signalled.
func KillLeftovers(procRoot string, jobs []Leftover, timeout time.Duration) ([]int, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	marks := make([]mark, len(jobs))
	for i, j := range jobs {
		marks[i] = mark{text: []byte(JobEnvVar + "=" + j.JobID + "\x00"), uid: j.UID}
	}
	self := os.Getpid()
	// A recorded leader still alive (the same process: its start time)
	// gives its job's audit session and session, which find what left its
	// process group and dropped its marker. Read before the first kill.
	var traces []trace
	for _, j := range jobs {
		if st, err := readStat(procRoot, j.PGID); j.PGID > 0 && err == nil && st.start == j.LeaderStart && !ended(procRoot, strconv.Itoa(j.PGID), st) {
			traces = append(traces, trace{sid: j.PGID, started: j.LeaderStart, audit: jobAuditSession(procRoot, j.PGID)})
		}
	}
	var killed []int
	deadline := time.Now().Add(timeout)
	for {
		alive := 0
		for _, tr := range traces {
			for _, pid := range scanJob(procRoot, tr, self) {
				alive++
				syscall.Kill(pid, syscall.SIGKILL)
				killed = append(killed, pid)
			}
		}
		for _, j := range jobs {
			if j.PGID <= 0 {
				continue
			}
			st, err := readStat(procRoot, j.PGID)
			if err != nil || st.start != j.LeaderStart || ended(procRoot, strconv.Itoa(j.PGID), st) || st.pgrp != j.PGID {
				continue
			}
			alive++
			syscall.Kill(-j.PGID, syscall.SIGKILL)
			killed = append(killed, j.PGID)
		}
		pids, err := scanEnv(procRoot, marks, self)
		if err != nil {
			return killed, err
		}
		for _, pid := range pids {
			alive++
			syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
		if alive == 0 {
			return killed, nil
		}
		if time.Now().After(deadline) {
			return killed, fmt.Errorf("%d process(es) of interrupted jobs: %w", alive, ErrSurvivors)
		}
		time.Sleep(10 * time.Millisecond) // give SIGKILL time to land before rescanning
	}
}

// mark is a job's marker as found in an environment ("NAME=value\x00")
// and the user the job ran as: only that user's processes are taken by it.
type mark struct {
	text []byte
	uid  uint32
}

// marksOf is the one mark of a job with marker value marker run as uid,
// or none for "".
func marksOf(marker string, uid uint32) []mark {
	if marker == "" {
		return nil
	}
	return []mark{{text: []byte(JobEnvVar + "=" + marker + "\x00"), uid: uid}}
}

// scanEnv returns the live processes (not zombies, not self) whose
// environment contains one of marks and that the mark's user could signal.
// Processes that vanish or cannot be read (another user's, when not root)
// are skipped.
func scanEnv(procRoot string, marks []mark, self int) ([]int, error) {
	names, err := pidNames(procRoot)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", procRoot, err)
	}
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		if hasMark(procRoot, name, marks) {
			if st, err := readStat(procRoot, pid); err == nil && !ended(procRoot, name, st) {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// stragglerTimeout bounds how long killStragglers keeps looking.
const stragglerTimeout = 2 * time.Second

// trace is what finds an ended iteration's processes outside its process
// group, where no cgroup holds them: its session (the leader's pid, still
// unreaped, so no other session can have that id), its audit session
// (kernel-assigned, which none of its processes can shed; 0 for none of
// its own) and its marker (text in the environment, taken only from
// processes its user could signal). Only processes started since the
// leader (started, clock ticks since boot) can be the job's, so older
// ones are not looked at further than their stat.
type trace struct {
	sid     int
	started uint64
	audit   uint32
	marks   []mark
	// win, when set, holds every PID handed out since the leader (see
	// pidwindow.go): no process of the job lies outside it.
	win *pidWindow
}

// sweep SIGKILLs what is left of r's iteration outside its process group
// (see trace). Call it only before the leader is reaped.
func (r *running) sweep() {
	killStragglers("/proc", trace{sid: r.proc.PID, started: r.proc.Start,
		audit: jobAuditSession("/proc", r.proc.PID), marks: marksOf(r.marker, r.uid)}, r.clock)
}

// killStragglers SIGKILLs the processes of tr, repeating until a scan
// finds none, for at most stragglerTimeout. Each scan looks only at the
// PIDs handed out since the leader when clock (read before the leader's
// start) bounds them (see windowSince): a scan that finds nothing counts
// only if no PID was handed out while it ran, else the new ones are
// looked at too; after a few such rounds (a host that forks without
// pause) it looks at every process once more, as it does without a
// window.
func killStragglers(procRoot string, tr trace, clock pidClock) {
	self := os.Getpid()
	deadline := time.Now().Add(stragglerTimeout)
	windowed := 0 // scans in a row that found nothing but saw new PIDs
	for {
		tr.win = nil
		if windowed < maxWindowedScans {
			tr.win = windowSince(procRoot, tr.sid, clock)
		}
		pids := scanJob(procRoot, tr, self)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(pids) == 0 && tr.win != nil {
			if last, ok := readInt(procRoot+"/sys/kernel/ns_last_pid", make([]byte, 32)); ok && last == tr.win.hi {
				return // no PID handed out since the scan began
			}
			windowed++
			continue
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond) // give SIGKILL time to land before rescanning
	}
}

// maxWindowedScans bounds the scans in a row that find nothing while PIDs
// are handed out meanwhile before one scan of every process ends it.
const maxWindowedScans = 3

// scanJob lists the live processes of tr other than its leader and self:
// those in its session, and those started at or after its leader that are
// in its audit session or carry its marker.
func scanJob(procRoot string, tr trace, self int) []int {
	// A small window's PIDs are tried one by one; else /proc is listed.
	names, ok := tr.win.names()
	if !ok {
		var err error
		if names, err = pidNames(procRoot); err != nil {
			return nil
		}
	}
	buf := make([]byte, statMax)
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self || pid == tr.sid || !tr.win.holds(pid) {
			continue
		}
		st, err := readStatFile(procRoot+"/"+name+"/stat", buf)
		if err != nil || ended(procRoot, name, st) || waitingSpare(st.session) {
			continue
		}
		if tr.takes(procRoot, name, st, buf) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// takes reports whether the process /proc/<name>, whose stat is st, is
// one of tr's (buf is scratch space).
func (tr trace) takes(procRoot, name string, st procStat, buf []byte) bool {
	switch {
	case st.session == tr.sid:
		return true
	case st.start < tr.started:
		return false
	}
	if tr.audit != 0 {
		if id, ok := auditSessionOf(procRoot, name, buf); ok && id == tr.audit {
			return true
		}
	}
	return len(tr.marks) > 0 && hasMark(procRoot, name, tr.marks)
}

// pidNames lists the names in procRoot, unsorted (the scans have no use
// for an order, and os.ReadDir's sort and entries cost more than the list).
func pidNames(procRoot string) ([]string, error) {
	d, err := os.Open(procRoot)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// hasMark reports whether the environment of /proc/<name> holds one of
// marks and that mark's user could signal the process (see signalableBy).
func hasMark(procRoot, name string, marks []mark) bool {
	env, err := environ(procRoot, name)
	if err != nil || len(env) == 0 {
		return false
	}
	env = append([]byte{0}, env...) // so every variable starts after a NUL
	env = append(env, 0)
	for _, m := range marks {
		if bytes.Contains(env, append([]byte{0}, m.text...)) && signalableBy(procRoot, name, m.uid) {
			return true
		}
	}
	return false
}

// environ reads the environment of /proc/<name>. A process whose main
// thread exited answers ESRCH for it while its other threads run on:
// their environment, the process's, is read instead (see procthread).
func environ(procRoot, name string) ([]byte, error) {
	env, err := readWhole(filepath.Join(procRoot, name, "environ"), make([]byte, 4096))
	if !errors.Is(err, syscall.ESRCH) {
		return env, err
	}
	var thread []byte
	if procthread.Other(filepath.Join(procRoot, name), func(td string) bool {
		var terr error
		thread, terr = readWhole(filepath.Join(td, "environ"), make([]byte, 4096))
		return terr == nil
	}) == "" {
		return nil, err
	}
	return thread, nil
}

// signalableBy reports whether uid, unprivileged, could signal the process
// /proc/<name>: uid is its real or saved uid (the kernel's own rule for a
// sender whose real and effective uid are uid). A marker is text in an
// environment, which any user can write into their own processes: root
// kills by it only what the job's own user could have killed.
func signalableBy(procRoot, name string, uid uint32) bool {
	b, err := readWhole(filepath.Join(procRoot, name, "status"), make([]byte, 4096))
	if err != nil {
		return false
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest) // real, effective, saved, filesystem
		if len(f) < 3 {
			return false
		}
		want := strconv.FormatUint(uint64(uid), 10)
		return string(f[0]) == want || string(f[2]) == want
	}
	return false
}
