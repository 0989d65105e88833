package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/fusetest"
	"github.com/ttkit/ttkit/internal/ptytest"
	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// hasCapSysResource reports whether this process holds CAP_SYS_RESOURCE
// (bit 24 of CapEff), as queued started by it does.
func hasCapSysResource(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<24) != 0
		}
	}
	return false
}

// typeEnv makes the test binary a job program that opens the controlling
// terminal and pushes the variable's value into its input (TIOCSTI), as
// if typed: into the shell queued was started from, were it a job's
// terminal.
const typeEnv = "QUEUED_TEST_TYPE"

func typeIntoTerminal(text string) int {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		fmt.Println("no terminal:", err)
		return 0
	}
	defer f.Close()
	for i := 0; i < len(text); i++ {
		b := text[i]
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&b))); errno != 0 {
			fmt.Println("TIOCSTI:", errno)
			return 0
		}
	}
	fmt.Println("typed")
	return 0
}

// A job cannot reach the terminal queued was started from: queued started
// by hand from a root shell, a job's TIOCSTI on /dev/tty would type a
// command into that shell. Each job runs in a session of its own, with no
// controlling terminal.
func TestQueued_JobCannotTypeIntoQueuedsTerminal(t *testing.T) {
	t.Parallel()
	p := ptytest.Open(t)
	state, work := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0")
	cmd.Stdin = p.TTY
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	d := startDaemonCmd(t, state, cmd)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := "ttq-typed-by-a-job-" + strconv.Itoa(os.Getpid())
	job := d.queue("0", work, fmt.Sprintf("%s='id > %s\n' exec %s", typeEnv, marker, self))
	if _, err := d.client.WaitResult(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	out := d.logs(job)
	if !strings.Contains(out, "no terminal:") {
		t.Errorf("the job reached queued's terminal: %q", out)
	}
	if strings.Contains(p.Text(), marker) {
		t.Errorf("the job typed into queued's terminal: %q", p.Text())
	}
}

// A descriptor queued inherited (a wrapper's `3</etc/shadow`) never
// reaches a job: queued marks every descriptor above 2 close-on-exec at
// start.
func TestQueued_InheritedDescriptorDoesNotReachJobs(t *testing.T) {
	t.Parallel()
	state, work := t.TempDir(), t.TempDir()
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte("root:hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0")
	cmd.ExtraFiles = []*os.File{f} // descriptor 3 in queued, not close-on-exec
	d := startDaemonCmd(t, state, cmd)
	job := d.queue("0", work, "{ cat <&3; } 2>/dev/null || echo closed")
	if _, err := d.client.WaitResult(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if out := d.logs(job); out != "closed\n" {
		t.Errorf("the job read queued's inherited descriptor 3: %q", out)
	}
	// queued marked it close-on-exec at start, not only each job's
	// helper at its own: queued keeps it (a wrapper's lock stays held),
	// and nothing queued ever executes gets it.
	pid := cmd.Process.Pid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); target != secret {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var flags uint64
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ = strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			}
		}
		if flags&unix.O_CLOEXEC == 0 {
			t.Errorf("queued holds the inherited %s as descriptor %s without close-on-exec (flags %o)", secret, fd.Name(), flags)
		}
	}
}

// A working directory on a mount that never answers cannot wedge a card:
// the job's timeout ends it, a kill ends it, a reset ends it, and the next
// job on the card runs.
func TestSystem_WorkingDirectoryThatHangs(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	hang, _ := fusetest.HangingDir(t)
	s := startSystem(t, t.TempDir(), "TT_DEVICE_RESET_CMD=true #", "TT_DEVICE_HEALTH_CHECK_CMD=true")
	body := func(timeout int) string {
		return fmt.Sprintf(`{"cmd":"echo never","cwd":%q,"device_id":"0","timeout":%d}`, hang, timeout)
	}
	queue := func(u usertest.User, b string) string {
		r := s.as(u, "POST", "/queue", b)
		if r.code != 201 {
			t.Fatalf("queue: %v", r)
		}
		return strings.Split(strings.Split(r.body, `"job_id":"`)[1], `"`)[0]
	}
	timedOut := queue(alice, body(2))
	killed := queue(alice, body(0))
	reset := queue(alice, body(120)) // long enough that on a busy machine the reset, not its timeout, ends it
	after := s.queueAs(bob, bob.Home, "echo ran")

	began := time.Now()
	if j := s.waitResult(timedOut); j.Outcome != "timeout" || time.Since(began) > 20*time.Second {
		t.Errorf("a job stuck entering its directory with a 2 s timeout: %s %q after %s", j.Outcome, j.Error, time.Since(began))
	}
	waitRunning := func(id string) {
		deadline := time.Now().Add(20 * time.Second)
		for s.job(id).State != "running" {
			if time.Now().After(deadline) {
				t.Fatalf("job %s never started", id)
			}
			time.Sleep(10 * time.Millisecond) // polling the job's state
		}
	}
	waitRunning(killed)
	if _, err := s.client.Kill(ctx(t), killed); err != nil {
		t.Fatal(err)
	}
	if j := s.waitResult(killed); j.Outcome != "killed" {
		t.Errorf("a killed job stuck entering its directory: %s %q", j.Outcome, j.Error)
	}
	// A reset stops a job still entering its directory: it fails, saying
	// its start was stuck, rather than being queued again to get stuck once
	// more behind the reset.
	waitRunning(reset)
	rs, err := s.client.Reset(ctx(t), api.ResetRequest{DeviceID: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if j := s.waitResult(rs.Resets[0].ResetJobID); j.Outcome != "success" {
		t.Errorf("the reset of the card of a job stuck entering its directory: %s %q", j.Outcome, j.Error)
	}
	if j := s.waitResult(reset); j.Outcome != "failure" || !strings.Contains(j.Error, "stopped by a reset of card 0") {
		t.Errorf("the job the reset stopped before it started: %s %q, want failed, saying its start was stuck", j.Outcome, j.Error)
	}
	if j := s.waitResult(after); j.Outcome != "success" {
		t.Errorf("the next job on the card: %s %q", j.Outcome, j.Error)
	}
}

// A job stays in its box, as its user: it cannot signal queued or another
// user's job, read queued's state, lower its OOM score below the queue's
// choice, or gain privileges it did not have; it gets the unit's umask and
// queued's original limits. Root-run reset commands share neither
// queued's keyring nor its environment.
func TestSystem_JobsStayInTheirBox(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	state := t.TempDir()
	key := "ttq-root-key-" + strconv.Itoa(os.Getpid())
	// The reset looks for the key in the keyrings it possesses (its
	// session's); /proc/keys would list root's keys to any root process.
	search := fmt.Sprintf(`python3 -c 'import ctypes; l=ctypes.CDLL(None); l.syscall.restype=ctypes.c_long; print("search=%%d" %% l.syscall(250, 10, -3, b"user", b"%s", 0))'`, key)
	s := startSystemWith(t, state, startWithKeyring(key),
		"TT_DEVICE_RESET_CMD="+search+"; env #", "TT_DEVICE_HEALTH_CHECK_CMD=true")
	r := s.as(bob, "POST", "/queue", fmt.Sprintf(`{"cmd":"echo up; sleep 300","cwd":%q,"device_id":"1"}`, bob.Home))
	if r.code != 201 {
		t.Fatalf("bob's job: %v", r)
	}
	bobs := strings.Split(strings.Split(r.body, `"job_id":"`)[1], `"`)[0]
	s.waitOutput(bobs, "up")
	soft, err := exec.Command("bash", "-c", "ulimit -Sn").Output()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`kill -0 %d 2>/dev/null && echo signal-queued=yes || echo signal-queued=no
kill -0 %d 2>/dev/null && echo signal-bob=yes || echo signal-bob=no
ls %s >/dev/null 2>&1 && echo read-state=yes || echo read-state=no
echo umask=$(umask)
echo nnp=$(awk '/^NoNewPrivs/ {print $2}' /proc/self/status)
echo oom=$(cat /proc/self/oom_score_adj)
(echo 0 > /proc/self/oom_score_adj) 2>/dev/null && echo lower-oom=yes || echo lower-oom=no
echo nofile=$(ulimit -Sn)
echo session=$(awk '{print ($6 == $1) ? "own" : "shared"}' /proc/$$/stat)`,
		s.cmd.Process.Pid, s.job(bobs).PID, state)
	job := s.queueAs(alice, alice.Home, script)
	if j := s.waitResult(job); j.Outcome != "success" {
		t.Fatalf("alice's job: %s %q", j.Outcome, j.Error)
	}
	out := s.logs(job)
	wants := []string{"signal-queued=no", "signal-bob=no", "read-state=no", "umask=0022", "nnp=0",
		"oom=500", "nofile=" + strings.TrimSpace(string(soft)), "session=own"}
	if hasCapSysResource(t) {
		// Set by a process holding CAP_SYS_RESOURCE, the score is also
		// the least the job may set; a sandbox without it (some CI
		// containers) cannot make it so.
		wants = append(wants, "lower-oom=no")
	}
	for _, want := range wants {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("alice's job: want %s, got:\n%s", want, out)
		}
	}
	rs, err := s.client.Reset(ctx(t), api.ResetRequest{DeviceID: "0"})
	if err != nil {
		t.Fatal(err)
	}
	s.waitResult(rs.Resets[0].ResetJobID)
	out = s.logs(rs.Resets[0].ResetJobID)
	if !strings.Contains(out, "search=-1\n") {
		t.Errorf("the root-run reset holds queued's session keyring (key %s):\n%s", key, out)
	}
	if strings.Contains(out, "ROOT_SECRET") || !strings.Contains(out, "PATH=") {
		t.Errorf("the reset's environment is not the minimal one:\n%s", out)
	}
}

// The exec helper is named queued-exec while it lives, in ps and top as
// in its command line: queued executes it through a descriptor, which
// would name it by the descriptor's number ("5"), and a helper stuck
// entering a working directory that never answers can live for long.
func TestSystem_HelperIsNamedWhileItStarts(t *testing.T) {
	alice := usertest.New(t, "ttqn")
	hang, _ := fusetest.HangingDir(t)
	s := startSystem(t, t.TempDir(), "TT_DEVICE_RESET_CMD=true #", "TT_DEVICE_HEALTH_CHECK_CMD=true")
	r := s.as(alice, "POST", "/queue", fmt.Sprintf(`{"cmd":"echo never","cwd":%q,"device_id":"0"}`, hang))
	if r.code != 201 {
		t.Fatalf("queue: %v", r)
	}
	id := strings.Split(strings.Split(r.body, `"job_id":"`)[1], `"`)[0]
	deadline := time.Now().Add(20 * time.Second)
	var j api.Job
	for j = s.job(id); j.State != "running" || j.PID == 0; j = s.job(id) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s never started: %+v", id, j)
		}
		time.Sleep(10 * time.Millisecond) // polling the job's state
	}
	// The helper names itself first thing, a moment after its pid is known.
	for got := ""; got != "queued-exec"; time.Sleep(10 * time.Millisecond) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", j.PID))
		if err != nil {
			t.Fatal(err)
		}
		if got = strings.TrimSpace(string(comm)); time.Now().After(deadline) {
			t.Fatalf("the helper stuck entering its directory is named %q, want queued-exec", got)
		}
	}
	if _, err := s.client.Kill(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	if j := s.waitResult(id); j.Outcome != "killed" {
		t.Errorf("the job: %s %q", j.Outcome, j.Error)
	}
}
