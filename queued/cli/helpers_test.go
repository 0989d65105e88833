package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ttkit/ttkit/internal/cmdtest"
	"github.com/ttkit/ttkit/queued/api"
)

// bin holds the queued and tt-device-queue binaries built for this run.
var bin string

func TestMain(m *testing.M) {
	if sock := os.Getenv(postSocketEnv); sock != "" {
		os.Exit(postAs(sock))
	}
	dir, err := os.MkdirTemp("", "tt-device-queue-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	build := exec.Command("go", "build", "-o", dir+"/",
		"github.com/ttkit/ttkit/queued/cmd/queued", "github.com/ttkit/ttkit/queued/cmd/queued-exec", "github.com/ttkit/ttkit/queued/cmd/tt-device-queue")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the binaries:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// postSocketEnv, when set, makes the test binary a small HTTP client
// instead (see postAs): a test copies it where another user may run it and
// runs it as that user, to send a request over a shared queued's socket as
// a script of that user's would.
const postSocketEnv = "TTQ_TEST_POST_SOCKET"

// postAs sends POST $TTQ_TEST_POST_PATH with the JSON body
// $TTQ_TEST_POST_BODY to the queued on sock and prints the status code and
// the answer.
func postAs(sock string) int {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Post("http://localhost"+os.Getenv("TTQ_TEST_POST_PATH"), "application/json", strings.NewReader(os.Getenv("TTQ_TEST_POST_BODY")))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d\n%s", resp.StatusCode, b)
	return 0
}

// daemon is a real queued on a free loopback port with its own state
// directory and two cards.
type daemon struct {
	t     *testing.T
	state string
	home  string
	cmd   *exec.Cmd
	log   *bytes.Buffer
	// env is the CLI's environment: the daemon's state directory (so it
	// finds the token and the address file) and a private HOME.
	env []string
	// exited closes when the daemon has exited.
	exited chan struct{}
}

// startDaemon starts queued; extra is added to its environment.
func startDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	return startDaemonWith(t, nil, extra...)
}

// startDaemonWith starts queued after prepare (when not nil) has filled
// its new state directory.
func startDaemonWith(t *testing.T, prepare func(state string), extra ...string) *daemon {
	t.Helper()
	root := t.TempDir()
	d := &daemon{t: t, state: filepath.Join(root, "state"), home: filepath.Join(root, "home"), log: &bytes.Buffer{}}
	for _, dir := range []string{d.state, d.home} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if prepare != nil {
		prepare(d.state)
	}
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d.home, "TT_DEVICE_LOG_DIR=" + d.state}
	d.env = append([]string(nil), base...)
	d.cmd = exec.Command(filepath.Join(bin, "queued"), "--listen", "127.0.0.1:0")
	// A grace long enough that a job killed while the machine is loaded
	// still ends by its SIGINT (exit -2), as the tests expect; none of
	// them waits for a grace to run out.
	d.cmd.Env = append(append(base, "TT_DEVICE_IDS=0,1", "TT_DEVICE_KILL_GRACE=10",
		"TT_DEVICE_RESET_CMD=true", "TT_DEVICE_HEALTH_CHECK_CMD=true"), extra...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	d.exited = make(chan struct{})
	go func() { err := d.cmd.Wait(); close(d.exited); exited <- err }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
			t.Errorf("queued did not stop on SIGTERM; its log:\n%s", d.log)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := api.ReadAddress(d.state); err == nil {
			return d
		}
		select {
		case err := <-exited:
			t.Fatalf("queued exited at start: %v\n%s", err, d.log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued wrote no address file in 15s; its log:\n%s", d.log)
		}
	}
}

// result is one finished CLI run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %q\nstderr: %q", r.code, r.stdout, r.stderr)
}

// runCmd runs cmd to its end and returns its exit status and output; a
// command that cannot be run at all fails the test.
func runCmd(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	r := cmdtest.Run(t, cmd)
	return result{code: r.Code, stdout: r.Stdout, stderr: r.Stderr}
}

// command prepares a CLI run with the daemon's environment plus env.
func (d *daemon) command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "tt-device-queue"), args...)
	cmd.Env = append(append([]string(nil), d.env...), env...)
	cmd.Dir = d.home
	return cmd
}

// run runs the CLI to its end (at most a minute).
func (d *daemon) run(args ...string) result { return d.runWith(nil, "", args...) }

// runWith runs the CLI with extra environment and stdin, in the
// daemon's private HOME.
func (d *daemon) runWith(env []string, stdin string, args ...string) result {
	d.t.Helper()
	return d.runIn(d.home, env, stdin, args...)
}

// want checks the exit status and that stdout and stderr contain the
// given pieces.
func (r result) want(t *testing.T, code int, inStdout, inStderr []string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %v", code, r)
	}
	for _, s := range inStdout {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("stdout lacks %q: %v", s, r)
		}
	}
	for _, s := range inStderr {
		if !strings.Contains(r.stderr, s) {
			t.Fatalf("stderr lacks %q: %v", s, r)
		}
	}
}

// decode parses the single JSON line --json printed into v, refusing
// anything else on stdout.
func decode(t *testing.T, r result, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\n%v", err, r)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.TrimSpace(string(rest)) != "" || dec.More() {
		t.Fatalf("stdout has more than one JSON value: %v", r)
	}
}

// job fetches a job record through the CLI.
func (d *daemon) job(id string) api.Job {
	d.t.Helper()
	r := d.run("--json", "job", id)
	if r.code != 0 {
		d.t.Fatalf("job %s: %v", id, r)
	}
	var j api.Job
	decode(d.t, r, &j)
	return j
}

// waitState polls the job until it reaches state, for at most 20s.
func (d *daemon) waitState(id, state string) api.Job {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		j := d.job(id)
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("job %s is %s after 20s, want %s", id, j.State, state)
		}
	}
}

// gate is a file a job waits for, so a test decides when the job ends
// without sleeping: `gate.wait` is shell for the job.
type gate string

func newGate(t *testing.T) gate { return gate(filepath.Join(t.TempDir(), "open")) }

// wait's loop dies of the first SIGINT, as a kill expects (exit 130).
// Without the trap, bash can swallow it: a SIGINT that arrives while
// bash reaps a sleep which had already exited 0 counts as handled by the
// child (bash's wait-and-cooperative-exit), the loop goes on, and the
// kill grace ends it with SIGKILL (137), as it once did under load.
func (g gate) wait() string {
	return fmt.Sprintf("trap 'trap - INT; kill -INT $$' INT; while [ ! -e %s ]; do sleep 0.02; done", g)
}

func (g gate) open(t *testing.T) {
	if err := os.WriteFile(string(g), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// lines collects a stream line by line and lets a test wait for a line
// containing some text.
type lines struct {
	mu   sync.Mutex
	all  []string
	more chan struct{}
	done chan struct{}
}

func readLines(r io.Reader) *lines {
	l := &lines{more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// waitFor returns once a line contains s, failing after 20s.
func (l *lines) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		if strings.Contains(l.text(), s) {
			return
		}
		select {
		case <-l.more:
		case <-l.done:
			if !strings.Contains(l.text(), s) {
				t.Fatalf("stream ended without %q:\n%s", s, l.text())
			}
			return
		case <-timeout:
			t.Fatalf("no %q in 20s:\n%s", s, l.text())
		}
	}
}
