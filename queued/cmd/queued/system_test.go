package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// asClientEnv makes the test binary a one-request HTTP client of the
// socket it names (see runAsClient): system-mode tests run it as the users
// they create, so each request comes from a real process of that user.
const asClientEnv = "QUEUED_TEST_CLIENT_SOCKET"

// runAsClient sends one request to the socket in asClientEnv: method,
// path, body and extra headers ("Name: value" lines) from the environment;
// it prints the status code, a newline and the body. A failed connection
// prints "dial: <error>".
func runAsClient() int {
	sock := os.Getenv(asClientEnv)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	var body io.Reader
	if b := os.Getenv("QUEUED_TEST_CLIENT_BODY"); b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequest(os.Getenv("QUEUED_TEST_CLIENT_METHOD"), "http://localhost"+os.Getenv("QUEUED_TEST_CLIENT_PATH"), body)
	if err != nil {
		fmt.Println("request:", err)
		return 0
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range strings.Split(os.Getenv("QUEUED_TEST_CLIENT_HEADERS"), "\n") {
		if name, value, ok := strings.Cut(h, ": "); ok {
			req.Header.Set(name, value)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		fmt.Println("dial:", err)
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d\n%s", resp.StatusCode, b)
	return 0
}

// sysd is a system-mode queued started by a test as root.
type sysd struct {
	*daemon
	sock      string
	clientBin string // this test binary, where every user can run it
}

// startSystem starts queued in system mode on cards 0 and 1 with its
// socket in a directory every user can reach, and waits until it answers
// root on the socket.
func startSystem(t *testing.T, state string, extra ...string) *sysd {
	t.Helper()
	return startSystemWith(t, state, (*exec.Cmd).Start, extra...)
}

// startSystemWith is startSystem with start doing the cmd.Start.
func startSystemWith(t *testing.T, state string, start func(*exec.Cmd) error, extra ...string) *sysd {
	t.Helper()
	usertest.RequireRoot(t)
	open := usertest.OpenDir(t)
	s := &sysd{sock: filepath.Join(open, "queued.sock"), clientBin: filepath.Join(open, "client")}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, s.clientBin, 0o755)
	d := spawnWith(t, state, exec.Command(bin), start, append([]string{"TT_DEVICE_SOCKET=" + s.sock, "ROOT_SECRET=hunter2"}, extra...)...)
	d.client = api.NewUnixClient(s.sock)
	t.Cleanup(d.client.Close)
	d.waitStarted(func() bool {
		_, err := d.client.Status(context.Background())
		return err == nil
	})
	s.daemon = d
	return s
}

// reply is one answer a user got.
type reply struct {
	code int
	body string
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.code, strings.TrimSpace(r.body)) }

// as sends one request as user u, from a process of that user.
func (s *sysd) as(u usertest.User, method, path, body string, headers ...string) reply {
	s.t.Helper()
	cmd := exec.Command(s.clientBin)
	cmd.Env = []string{asClientEnv + "=" + s.sock, "QUEUED_TEST_CLIENT_METHOD=" + method, "QUEUED_TEST_CLIENT_PATH=" + path,
		"QUEUED_TEST_CLIENT_BODY=" + body, "QUEUED_TEST_CLIENT_HEADERS=" + strings.Join(headers, "\n")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	// Supplementary groups as the user database has them: the socket's
	// group is one of them.
	ids, err := exec.Command("id", "-G", u.Name).Output()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range strings.Fields(string(ids)) {
		g, _ := strconv.ParseUint(f, 10, 32)
		cmd.SysProcAttr.Credential.Groups = append(cmd.SysProcAttr.Credential.Groups, uint32(g))
	}
	out, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("client as %s: %v", u.Name, err)
	}
	code, rest, _ := strings.Cut(string(out), "\n")
	n, err := strconv.Atoi(code)
	if err != nil {
		return reply{body: string(out)}
	}
	return reply{code: n, body: rest}
}

// queueAs submits cmd on card 0 as u and returns the job id.
func (s *sysd) queueAs(u usertest.User, cwd, cmd string, headers ...string) string {
	s.t.Helper()
	body, _ := json.Marshal(map[string]any{"cmd": cmd, "cwd": cwd, "device_id": "0", "client_id": "root"})
	r := s.as(u, "POST", "/queue", string(body), headers...)
	if r.code != http.StatusCreated {
		s.t.Fatalf("queue as %s: %v", u.Name, r)
	}
	var qr api.QueueResponse
	json.Unmarshal([]byte(r.body), &qr)
	return qr.JobID
}

// job reads a job as root.
func (s *sysd) job(id string) api.Job {
	s.t.Helper()
	j, err := s.client.Job(ctx(s.t), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return j
}

// Two users share card 0 through one system-mode queued: the second's job
// queues behind the first's, each job runs as its submitter, each user
// sees their own job and output and not the other's, a non-admin's reset
// waits for the other user's job, an admin may kill anyone's job, and no
// header or body field can claim another identity.
func TestSystem_TwoUsersShareACard(t *testing.T) {
	sockGroup, sockGID := usertest.Group(t, "ttqs")
	adminGroup, _ := usertest.Group(t, "ttqadm")
	alice, bob := usertest.New(t, "ttqa", sockGroup), usertest.New(t, "ttqb", sockGroup)
	boss := usertest.New(t, "ttqz", sockGroup, adminGroup)
	carol := usertest.New(t, "ttqc")
	state := t.TempDir()
	s := startSystem(t, state, "TT_DEVICE_SOCKET_GROUP="+sockGroup, "TT_DEVICE_ADMIN_GROUP="+adminGroup,
		"TT_DEVICE_RESET_CMD=true #", "TT_DEVICE_HEALTH_CHECK_CMD=true")

	// The socket: 0660, the socket group's; no TCP, no address file.
	fi, err := os.Stat(s.sock)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || st.Gid != sockGID || st.Uid != 0 {
		t.Errorf("socket %v uid %d gid %d, want 0660 root:%d", fi.Mode().Perm(), st.Uid, st.Gid, sockGID)
	}
	if _, err := os.Stat(filepath.Join(state, api.AddressFile)); err == nil {
		t.Error("system mode wrote an address file: it listens on TCP")
	}
	if r := s.as(carol, "GET", "/status", ""); !strings.Contains(r.body, "permission denied") {
		t.Errorf("carol, outside the socket's group, got %v", r)
	}

	gate := filepath.Join(usertest.OpenDir(t), "go")
	aliceJob := s.queueAs(alice, alice.Home, fmt.Sprintf("echo alice=$(id -u); touch made; while [ ! -e %s ]; do sleep 0.05; done", gate))
	s.waitOutput(aliceJob, "alice=")
	// Bob claims to be alice and root in every way a request can.
	bobJob := s.queueAs(bob, bob.Home, `echo bob=$(id -u) home=$HOME secret=${ROOT_SECRET-none}`,
		"Authorization: Bearer "+strings.Repeat("0", 64), "X-Remote-User: alice", "X-Forwarded-User: root")
	if j := s.job(bobJob); j.OwnerUID == nil || *j.OwnerUID != bob.UID || j.Owner != bob.Name || j.Position != 1 {
		t.Fatalf("bob's job: owner %v %q position %d, want bob, first behind alice's", j.OwnerUID, j.Owner, j.Position)
	}
	// A link planted where bob's output goes leads nowhere.
	target := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(target, []byte("root's"), 0o600)
	if err := os.Symlink(target, filepath.Join(state, "output", bobJob+".log")); err != nil {
		t.Fatal(err)
	}

	// Bob may not see or stop alice's job.
	for _, req := range [][2]string{{"GET", "/job/" + aliceJob}, {"GET", "/logs/" + aliceJob}, {"GET", "/result/" + aliceJob},
		{"POST", "/kill"}} {
		body := ""
		if req[0] == "POST" {
			body = `{"job_id":"` + aliceJob + `"}`
		}
		r := s.as(bob, req[0], req[1], body)
		if r.code != http.StatusForbidden || !strings.Contains(r.body, "belongs to "+alice.Name) {
			t.Errorf("bob %s %s: %v, want 403 naming alice", req[0], req[1], r)
		}
	}
	// Bob's reset waits for alice's job instead of interrupting it.
	r := s.as(bob, "POST", "/reset", `{"device_id":"0"}`)
	var rr api.ResetResponse
	json.Unmarshal([]byte(r.body), &rr)
	if r.code != http.StatusOK || len(rr.Resets) != 1 || rr.Resets[0].WaitsForJobID != aliceJob || rr.Resets[0].InterruptedJobID != "" {
		t.Fatalf("bob's reset: %v", r)
	}
	// The reset is bob's: alice may see it, not cancel it.
	if r := s.as(alice, "POST", "/kill", `{"job_id":"`+rr.Resets[0].ResetJobID+`"}`); r.code != http.StatusForbidden {
		t.Errorf("alice's kill of bob's reset: %v, want 403", r)
	}
	if r := s.as(alice, "GET", "/job/"+rr.Resets[0].ResetJobID, ""); r.code != http.StatusOK {
		t.Errorf("alice's look at bob's reset: %v", r)
	}
	// Everyone sees every card; others' jobs without env and cwd.
	r = s.as(bob, "GET", "/status", "")
	var st api.Status
	json.Unmarshal([]byte(r.body), &st)
	if st.Mode != "system" || st.Caller == nil || st.Caller.UID != bob.UID || st.Caller.Admin ||
		st.Cards[0].Current == nil || st.Cards[0].Current.ID != aliceJob || st.Cards[0].Current.Owner != alice.Name {
		t.Errorf("bob's status: %v", r)
	}
	// "Mine" is what the kernel says bob submitted, whatever client id.
	r = s.as(bob, "GET", "/jobs?mine=1&client_id=root", "")
	if r.code != http.StatusOK || strings.Contains(r.body, aliceJob) || !strings.Contains(r.body, bobJob) {
		t.Errorf("bob's own jobs: %v", r)
	}
	r = s.as(bob, "GET", "/jobs", "")
	if r.code != http.StatusOK || strings.Contains(r.body, alice.Home) || !strings.Contains(r.body, bob.Home) {
		t.Errorf("bob's list shows alice's cwd or hides his own: %v", r)
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if j := s.waitResult(aliceJob); j.Outcome != "success" {
		t.Fatalf("alice's job: %s %s", j.Outcome, j.Error)
	}
	made, err := os.Stat(filepath.Join(alice.Home, "made"))
	if err != nil || made.Sys().(*syscall.Stat_t).Uid != alice.UID {
		t.Errorf("the file alice's job made: %v, want it alice's", err)
	}
	if j := s.waitResult(bobJob); j.Outcome != "success" {
		t.Fatalf("bob's job: %s %s", j.Outcome, j.Error)
	}
	// Each sees their own output.
	if r := s.as(alice, "GET", "/logs/"+aliceJob, "", "Accept: application/octet-stream"); r.code != 200 || r.body != fmt.Sprintf("alice=%d\n", alice.UID) {
		t.Errorf("alice's output: %v", r)
	}
	wantBob := fmt.Sprintf("bob=%d home=%s secret=none\n", bob.UID, bob.Home)
	if r := s.as(bob, "GET", "/logs/"+bobJob, "", "Accept: application/octet-stream"); r.code != 200 || r.body != wantBob {
		t.Errorf("bob's output: %v, want %q", r, wantBob)
	}
	if b, _ := os.ReadFile(target); string(b) != "root's" {
		t.Errorf("root's write followed the planted link: %q", b)
	}
	// A failed job's error may name its paths: others do not see it.
	failed := s.queueAs(alice, filepath.Join(alice.Home, "private-project"), "true")
	if j := s.waitResult(failed); !strings.Contains(j.Error, "private-project") {
		t.Fatalf("alice's job in a missing directory: %q", j.Error)
	}
	if r := s.as(bob, "GET", "/jobs?state=done", ""); strings.Contains(r.body, "private-project") {
		t.Errorf("bob's list shows the error of alice's job: %v", r)
	}

	// The admin may kill alice's job; alice may kill her own.
	long := s.queueAs(alice, alice.Home, "sleep 100")
	other := s.queueAs(alice, alice.Home, "sleep 100")
	if r := s.as(boss, "POST", "/kill", `{"job_id":"`+long+`"}`); r.code != http.StatusOK {
		t.Errorf("admin's kill: %v", r)
	}
	if r := s.as(alice, "POST", "/kill", `{"job_id":"`+other+`"}`); r.code != http.StatusOK {
		t.Errorf("alice's kill of her own job: %v", r)
	}
	for _, id := range []string{long, other} {
		if j := s.waitResult(id); j.Outcome != "killed" {
			t.Errorf("job %s: %s, want killed", id, j.Outcome)
		}
	}
	// An admin's reset interrupts anyone's job.
	running := s.queueAs(alice, alice.Home, "echo up; sleep 100")
	s.waitOutput(running, "up")
	r = s.as(boss, "POST", "/reset", `{"device_id":"0"}`)
	rr = api.ResetResponse{}
	json.Unmarshal([]byte(r.body), &rr)
	if r.code != http.StatusOK || len(rr.Resets) != 1 || rr.Resets[0].InterruptedJobID != running {
		t.Fatalf("admin's reset: %v, want it to interrupt %s", r, running)
	}
	if j := s.waitResult(running); j.Outcome != "interrupted" {
		t.Errorf("alice's job after the admin's reset: %s", j.Outcome)
	}
}

// System mode with TCP asked for: the token holder (root, who alone can
// read the token) acts as queued's own user, and its jobs run as root.
func TestSystem_TCPOnlyWhenAskedFor(t *testing.T) {
	state := t.TempDir()
	s := startSystem(t, state, "TT_DEVICE_PORT=0")
	url, err := api.ReadAddress(state)
	if err != nil {
		t.Fatalf("TT_DEVICE_PORT given, but no TCP address: %v", err)
	}
	tok, err := api.ReadToken(state)
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(url, tok)
	defer c.Close()
	q, err := c.Queue(ctx(t), api.QueueRequest{Cmd: "id -u", Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	j := s.waitResult(q.JobID)
	if j.Outcome != "success" || j.OwnerUID == nil || *j.OwnerUID != 0 {
		t.Errorf("job over TCP: %s, owner %v", j.Outcome, j.OwnerUID)
	}
	if out := s.logs(q.JobID); out != "0\n" {
		t.Errorf("ran as %q, want root", out)
	}
	if fi, err := os.Stat(filepath.Join(state, "token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}

// waitResult waits for a job to end, as root.
func (s *sysd) waitResult(id string) api.Job {
	s.t.Helper()
	j, err := s.client.WaitResult(ctx(s.t), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return j
}

// Without a socket group every local user may connect (0666).
func TestSystem_SocketOpenToEveryoneWithoutAGroup(t *testing.T) {
	carol := usertest.New(t, "ttqc")
	s := startSystem(t, t.TempDir())
	if fi, err := os.Stat(s.sock); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket mode %v, %v; want 0666", fi.Mode().Perm(), err)
	}
	r := s.as(carol, "GET", "/status", "")
	if r.code != http.StatusOK || !bytes.Contains([]byte(r.body), []byte(`"mode":"system"`)) {
		t.Errorf("carol's status: %v", r)
	}
}

// System mode refuses to start where it could not keep its promises: not
// as root, with its socket or state in a directory other users can write,
// with a state directory that is a link, or with a group or user that
// does not exist. Each refusal names what to fix.
func TestSystem_RefusesAnUnsafeStart(t *testing.T) {
	alice := usertest.New(t, "ttqa")
	open := usertest.OpenDir(t)
	shared := filepath.Join(open, "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o1777)
	realState := t.TempDir()
	link := filepath.Join(t.TempDir(), "state-link")
	os.Symlink(realState, link)
	sock := filepath.Join(open, "q.sock")
	for _, c := range []struct {
		name string
		as   *usertest.User
		env  []string
		want string
	}{
		{"not root", &alice, []string{"TT_DEVICE_SOCKET=" + sock, "TT_DEVICE_LOG_DIR=" + filepath.Join(alice.Home, "state")}, "needs root"},
		{"socket in a shared directory", nil, []string{"TT_DEVICE_SOCKET=" + filepath.Join(shared, "q.sock"), "TT_DEVICE_LOG_DIR=" + t.TempDir()}, "writable by other users"},
		{"state in a shared directory", nil, []string{"TT_DEVICE_SOCKET=" + sock, "TT_DEVICE_LOG_DIR=" + shared}, "writable by other users"},
		{"state behind a link", nil, []string{"TT_DEVICE_SOCKET=" + sock, "TT_DEVICE_LOG_DIR=" + link}, "is a symlink"},
		{"state of another user", nil, []string{"TT_DEVICE_SOCKET=" + sock, "TT_DEVICE_LOG_DIR=" + alice.Home}, "belongs to uid"},
		{"unknown socket group", nil, []string{"TT_DEVICE_SOCKET=" + sock, "TT_DEVICE_LOG_DIR=" + t.TempDir(), "TT_DEVICE_SOCKET_GROUP=nosuchgroupttq"}, "TT_DEVICE_SOCKET_GROUP=nosuchgroupttq"},
		{"unknown admin group", nil, []string{"TT_DEVICE_SOCKET=" + sock, "TT_DEVICE_LOG_DIR=" + t.TempDir(), "TT_DEVICE_ADMIN_GROUP=nosuchgroupttq"}, "TT_DEVICE_ADMIN_GROUP=nosuchgroupttq"},
		{"unknown reset user", nil, []string{"TT_DEVICE_SOCKET=" + sock, "TT_DEVICE_LOG_DIR=" + t.TempDir(), "TT_DEVICE_RESET_USER=nosuchuserttq"}, "TT_DEVICE_RESET_USER=nosuchuserttq"},
		{"group without system mode", nil, []string{"TT_DEVICE_LOG_DIR=" + t.TempDir(), "TT_DEVICE_ADMIN_GROUP=root"}, "set TT_DEVICE_SOCKET too"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin)
			cmd.Env = env(append([]string{"TT_DEVICE_IDS=0"}, c.env...)...)
			if c.as != nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: c.as.UID, Gid: c.as.GID}}
				cmd.Dir = "/"
				exe := filepath.Join(open, "queued")
				copyFile(t, bin, exe, 0o755)
				cmd.Path = exe
			}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), c.want) {
				t.Errorf("%v; output:\n%s\nwant exit 1 saying %q", err, out, c.want)
			}
			if _, err := os.Lstat(sock); err == nil {
				t.Errorf("a refused start left its socket at %s", sock)
			}
		})
	}
}

// startWithKeyring starts cmd from an OS thread that has a session keyring
// of its own holding a key called desc, as a queued started by hand from
// a root login (pam_keyinit) would have.
func startWithKeyring(desc string) func(*exec.Cmd) error {
	return func(cmd *exec.Cmd) error {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // the thread ends with the goroutine: its keyring goes with it
			if _, err := unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0); err != nil {
				done <- fmt.Errorf("joining a session keyring: %w", err)
				return
			}
			if _, err := unix.AddKey("user", desc, []byte("root's"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
				done <- fmt.Errorf("adding a key: %w", err)
				return
			}
			done <- cmd.Start()
		}()
		return <-done
	}
}

// Jobs of different users never share a session keyring: not queued's
// own (one inherited from a root login, which holds root's keys), and not
// one a job of another user could add keys to. Each job has one of its
// own, which it may use.
func TestSystem_JobsGetNoSharedKeyring(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	secret := "ttq-root-secret-" + strconv.Itoa(os.Getpid())
	s := startSystemWith(t, t.TempDir(), startWithKeyring(secret))
	// The session keyring of root's queued is not the jobs'.
	job := s.queueAs(alice, alice.Home, "cat /proc/keys")
	if j := s.waitResult(job); j.Outcome != "success" {
		t.Fatalf("alice's job: %s %s", j.Outcome, j.Error)
	}
	if out := s.logs(job); strings.Contains(out, secret) {
		t.Errorf("alice's job sees root's session key %s:\n%s", secret, out)
	}
	// What one user's job puts in its session keyring, another's cannot see.
	const add = `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None); l.syscall.restype=ctypes.c_long; print(l.syscall(248, b"user", sys.argv[1].encode(), b"x", 1, -3))' `
	mark := "ttq-alice-key-" + strconv.Itoa(os.Getpid())
	job = s.queueAs(alice, alice.Home, add+mark+"; cat /proc/keys")
	s.waitResult(job)
	if out := s.logs(job); !strings.Contains(out, mark) {
		t.Errorf("alice's job could not keep a key in its own session keyring:\n%s", out)
	}
	job = s.queueAs(bob, bob.Home, "cat /proc/keys")
	s.waitResult(job)
	if out := s.logs(job); strings.Contains(out, mark) {
		t.Errorf("bob's job sees the key alice's job added:\n%s", out)
	}
}

// A system-mode queued killed with SIGKILL and started again keeps every
// user's jobs: the running one's leftover processes are killed and it is
// recorded interrupted, and the queued one still runs as its submitter,
// from the owner recorded in the store.
func TestSystem_KillDashNineKeepsEachUsersJobs(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	state := t.TempDir()
	s := startSystem(t, state)
	running := s.queueAs(alice, alice.Home, "echo up; sleep 300")
	s.waitOutput(running, "up")
	pgid := s.job(running).PID
	waiting := s.queueAs(bob, bob.Home, "id -un; pwd")
	s.cmd.Process.Kill()
	<-s.exited

	s = startSystem(t, state)
	if j := s.waitResult(running); j.Outcome != "interrupted" {
		t.Errorf("alice's job after the crash: %s, want interrupted", j.Outcome)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("alice's job (pid %d) outlived the crash and the restart", pgid)
		}
		time.Sleep(10 * time.Millisecond) // polling for the leftover to be killed
	}
	if j := s.waitResult(waiting); j.Outcome != "success" || j.OwnerUID == nil || *j.OwnerUID != bob.UID {
		t.Fatalf("bob's job after the restart: %s %q, owner %v", j.Outcome, j.Error, j.OwnerUID)
	}
	if out := s.logs(waiting); out != bob.Name+"\n"+bob.Home+"\n" {
		t.Errorf("bob's job ran as %q, want %s in %s", out, bob.Name, bob.Home)
	}
}

// A uid given to a new user after its old one left is the new user's: a
// job the new user submits records and runs as them (a name remembered
// from the old user would make the job look like the old user's, and
// fail at start as a uid that changed hands).
func TestSystem_AReusedUIDIsItsNewUsers(t *testing.T) {
	old := usertest.New(t, "ttqo")
	s := startSystem(t, t.TempDir())
	first := s.queueAs(old, old.Home, "true")
	if j := s.waitResult(first); j.Owner != old.Name {
		t.Fatalf("first job's owner %q, want %s", j.Owner, old.Name)
	}
	heir := usertest.Reuse(t, old, "ttqn")
	job := s.queueAs(heir, heir.Home, "id -un")
	j := s.waitResult(job)
	if j.Owner != heir.Name || j.Outcome != "success" {
		t.Fatalf("the new user's job: owner %q, %s %q; want %s, success", j.Owner, j.Outcome, j.Error, heir.Name)
	}
	if out := s.logs(job); out != heir.Name+"\n" {
		t.Errorf("ran as %q, want %s", out, heir.Name)
	}
}
