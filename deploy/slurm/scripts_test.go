// Tests of deploy/slurm's scripts, run by bash as slurmd and slurmstepd run
// them (no PATH, only SLURM_* variables), with stand-ins for squeue, scontrol,
// slurmd -G and tt-device-queue that answer each case and record their calls.
// test/slurm runs the same scripts under a real Slurm and a real queued.
package slurm_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/cmdtest"
	"github.com/ttkit/ttkit/internal/kmdtest"
)

const holdID = "0123456789abcdef0123456789abcdef"

// host is one test's node: the scripts with their tt-slurm.env, and the
// stand-ins they find on TT_SLURM_PATH.
type host struct {
	scripts, stubs, state, log, sysfs string
}

// stub writes a stand-in command: it records its arguments in calls, then
// answers from the file named answer.<first word> (for tt-device-queue,
// the subcommand): an exit status line, a stderr line, then stdout.
// tt-device-queue slurm ... is the real CLI (cliBin), on these stand-ins.
const stub = `#!/bin/bash
d=%q
if [[ ${0##*/} == tt-device-queue && $1 == slurm && -x $d/real/tt-device-queue ]]; then
	exec "$d/real/tt-device-queue" "$@"
fi
if [[ ${0##*/} == scontrol && $1 == show && $2 == hostnames ]]; then
	tr , '\n' <<<"$3"
	exit 0
fi
printf '%%s %%s\n' "${0##*/}" "$*" >>"$d/calls"
key=$1
[[ $key == --json || $key == show || $key == -G ]] && key=$2
[[ ${0##*/} == slurmd ]] && key=G
[[ ${0##*/} == squeue ]] && key=job
f="$d/answer.${0##*/}.$key"
[[ -f $f ]] || exit 0
rc=$(sed -n 1p "$f")
sed -n 2p "$f" >&2
sed -n '3,$p' "$f"
exit "$rc"
`

func newHost(t *testing.T, settings ...string) *host {
	t.Helper()
	dir := t.TempDir()
	h := &host{scripts: filepath.Join(dir, "tt"), stubs: filepath.Join(dir, "bin"), state: filepath.Join(dir, "state"), log: filepath.Join(dir, "tt-slurm.log")}
	for _, d := range []string{h.scripts, h.stubs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"prolog.sh", "taskprolog.sh", "epilog.sh", "tt-slurm.sh"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(h.scripts, name), string(b), 0o755)
	}
	for _, name := range []string{"tt-device-queue", "scontrol", "slurmd", "squeue"} {
		write(t, filepath.Join(h.stubs, name), fmt.Sprintf(stub, h.stubs), 0o755)
	}
	if err := os.Symlink(cliBin, filepath.Join(h.stubs, "real")); err != nil {
		t.Fatal(err)
	}
	h.sysfs = kmdtest.BusySysfs(t, filepath.Join(dir, "sysfs"), 4).Root
	env := strings.Join(append([]string{
		"# a comment, and a blank line",
		"",
		"TT_SLURM_CLI=" + filepath.Join(h.stubs, "tt-device-queue"),
		"TT_SLURM_SOCKET=/run/test/queued.sock",
		"TT_SLURM_STATE_DIR=" + h.state,
		"TT_SLURM_LOG=" + h.log,
		"TT_SLURM_SYSFS=" + h.sysfs,
		`TT_SLURM_PATH="` + h.stubs + `:/usr/bin:/bin"`,
	}, settings...), "\n") + "\n"
	write(t, filepath.Join(h.scripts, "tt-slurm.env"), env, 0o644)
	return h
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// answer makes the stand-in cmd answer key (tt-device-queue's subcommand,
// squeue's and scontrol's "job", slurmd's "G") with an exit status, a stderr line and
// stdout.
func (h *host) answer(t *testing.T, cmd, key string, code int, stderr, stdout string) {
	t.Helper()
	write(t, filepath.Join(h.stubs, "answer."+cmd+"."+key), fmt.Sprintf("%d\n%s\n%s", code, stderr, stdout), 0o644)
}

// calls are the stand-ins' invocations, a line each.
func (h *host) calls() []string {
	b, _ := os.ReadFile(filepath.Join(h.stubs, "calls"))
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// cliCalls are tt-device-queue's invocations alone.
func (h *host) cliCalls() []string {
	var out []string
	for _, c := range h.calls() {
		if rest, ok := strings.CutPrefix(c, "tt-device-queue "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// marker is the job's marker file, "" when there is none.
func (h *host) marker(job string) string {
	b, err := os.ReadFile(filepath.Join(h.state, "job-"+job))
	if err != nil {
		return ""
	}
	return string(b)
}

func (h *host) setMarker(t *testing.T, job, content string) {
	t.Helper()
	if err := os.MkdirAll(h.state, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(h.state, "job-"+job), content, 0o644)
}

type result struct {
	code           int
	stdout, stderr string
	log            string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %q\nstderr: %q\nlog: %q", r.code, r.stdout, r.stderr, r.log)
}

// run runs a script with only env, as Slurm does (no PATH, no HOME).
func (h *host) run(t *testing.T, script string, env ...string) result {
	t.Helper()
	cmd := exec.Command("/bin/bash", filepath.Join(h.scripts, script))
	cmd.Env = env
	c := cmdtest.Run(t, cmd)
	r := result{code: c.Code, stdout: c.Stdout, stderr: c.Stderr}
	b, _ := os.ReadFile(h.log)
	r.log = string(b) + r.stderr // the log is stderr when not run as root
	return r
}

func contains(t *testing.T, what, s string, pieces ...string) {
	t.Helper()
	for _, p := range pieces {
		if !strings.Contains(s, p) {
			t.Errorf("%s lacks %q:\n%s", what, p, s)
		}
	}
}

// The scripts parse, and pass shellcheck where it is installed (CI
// installs it).
func TestScripts_Lint(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"prolog.sh", "taskprolog.sh", "epilog.sh", "tt-slurm.sh"} {
		if out, err := exec.Command("bash", "-n", name).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", name, err, out)
		}
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("shellcheck: not on PATH (Debian's shellcheck package; .ci/run installs it)")
		}
		t.Skip("no shellcheck on PATH")
	}
	out, err := exec.Command(sc, "-x", "prolog.sh", "taskprolog.sh", "epilog.sh", "tt-slurm.sh").CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// prologEnv is what slurmd gives a Prolog (Slurm 22.05, seen on a real
// slurmd): the job's ids and user, the node's name, slurm.conf's path.
func prologEnv(job, node string) []string {
	return []string{"SLURM_JOB_ID=" + job, "SLURM_JOBID=" + job, "SLURMD_NODENAME=" + node, "SLURM_JOB_USER=alice", "SLURM_JOB_UID=1000",
		"SLURM_CONF=/etc/slurm/slurm.conf", "SLURM_SCRIPT_CONTEXT=prolog_slurmd"}
}

// slurmdG is `slurmd -G` on a node whose gres.conf lists cards 0, 1 and 3
// (card 2 is out of service), so GRES index 2 is card 3.
const slurmdG = `slurmd: Gres Name=gpu Type=(null) Count=1 Index=0 ID=7696487 File=/dev/nvidia0 (null)
slurmd: Gres Name=tt Type=p150a Count=1 Index=0 ID=29812 File=/dev/tenstorrent/0 (null)
slurmd: Gres Name=tt Type=p150a Count=1 Index=1 ID=29812 File=/dev/tenstorrent/1 (null)
slurmd: Gres Name=tt Type=p150a Count=1 Index=3 ID=29812 File=/dev/tenstorrent/3 (null)
`

func holdAnswer(cards, state string) string {
	return fmt.Sprintf(`{"hold_id":%q,"device_id":%q,"state":%q}`+"\n", holdID, cards, state)
}

// The Prolog finds the job's cards on this node from squeue --json's GRES
// index lists and slurmd -G's device files, takes one hold for all of
// them for the Slurm job, and leaves the hold in the job's marker.
func TestProlog_TakesAHoldOnTheJobsCards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, node, squeue, cards string
	}{
		{"typed, index past a gap", "n1", squeueJob(42, "n1", "tt:p150a:2(IDX:1-2)"), "1,3"},
		{"untyped, one card", "n1", squeueJob(42, "n1", "tt:1(IDX:0)"), "0"},
		{"two nodes, another GRES beside", "n2",
			squeueJob(42, "n1", "gpu:1(IDX:0),tt:1(IDX:2)", "n2", "gpu:1(IDX:0),tt:p150a:2(IDX:0,2)", "n3", "gpu:1(IDX:0),tt:p150a:2(IDX:0,2)"), "0,3"},
		{"mixed types on one node", "n1", squeueJob(42, "n1", "tt:p150a:1(IDX:0),tt:n300:1(IDX:1)"), "0,1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t)
			h.answer(t, "squeue", "job", 0, "", tc.squeue)
			h.answer(t, "slurmd", "G", 0, "", slurmdG)
			h.answer(t, "tt-device-queue", "hold", 0, "", holdAnswer(tc.cards, "queued"))
			r := h.run(t, "prolog.sh", prologEnv("42", tc.node)...)
			if r.code != 0 {
				t.Fatalf("prolog: %v", r)
			}
			want := "gate --device " + tc.cards + " --wait 600|hold --device " + tc.cards + " --slurm-job 42 --json --reason slurm job 42 (alice) --for-uid 1000"
			if got := strings.Join(h.cliCalls(), "|"); got != want {
				t.Errorf("tt-device-queue calls %q, want %q", got, want)
			}
			if m := h.marker("42"); m != "hold="+holdID+"\ncards="+tc.cards+"\n" {
				t.Errorf("marker %q", m)
			}
			contains(t, "log", r.log, "prolog[", "job 42: hold "+holdID+" on card(s) "+tc.cards+": queued")
		})
	}
}

// A job without tt cards on this node gets no hold, and a marker that
// says so, for the TaskProlog and the Epilog.
func TestProlog_NoCards(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{squeueJob(7, "n1", ""), squeueJob(7, "n1", "gpu:1(IDX:0)"), squeueJob(7, "n2", "tt:1(IDX:0)", "n1", ""),
		`{"jobs":[{"job_id":7,"job_resources":{"allocated_nodes":[{"nodename":"n1"}]}}]}`} {
		h := newHost(t)
		h.answer(t, "squeue", "job", 0, "", answer)
		r := h.run(t, "prolog.sh", prologEnv("7", "n1")...)
		if r.code != 0 || h.marker("7") != "cards=\n" || len(h.cliCalls()) != 0 {
			t.Errorf("%s: %v; marker %q; calls %q", answer, r, h.marker("7"), h.calls())
		}
	}
}

// Whatever goes wrong, the Prolog exits 0 (a failing Prolog drains the
// node) and the marker says why the job has no hold, for the TaskProlog
// to fail the job with.
func TestProlog_FailuresGoToTheMarker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		settings []string
		setup    func(*testing.T, *host)
		want     string
	}{
		{"queued refuses", nil, func(t *testing.T, h *host) {
			h.answer(t, "tt-device-queue", "hold", 1, "tt-device-queue: card 1 is dead", "")
		}, "error=queued did not take a hold on card(s) 1 for this job: tt-device-queue: card 1 is dead"},
		{"queued silent", []string{"TT_SLURM_TIMEOUT=1"}, func(t *testing.T, h *host) {
			write(t, filepath.Join(h.stubs, "tt-device-queue"), "#!/bin/bash\n[[ $1 == slurm ]] && exec \"${0%/*}/real/tt-device-queue\" \"$@\"\nexec sleep 30\n", 0o755)
		}, "error=queued did not take a hold on card(s) 1 for this job: no answer within 1s"},
		{"an answer without a hold id", nil, func(t *testing.T, h *host) {
			h.answer(t, "tt-device-queue", "hold", 0, "", `{"state":"queued"}`+"\n")
		}, `error=queued's answer to the hold on card(s) 1 has no hold id: {"state":"queued"}`},
		{"squeue fails", nil, func(t *testing.T, h *host) {
			h.answer(t, "squeue", "job", 1, "slurm_load_jobs error: Unable to contact slurm controller", "")
		}, "error=cannot tell which tt cards Slurm gave this job on n1: tt-device-queue: squeue --json -j 42: exit status 1: slurm_load_jobs error: Unable to contact slurm controller\n"},
		{"index past slurmd's list", nil, func(t *testing.T, h *host) {
			h.answer(t, "squeue", "job", 0, "", squeueJob(42, "n1", "tt:1(IDX:5)"))
		}, "error=cannot tell which tt cards Slurm gave this job on n1: tt-device-queue: cannot read Slurm's answer strictly: GRES tt index 5, but slurmd -G lists 3 tt device files\n"},
		{"a bad setting", []string{"TT_SLURM_RESTE=always"}, nil, "error=the settings in "},
		{"a bad hold expiry", []string{"TT_SLURM_HOLD_EXPIRES=2 hours"}, nil, "error=the settings in "},
		{"a bad hold wait", []string{"TT_SLURM_HOLD_WAIT=soon"}, nil, "error=the settings in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, tc.settings...)
			h.answer(t, "squeue", "job", 0, "", squeueJob(42, "n1", "tt:1(IDX:1)"))
			h.answer(t, "slurmd", "G", 0, "", slurmdG)
			if tc.setup != nil {
				tc.setup(t, h)
			}
			r := h.run(t, "prolog.sh", prologEnv("42", "n1")...)
			if r.code != 0 || !strings.HasPrefix(h.marker("42"), tc.want) {
				t.Errorf("exit %d, marker %q, want it to start %q\n%v", r.code, h.marker("42"), tc.want, r)
			}
			if strings.HasPrefix(tc.want, "error=the settings") && !strings.Contains(r.log, "error: "+tc.settings[0]+" in ") && !strings.Contains(r.log, "is not a setting: "+tc.settings[0]) {
				t.Errorf("the log does not name the bad setting %s:\n%s", tc.settings[0], r.log)
			}
		})
	}
	// Without the node's name the Prolog still exits 0.
	h0 := newHost(t)
	r0 := h0.run(t, "prolog.sh", "SLURM_JOB_ID=42")
	if r0.code != 0 || !strings.HasPrefix(h0.marker("42"), "error=SLURMD_NODENAME is not set") {
		t.Errorf("no node name: %v, marker %q", r0, h0.marker("42"))
	}
	// A job id that is not one writes nothing anywhere.
	h := newHost(t)
	r := h.run(t, "prolog.sh", prologEnv("../x", "n1")...)
	if r.code != 0 || len(h.calls()) != 0 || !strings.Contains(r.log, "SLURM_JOB_ID=../x is not a job id") {
		t.Errorf("bad job id: %v, calls %q", r, h.calls())
	}
	if entries, _ := os.ReadDir(h.state); len(entries) != 0 {
		t.Errorf("state dir after a bad job id: %v", entries)
	}
}

// taskEnv is the TaskProlog's: the job's user's environment plus Slurm's.
func taskEnv(job string) []string {
	return []string{"SLURM_JOB_ID=" + job, "SLURM_SCRIPT_CONTEXT=prolog_task", "HOME=/home/alice", "PATH=/usr/bin:/bin",
		"TT_DEVICE_URL=http://elsewhere:1", "TT_SLURM_CLI=/bin/false"} // a job's own settings steer nothing
}

// The TaskProlog waits for the job's hold and gives the task its cards;
// without a hold it fails the task with the reason, on the task's output.
func TestTaskProlog(t *testing.T) {
	t.Parallel()
	active := `{"hold_id":"` + holdID + `","device_id":"1,3","state":"active","reason":"slurm job 42 (alice)","slurm_job_id":"42","expires_at":null}` + "\n"
	for _, tc := range []struct {
		name     string
		settings []string
		marker   string
		setup    func(*testing.T, *host)
		code     int
		stdout   string
		calls    []string
	}{
		{name: "no marker", code: 0, stdout: ""},
		{name: "no cards", marker: "cards=\n", code: 0, stdout: ""},
		{name: "the Prolog took no hold", marker: "error=queued did not take a hold on card(s) 0 for this job: card 0 is dead\n", code: 1,
			stdout: "print tt-device-queue (TaskProlog): this job got no hold on its tt cards, so it must not use them: queued did not take a hold on card(s) 0 for this job: card 0 is dead\n"},
		{name: "active", marker: "hold=" + holdID + "\ncards=1,3\n", setup: func(t *testing.T, h *host) {
			h.answer(t, "tt-device-queue", "hold-status", 0, "", active)
			h.answer(t, "tt-device-queue", "status", 0, "", `{"mode":"system","visible_devices":"off","cards":[]}`+"\n")
		}, code: 0, stdout: "export TT_QUEUE_DEVICE=1,3\n", calls: []string{"hold-status " + holdID + " --wait=600s --json", "--json status"}},
		{name: "active, cards by PCI address", settings: []string{"TT_SLURM_HOLD_WAIT=1h30m"}, marker: "hold=" + holdID + "\ncards=1,3\n", setup: func(t *testing.T, h *host) {
			h.answer(t, "tt-device-queue", "hold-status", 0, "", active)
			h.answer(t, "tt-device-queue", "status", 0, "", `{"mode":"system","visible_devices": "bdf","cards":[]}`+"\n")
		}, code: 0, stdout: "export TT_QUEUE_DEVICE=1,3\nexport TT_VISIBLE_DEVICES=0000:02:00.0,0000:04:00.0\n",
			calls: []string{"hold-status " + holdID + " --wait=5400s --json", "--json status"}},
		{name: "still queued", settings: []string{"TT_SLURM_HOLD_WAIT=90"}, marker: "hold=" + holdID + "\ncards=1\n", setup: func(t *testing.T, h *host) {
			h.answer(t, "tt-device-queue", "hold-status", 124, "", strings.Replace(active, "active", "queued", 1))
		}, code: 1, stdout: "print tt-device-queue (TaskProlog): card(s) 1 are still busy after 90: this job's hold " + holdID +
			" waits behind other work in queued (tt-device-queue status shows it). The job is cancelled rather than run on a card in use.\n"},
		{name: "ended", marker: "hold=" + holdID + "\ncards=1\n", setup: func(t *testing.T, h *host) {
			h.answer(t, "tt-device-queue", "hold-status", 1, "", strings.Replace(active, "active", "done", 1))
		}, code: 1, stdout: "print tt-device-queue (TaskProlog): this job's hold " + holdID + " on card(s) 1 ended before the job started (released, or expired).\n"},
		{name: "queued unreachable", marker: "hold=" + holdID + "\ncards=1\n", setup: func(t *testing.T, h *host) {
			h.answer(t, "tt-device-queue", "hold-status", 1, "tt-device-queue: cannot reach queued", "")
		}, code: 1, stdout: "print tt-device-queue (TaskProlog): cannot learn whether this job's hold " + holdID +
			" on card(s) 1 is active: tt-device-queue: cannot reach queued (is queued running on /run/test/queued.sock?)\n"},
		{name: "a bad wait", settings: []string{"TT_SLURM_HOLD_WAIT=soon"}, marker: "hold=" + holdID + "\ncards=1\n", code: 1,
			stdout: "print tt-device-queue (TaskProlog): this node's tt-slurm.env is invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, tc.settings...)
			if tc.marker != "" {
				h.setMarker(t, "42", tc.marker)
			}
			if tc.setup != nil {
				tc.setup(t, h)
			}
			r := h.run(t, "taskprolog.sh", taskEnv("42")...)
			if r.code != tc.code || !strings.HasPrefix(r.stdout, tc.stdout) || (tc.stdout == "" && r.stdout != "") {
				t.Errorf("want exit %d and stdout %q\n%v", tc.code, tc.stdout, r)
			}
			if tc.calls != nil && strings.Join(h.cliCalls(), "|") != strings.Join(tc.calls, "|") {
				t.Errorf("tt-device-queue calls %q, want %q", h.cliCalls(), tc.calls)
			}
		})
	}
}

// epilogEnv is what slurmd gives an Epilog, with the job's exit code.
func epilogEnv(job, exit2 string, more ...string) []string {
	env := []string{"SLURM_JOB_ID=" + job, "SLURMD_NODENAME=n1", "SLURM_JOB_USER=alice", "SLURM_SCRIPT_CONTEXT=epilog_slurmd"}
	if exit2 != "" {
		env = append(env, "SLURM_JOB_EXIT_CODE2="+exit2)
	}
	return append(env, more...)
}

// The Epilog queues a reset of each of the job's cards by policy, before
// it releases the hold, and always exits 0.
func TestEpilog(t *testing.T) {
	t.Parallel()
	status := func(state string) string {
		return `{"hold_id":"` + holdID + `","device_id":"1,3","state":"` + state + `","reason":"slurm job 42 (alice)","slurm_job_id":"42","expires_at":null}` + "\n"
	}
	resets := []string{"reset --device 1 --no-interrupt", "reset --device 3 --no-interrupt"}
	for _, tc := range []struct {
		name, policy, exit2, state string
		more                       []string
		reset                      bool
	}{
		{"never", "never", "3:0", "active", nil, false},
		{"on-failure, failed", "on-failure", "3:0", "active", nil, true},
		{"on-failure, killed", "on-failure", "0:9", "active", nil, true},
		{"on-failure, succeeded", "on-failure", "0:0", "active", nil, false},
		{"on-failure, a step failed", "on-failure", "0:0", "active", []string{"SLURM_JOB_DERIVED_EC=1"}, true},
		{"on-failure, wait status only", "on-failure", "", "active", []string{"SLURM_JOB_EXIT_CODE=256"}, true},
		{"always", "always", "0:0", "active", nil, true},
		{"always, but the hold never became active", "always", "0:0", "queued", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, "TT_SLURM_RESET="+tc.policy)
			h.setMarker(t, "42", "hold="+holdID+"\ncards=1,3\n")
			h.answer(t, "tt-device-queue", "hold-status", 0, "", status(tc.state))
			h.answer(t, "tt-device-queue", "release", 0, "", "released hold "+holdID+"\n")
			r := h.run(t, "epilog.sh", epilogEnv("42", tc.exit2, tc.more...)...)
			want := []string{"hold-status " + holdID + " --json"}
			if tc.state == "active" && (tc.exit2 != "0:0" || tc.more != nil) {
				want = append(want, "gate --device 1,3") // a failed job's cards are gated (fitness_test.go)
			}
			if tc.reset {
				want = append(want, resets...)
			}
			want = append(want, "release --slurm-job 42")
			if r.code != 0 || strings.Join(h.cliCalls(), "|") != strings.Join(want, "|") {
				t.Errorf("calls %q, want %q\n%v", h.cliCalls(), want, r)
			}
			if h.marker("42") != "" {
				t.Errorf("marker left: %q", h.marker("42"))
			}
			contains(t, "log", r.log, "epilog[", "job 42: released hold(s) of the job ("+holdID+", card(s) 1,3): released hold "+holdID)
		})
	}
}

// Without a marker (it was lost) the Epilog learns the cards from the
// hold queued keeps for the Slurm job; a job without tt cards costs no
// call; a queued that does not answer still leaves exit 0.
func TestEpilog_EdgeCases(t *testing.T) {
	t.Parallel()
	t.Run("no marker", func(t *testing.T) {
		t.Parallel()
		h := newHost(t, "TT_SLURM_RESET=always")
		h.answer(t, "tt-device-queue", "hold-status", 0, "", `{"hold_id":"`+holdID+`","device_id":"2","state":"active","slurm_job_id":"42"}`+"\n")
		r := h.run(t, "epilog.sh", epilogEnv("42", "0:0")...)
		want := []string{"hold-status --slurm-job 42 --json", "reset --device 2 --no-interrupt", "release --slurm-job 42"}
		if r.code != 0 || strings.Join(h.cliCalls(), "|") != strings.Join(want, "|") {
			t.Errorf("calls %q, want %q\n%v", h.cliCalls(), want, r)
		}
	})
	t.Run("no cards", func(t *testing.T) {
		t.Parallel()
		h := newHost(t, "TT_SLURM_RESET=always")
		h.setMarker(t, "42", "cards=\n")
		r := h.run(t, "epilog.sh", epilogEnv("42", "3:0")...)
		if r.code != 0 || len(h.calls()) != 0 || h.marker("42") != "" {
			t.Errorf("%v; calls %q", r, h.calls())
		}
	})
	t.Run("queued down", func(t *testing.T) {
		t.Parallel()
		h := newHost(t, "TT_SLURM_RESET=always")
		h.setMarker(t, "42", "hold="+holdID+"\ncards=1\n")
		for _, cmd := range []string{"hold-status", "reset", "release"} {
			h.answer(t, "tt-device-queue", cmd, 1, "tt-device-queue: cannot reach queued", "")
		}
		r := h.run(t, "epilog.sh", epilogEnv("42", "0:0")...)
		if r.code != 0 {
			t.Errorf("%v", r)
		}
		contains(t, "log", r.log, "job 42: error: reset of card 1 not queued: tt-device-queue: cannot reach queued",
			"job 42: error: release of the job's hold(s) failed: tt-device-queue: cannot reach queued; queued's Slurm check ends them")
	})
	t.Run("a bad policy", func(t *testing.T) {
		t.Parallel()
		h := newHost(t, "TT_SLURM_RESET=sometimes")
		h.setMarker(t, "42", "hold="+holdID+"\ncards=1\n")
		h.answer(t, "tt-device-queue", "hold-status", 0, "", `{"state":"active"}`+"\n")
		r := h.run(t, "epilog.sh", epilogEnv("42", "3:0")...)
		if r.code != 0 || strings.Contains(strings.Join(h.cliCalls(), "|"), "reset") || !strings.Contains(strings.Join(h.cliCalls(), "|"), "release --slurm-job 42") {
			t.Errorf("%v; calls %q", r, h.cliCalls())
		}
		contains(t, "log", r.log, "TT_SLURM_RESET=sometimes in ", "want never, on-failure or always", "not resetting")
	})
}
