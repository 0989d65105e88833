//go:build slurm

package slurm

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/usertest"
)

var otelcolBin = flag.String("otelcol", "../../bin/otelcol-tt", "path of the otelcol-tt binary (make slurm-e2e builds it)")

var (
	// bins holds queued, queued-exec and tt-device-queue, built once, in
	// a directory every user may read (the TaskProlog runs the CLI as the
	// job's user).
	bins string
	// moduleRoot is the repository, for deploy/slurm.
	moduleRoot string
)

func TestMain(m *testing.M) {
	flag.Parse()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOMOD:", err)
		os.Exit(1)
	}
	moduleRoot = filepath.Dir(strings.TrimSpace(string(out)))
	if os.Geteuid() != 0 {
		os.Exit(m.Run()) // every test skips, saying why
	}
	dir, err := os.MkdirTemp("", "ttkit-slurm-bin-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = dir
	build := exec.Command("go", "build", "-o", dir+"/", "./queued/cmd/queued", "./queued/cmd/queued-exec", "./queued/cmd/tt-device-queue")
	build.Dir, build.Stdout, build.Stderr = moduleRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building queued and tt-device-queue:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needSlurm skips without root or the Slurm and munge programs; under CI
// (which runs as root and installs them) a missing one fails instead.
func needSlurm(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs slurmctld, slurmd and a system-mode queued, and creates a user for the jobs (CI runs as root)")
	}
	if err := lookTools("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo", "useradd"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// card0 and card1 are the PCI addresses of the fake sysfs's cards
// (kmdtest.BusySysfs).
const (
	card0 = "0000:01:00.0"
	card1 = "0000:02:00.0"
)

// jobScript is what both a Slurm job and a queued job run here: it notes
// its start and end in the timeline, takes the card's busy mark (a
// directory only one can make; a second one notes a collision), then waits
// for its go file (at most two minutes) and exits with the given status.
//
//	job.sh NAME DIR [EXIT]
const jobScript = `#!/bin/bash
name=$1 d=$2
card=${TT_QUEUE_DEVICE:-none}
echo "TT_QUEUE_DEVICE=${TT_QUEUE_DEVICE-unset} TT_VISIBLE_DEVICES=${TT_VISIBLE_DEVICES-unset}"
echo $$ >"$d/$name.pid"
mkdir "$d/card-$card.busy" 2>/dev/null || echo "$name found card $card busy" >>"$d/collisions"
echo "$name start $card" >>"$d/timeline"
i=0
while [ ! -e "$d/$name.go" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
echo "$name end $card" >>"$d/timeline"
rmdir "$d/card-$card.busy" 2>/dev/null
exit "${3:-0}"
`

// bench is one subtest's working directory, which the jobs (run as u)
// write to.
type bench struct {
	dir    string
	script string
}

func newBench(t *testing.T, u usertest.User) bench {
	t.Helper()
	b := bench{dir: openDir(t, filepath.Join(usertest.OpenDir(t), "bench"))}
	if err := os.Chown(b.dir, int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	b.script = filepath.Join(b.dir, "job.sh")
	writeFile(t, b.script, jobScript, 0o755)
	return b
}

// release lets the job called name end.
func (b bench) release(t *testing.T, name string) {
	t.Helper()
	writeFile(t, filepath.Join(b.dir, name+".go"), "", 0o644)
}

// timeline is what the jobs noted, a line each.
func (b bench) timeline() []string {
	s := strings.TrimSpace(readFile(filepath.Join(b.dir, "timeline")))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// waitLine waits until the timeline has line.
func (b bench) waitLine(t *testing.T, within time.Duration, line string) {
	t.Helper()
	eventually(t, within, "timeline line "+line, func() (bool, string) {
		tl := readFile(filepath.Join(b.dir, "timeline"))
		return strings.Contains(tl, line+"\n"), tl
	})
}

// waitStarted waits until Slurm job id's program has noted its start on
// card 0, and fails at once, with the job's output, if the job ends first
// (its TaskProlog refused it).
func (c *cluster) waitStarted(t *testing.T, b bench, id string) {
	t.Helper()
	eventually(t, time.Minute, "slurm job "+id+"'s program starts on card 0", func() (bool, string) {
		if strings.Contains(readFile(filepath.Join(b.dir, "timeline")), "slurm start 0\n") {
			return true, ""
		}
		switch state, exit := c.job(t, id); state {
		case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL":
			t.Fatalf("slurm job %s ended (%s, exit %s) before its program started; its output: %q",
				id, state, exit, readFile(filepath.Join(b.dir, id+".out")))
		}
		return false, readFile(filepath.Join(b.dir, "timeline"))
	})
}

// wantTimeline checks the jobs' order and that no job found its card busy.
func (b bench) wantTimeline(t *testing.T, want ...string) {
	t.Helper()
	got := b.timeline()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("timeline %q, want %q", got, want)
	}
	if c := readFile(filepath.Join(b.dir, "collisions")); c != "" {
		t.Errorf("collisions: %s", c)
	}
}

// holdJSON is hold-status --json's answer, as the contract has it.
type holdJSON struct {
	HoldID     string `json:"hold_id"`
	DeviceID   string `json:"device_id"`
	State      string `json:"state"`
	Reason     string `json:"reason"`
	SlurmJobID string `json:"slurm_job_id"`
}

// holdOf reads the live hold of a Slurm job (state "" while it has none).
func (c *cluster) holdOf(t *testing.T, jobID string) (holdJSON, result) {
	t.Helper()
	return c.readHold(t, "--slurm-job", jobID)
}

// readHold runs hold-status with args and --json as root.
func (c *cluster) readHold(t *testing.T, args ...string) (holdJSON, result) {
	t.Helper()
	r := c.q.ttq(t, nil, append(append([]string{"hold-status"}, args...), "--json")...)
	var h holdJSON
	_ = json.Unmarshal([]byte(r.stdout), &h)
	return h, r
}

// waitHold waits until the Slurm job's live hold is in state.
func (c *cluster) waitHold(t *testing.T, jobID, state string, within time.Duration) holdJSON {
	t.Helper()
	var h holdJSON
	eventually(t, within, "slurm job "+jobID+"'s hold "+state, func() (bool, string) {
		var r result
		h, r = c.holdOf(t, jobID)
		return h.State == state, r.String()
	})
	return h
}

// waitEnded waits until the hold is done (released, expired, or its Slurm
// job gone).
func (c *cluster) waitEnded(t *testing.T, holdID string, within time.Duration) holdJSON {
	t.Helper()
	var h holdJSON
	eventually(t, within, "hold "+holdID+" done", func() (bool, string) {
		var r result
		h, r = c.readHold(t, holdID)
		return h.State == "done", r.String()
	})
	return h
}

func TestSlurm(t *testing.T) {
	needSlurm(t)
	start := time.Now()
	c := startCluster(t, usertest.OpenDir(t))
	t.Logf("Slurm and queued up in %s (process tracking: cgroup %v)", time.Since(start).Round(time.Millisecond), c.cgroup)
	alice := usertest.New(t, "ttsl")

	// The node's cards, as `tt-device-queue slurm gres` described them
	// from the fake sysfs, are what slurmctld knows.
	t.Run("GresFromTheCLI", func(t *testing.T) {
		r := c.slurm(t, "scontrol", "show", "node", nodeName)
		if !strings.Contains(r.stdout, "Gres=tt:p150a:2") {
			t.Errorf("node's GRES: %v", r)
		}
		r = c.slurm(t, "slurmd", "-G", "-N", nodeName)
		if !strings.Contains(r.stdout+r.stderr, "File="+c.devDir+"/1") {
			t.Errorf("slurmd -G: %v", r)
		}
	})

	// A job without tt cards runs as ever; the Prolog leaves a marker
	// saying so, and the Epilog removes it.
	t.Run("JobWithoutCards", func(t *testing.T) {
		b := newBench(t, alice)
		b.release(t, "plain")
		id := c.sbatch(t, alice, []string{"--output=" + b.dir + "/%j.out"}, b.script, "plain", b.dir)
		if exit := c.waitJob(t, id, time.Minute, "COMPLETED", "FAILED"); exit != "0:0" {
			t.Fatalf("job %s exit %s: %s", id, exit, readFile(filepath.Join(b.dir, id+".out")))
		}
		if out := readFile(filepath.Join(b.dir, id+".out")); !strings.Contains(out, "TT_QUEUE_DEVICE=unset") {
			t.Errorf("job output %q", out)
		}
		eventually(t, 30*time.Second, "the Epilog removes the job's marker", func() (bool, string) {
			_, err := os.Stat(filepath.Join(c.state, "job-"+id))
			return os.IsNotExist(err), fmt.Sprint(err)
		})
	})

	// The Prolog finds the cards Slurm gave the job on this node (from
	// squeue --json's GRES index and slurmd -G's device files), whatever the
	// request's form, and the job runs with TT_QUEUE_DEVICE naming them.
	t.Run("PrologFindsTheCards", func(t *testing.T) {
		for _, tc := range []struct{ gres, cards, bdfs string }{{"tt:2", "0,1", card0 + "," + card1}, {"tt:p150a:1", "0", card0}} {
			b := newBench(t, alice)
			b.release(t, "slurm")
			id := c.sbatch(t, alice, []string{"--gres=" + tc.gres, "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir)
			c.logHas(t, time.Minute, "prolog", "job "+id+":", "hold", "on card(s) "+tc.cards+":")
			exit := c.waitJob(t, id, time.Minute, "COMPLETED", "FAILED")
			if out := readFile(filepath.Join(b.dir, id+".out")); exit != "0:0" || !strings.Contains(out, "TT_QUEUE_DEVICE="+tc.cards+" TT_VISIBLE_DEVICES="+tc.bdfs+"\n") {
				t.Errorf("--gres=%s: job exit %s, output %q", tc.gres, exit, out)
			}
		}
	})

	// queued unreachable: the Prolog still exits 0 (the node is not
	// drained), and the TaskProlog fails the job with a clear message
	// instead of letting it run on cards nobody holds.
	t.Run("QueuedUnreachable", func(t *testing.T) {
		env := filepath.Join(c.scripts, "tt-slurm.env")
		good := readFile(env)
		writeFile(t, env, strings.ReplaceAll(good, filepath.Join(c.dir, "queued", "queued.sock"), filepath.Join(c.dir, "no-such.sock")), 0o644)
		t.Cleanup(func() { writeFile(t, env, good, 0o644) })
		b := newBench(t, alice)
		b.release(t, "slurm")
		id := c.sbatch(t, alice, []string{"--gres=tt:1", "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir)
		if exit := c.waitJob(t, id, time.Minute, "COMPLETED", "FAILED"); exit == "0:0" {
			t.Errorf("job %s ran without a hold", id)
		}
		out := readFile(filepath.Join(b.dir, id+".out"))
		if !strings.Contains(out, "tt-device-queue (TaskProlog): this job got no hold on its tt cards, so it must not use them: queued did not take a hold on card(s) 0") ||
			!strings.Contains(out, filepath.Join(c.dir, "no-such.sock")) {
			t.Errorf("job output %q", out)
		}
		if strings.Contains(readFile(filepath.Join(b.dir, "timeline")), "start") {
			t.Errorf("the job's program ran: %q", b.timeline())
		}
		c.logHas(t, 30*time.Second, "epilog", "job "+id+":", "release")
		if r := c.slurm(t, "sinfo", "-h", "-N", "-o", "%T"); strings.TrimSpace(r.stdout) != "idle" {
			t.Errorf("node after the job: %v (a failing Prolog or Epilog drains it)", r)
		}
	})

	// The Slurm job has card 0 first: a queued job for card 0 waits
	// behind the job's hold, and starts once the Epilog has released it.
	t.Run("SlurmJobFirst", func(t *testing.T) {
		b := newBench(t, alice)
		id := c.sbatch(t, alice, []string{"--gres=tt:1", "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir)
		c.waitStarted(t, b, id)
		h := c.waitHold(t, id, "active", 10*time.Second)
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(h.HoldID) || h.DeviceID != "0" || h.SlurmJobID != id {
			t.Errorf("the job's hold: %+v", h)
		}
		r := c.q.ttq(t, &alice, "queue", "--device", "0", "--cwd", b.dir, "--", "bash "+b.script+" queued "+b.dir)
		qid := strings.TrimSpace(r.stdout)
		if r.code != 0 || qid == "" {
			t.Fatalf("queue: %v", r)
		}
		if r := c.q.ttq(t, &alice, "--json", "job", qid); !strings.Contains(r.stdout, `"state":"queued"`) {
			t.Errorf("the queued job behind the hold: %v", r)
		}
		if r := c.q.ttq(t, nil, "--json", "status"); !strings.Contains(r.stdout, `"kind":"hold"`) {
			t.Errorf("status does not show the hold: %v", r)
		}
		b.release(t, "slurm")
		if exit := c.waitJob(t, id, time.Minute, "COMPLETED", "FAILED"); exit != "0:0" {
			t.Errorf("slurm job exit %s: %s", exit, readFile(filepath.Join(b.dir, id+".out")))
		}
		b.waitLine(t, time.Minute, "queued start 0")
		b.release(t, "queued")
		if r := c.q.ttq(t, &alice, "wait", qid); r.code != 0 {
			t.Errorf("queued job: %v", r)
		}
		b.wantTimeline(t, "slurm start 0", "slurm end 0", "queued start 0", "queued end 0")
		// Both got card 0 by its PCI address, queued's job from queued and
		// the Slurm job from its TaskProlog.
		want := "TT_QUEUE_DEVICE=0 TT_VISIBLE_DEVICES=" + card0 + "\n"
		if out := readFile(filepath.Join(b.dir, id+".out")); !strings.Contains(out, want) {
			t.Errorf("slurm job output %q, want %q", out, want)
		}
		if r := c.q.ttq(t, &alice, "result", qid); !strings.Contains(r.stdout, want) {
			t.Errorf("queued job output %v, want %q", r, want)
		}
		c.logHas(t, 10*time.Second, "epilog", "job "+id+":", "released hold(s) of the job ("+h.HoldID)
		c.waitEnded(t, h.HoldID, 10*time.Second)
	})

	// A queued job has card 0 first: the Slurm job's hold waits in the
	// card's queue behind it, its TaskProlog waits for the hold, and its
	// program starts only once the queued job has ended.
	t.Run("QueuedJobFirst", func(t *testing.T) {
		b := newBench(t, alice)
		r := c.q.ttq(t, &alice, "queue", "--device", "0", "--cwd", b.dir, "--", "bash "+b.script+" queued "+b.dir)
		if r.code != 0 {
			t.Fatalf("queue: %v", r)
		}
		qid := strings.TrimSpace(r.stdout)
		b.waitLine(t, time.Minute, "queued start 0")
		id := c.sbatch(t, alice, []string{"--gres=tt:1", "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir)
		c.waitHold(t, id, "queued", time.Minute)
		if state, _ := c.job(t, id); state != "RUNNING" {
			t.Errorf("slurm job %s is %s while its TaskProlog waits; want RUNNING", id, state)
		}
		if tl := b.timeline(); len(tl) != 1 {
			t.Errorf("timeline while the queued job runs: %q", tl)
		}
		b.release(t, "queued")
		c.waitStarted(t, b, id)
		c.waitHold(t, id, "active", 10*time.Second)
		b.release(t, "slurm")
		if exit := c.waitJob(t, id, time.Minute, "COMPLETED", "FAILED"); exit != "0:0" {
			t.Errorf("slurm job exit %s: %s", exit, readFile(filepath.Join(b.dir, id+".out")))
		}
		if r := c.q.ttq(t, &alice, "wait", qid); r.code != 0 {
			t.Errorf("queued job: %v", r)
		}
		b.wantTimeline(t, "queued start 0", "queued end 0", "slurm start 0", "slurm end 0")
		if out := readFile(filepath.Join(b.dir, id+".out")); !strings.Contains(out, "TT_QUEUE_DEVICE=0 TT_VISIBLE_DEVICES="+card0+"\n") {
			t.Errorf("slurm job output %q", out)
		}
	})

	// The Epilog queues a reset of the job's card by policy: on-failure
	// resets after a failed job only, always after every job, never
	// after none; the fake reset command records each.
	t.Run("EpilogReset", func(t *testing.T) {
		t.Cleanup(func() { c.setReset(t, "never") })
		want := len(resetLines(c.q))
		for _, tc := range []struct {
			policy string
			exit   int
			reset  bool
		}{{"on-failure", 0, false}, {"on-failure", 3, true}, {"always", 0, true}, {"never", 3, false}} {
			c.setReset(t, tc.policy)
			b := newBench(t, alice)
			b.release(t, "slurm")
			id := c.sbatch(t, alice, []string{"--gres=tt:1", "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir, strconv.Itoa(tc.exit))
			c.waitJob(t, id, time.Minute, "COMPLETED", "FAILED")
			c.logHas(t, 30*time.Second, "epilog", "job "+id+":", "released hold(s)")
			log := readFile(c.ttLog)
			queuedReset := strings.Contains(log, "job "+id+": reset of card 0 queued (policy "+tc.policy+fmt.Sprintf(", job exit %d:0)", tc.exit))
			if queuedReset != tc.reset {
				t.Errorf("policy %s, exit %d: reset queued %v, want %v; log:\n%s", tc.policy, tc.exit, queuedReset, tc.reset, log)
			}
			if tc.reset {
				want++
				eventually(t, time.Minute, "the reset of card 0 runs", func() (bool, string) {
					got := resetLines(c.q)
					return len(got) == want, strings.Join(got, "|")
				})
			}
		}
		if got := resetLines(c.q); len(got) != want || (want > 0 && got[len(got)-1] != "reset 0") {
			t.Errorf("resets %q, want %d", got, want)
		}
	})

	t.Run("HostileJobText", func(t *testing.T) { hostileJobText(t, c, alice) })

	t.Run("UnfitCardDrainsTheNode", func(t *testing.T) { unfitCardDrainsTheNode(t, c, alice) })

	// otelcol-tt labels the Slurm job's process on its card with its
	// Slurm job id, read from the job's cgroup, which slurmd made.
	t.Run("TTProcessCarriesSlurmJob", func(t *testing.T) {
		if !c.cgroup {
			t.Skip("jobs run outside Slurm's cgroups here (no writable cgroup v1 freezer hierarchy), so no slurm_job label can be read")
		}
		metrics := startCollector(t, c.dir, c.sysfs)
		b := newBench(t, alice)
		id := c.sbatch(t, alice, []string{"--gres=tt:1", "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir)
		t.Cleanup(func() { b.release(t, "slurm") }) // a failure here leaves card 0 to the next subtest
		c.waitStarted(t, b, id)
		pid, err := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(b.dir, "slurm.pid"))))
		if err != nil {
			t.Fatal(err)
		}
		metrics.tree.SetPids(0, pid, pid)
		var line string
		eventually(t, 30*time.Second, "tt_process of the Slurm job's pid with slurm_job="+id, func() (bool, string) {
			line = metricLine(metrics.get(t), pid)
			return strings.Contains(line, `slurm_job="`+id+`"`), line
		})
		t.Logf("%s", line)
		b.release(t, "slurm")
		c.waitJob(t, id, time.Minute, "COMPLETED", "FAILED")
	})

	// A job whose slurmd died (so no Epilog runs) holds its card only
	// until queued's Slurm check sees the job is no longer running.
	// Last: it restarts slurmd.
	t.Run("KilledSlurmd", func(t *testing.T) {
		b := newBench(t, alice)
		id := c.sbatch(t, alice, []string{"--gres=tt:1", "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir)
		c.waitStarted(t, b, id)
		h := c.waitHold(t, id, "active", 10*time.Second)
		c.slurmd.crash()
		killed := time.Now()
		t.Cleanup(func() {
			b.release(t, "slurm")
			c.startSlurmd(t)
			eventually(t, time.Minute, "the node is back", func() (bool, string) {
				r := c.slurm(t, "sinfo", "-h", "-N", "-o", "%T")
				st := strings.TrimSpace(r.stdout)
				return st == "idle" || st == "allocated" || st == "mixed", st
			})
			c.slurm(t, "scancel", id)
		})
		h = c.waitEnded(t, h.HoldID, 3*time.Minute)
		state, _ := c.job(t, id)
		t.Logf("the hold ended %s after slurmd was killed (%+v); the Slurm job is %s", time.Since(killed).Round(time.Second), h, state)
	})
}

// resetLines are the resets the fake reset command recorded.
func resetLines(q *queue) []string {
	s := strings.TrimSpace(readFile(q.resets))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// collector is otelcol-tt reading a fake driver tree.
type collector struct {
	tree    *kmdtest.Tree
	metrics string
}

// startCollector runs otelcol-tt with the shipped config, slurm_job
// attribution on, over a fake driver tree of its own.
func startCollector(t *testing.T, dir, sysfs string) *collector {
	t.Helper()
	bin, err := filepath.Abs(*otelcolBin)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("otelcol-tt: %v (make slurm-e2e builds it)", err)
		}
		t.Skipf("otelcol-tt: %v (make slurm-e2e builds it)", err)
	}
	col := &collector{tree: kmdtest.NewTree(t, filepath.Join(dir, "driver-otelcol")), metrics: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	health := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env := []string{
		"PATH=/usr/bin:/bin", "HOME=/root",
		fmt.Sprintf("OTELCOL_TT_TELEMETRY_PORT=%d", freePort(t)),
		"OTELCOL_TT_PROMETHEUS_ENDPOINT=" + col.metrics,
		"OTELCOL_TT_HEALTH_ENDPOINT=" + health,
		fmt.Sprintf("OTELCOL_TT_OTLP_GRPC_ENDPOINT=127.0.0.1:%d", freePort(t)),
		fmt.Sprintf("OTELCOL_TT_OTLP_HTTP_ENDPOINT=127.0.0.1:%d", freePort(t)),
		"OTELCOL_TT_DRIVER_PATH=" + col.tree.Dir,
		"OTELCOL_TT_SYSFS_PATH=" + sysfs,
		"OTELCOL_TT_HOSTNAME=" + nodeName,
	}
	startProc(t, "otelcol-tt", filepath.Join(dir, "log", "otelcol-tt.log"), env, bin,
		"--config="+filepath.Join(moduleRoot, "deploy", "otelcol-tt", "config.yaml"),
		"--set=receivers::ttprocess::collection_interval=1s",
		"--set=receivers::ttprocess::attribution::slurm_job=true")
	eventually(t, 30*time.Second, "otelcol-tt's health check", func() (bool, string) {
		resp, err := http.Get("http://" + health + "/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return col
}

// get reads the collector's /metrics.
func (col *collector) get(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + col.metrics + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricLine finds the tt_process line of pid on otelcol-tt's /metrics.
func metricLine(metrics string, pid int) string {
	sc := bufio.NewScanner(strings.NewReader(metrics))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tt_process{") && strings.Contains(sc.Text(), `pid="`+strconv.Itoa(pid)+`"`) {
			return sc.Text()
		}
	}
	return ""
}
