package scheduler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// faultPlan fails exactly the nth write that carries job records (counting
// from 1) and counts every such write; n 0 fails nothing.
type faultPlan struct {
	mu     sync.Mutex
	n      int
	writes int
	fired  string // the records the failed write carried
}

func (p *faultPlan) check(jobs []store.Job) error {
	if len(jobs) == 0 { // probes and pruning
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes++
	if p.writes != p.n {
		return nil
	}
	var what []string
	for _, j := range jobs {
		what = append(what, fmt.Sprintf("%s %s %s", j.ID[:6], j.State, j.Outcome))
	}
	p.fired = strings.Join(what, ", ")
	return errInjected
}

// faultScenario is one pass through every transition a job record goes
// through: submitted; started; done as success, failure (with the next
// job's start in the same commit), timeout, success after two iterations;
// killed while queued; killed while running. It returns how many writes
// carried job records. Every write that fails is one the scheduler must
// survive: a submission that failed is refused (and retried, as a client
// would after a 503) and never exists or runs; any other failure holds the
// records, stops dispatch and resumes it once writes work again. At the
// end every acknowledged job has its final outcome, ran exactly as many
// times as it should, and the store holds exactly the acknowledged jobs.
func faultScenario(t *testing.T, n int) (writes int, fired string) {
	plan := &faultPlan{n: n}
	t.Cleanup(func() {
		plan.mu.Lock()
		defer plan.mu.Unlock()
		if t.Failed() {
			t.Logf("failed write %d of %d: %s", n, plan.writes, plan.fired)
		}
	})
	b := setup(t, nil)
	b.fs.set(plan.check)

	marker := func(i int) string { return filepath.Join(b.work, fmt.Sprintf("m%d", i)) }
	runs := func(i int) int {
		data, err := os.ReadFile(marker(i))
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(data), "x")
	}
	// retry calls op until the store takes it, as a client retries after
	// a 503; any other error ends the test.
	retry := func(what string, op func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := op()
			if err == nil {
				return
			}
			if !errors.Is(err, ErrPersistence) || time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	var acked []string
	submit := func(i int, spec JobSpec) (info JobInfo) {
		t.Helper()
		spec.Cmd = fmt.Sprintf("echo x >> %s; %s", marker(i), spec.Cmd)
		spec.Cwd = b.work
		retry(fmt.Sprintf("submit %d", i), func() (err error) {
			info, err = b.s.Submit(spec)
			return err
		})
		acked = append(acked, info.ID)
		return info
	}
	kill := func(id string) {
		t.Helper()
		retry("kill "+id[:6], func() error {
			_, err := b.s.Kill(id)
			return err
		})
	}

	type want struct {
		outcome store.Outcome
		runs    int
	}
	wants := map[string]want{}
	ids := map[string]int{}
	add := func(i int, info JobInfo, w want) { wants[info.ID] = w; ids[info.ID] = i }

	add(0, submit(0, JobSpec{Card: 0, Cmd: "true"}), want{store.OutcomeSuccess, 1})
	add(1, submit(1, JobSpec{Card: 0, Cmd: "exit 3"}), want{store.OutcomeFailure, 1})
	add(2, submit(2, JobSpec{Card: 0, Cmd: "exec sleep 30", Timeout: 150 * time.Millisecond}), want{store.OutcomeTimeout, 1})
	add(3, submit(3, JobSpec{Card: 1, Cmd: "true", Repeat: 2}), want{store.OutcomeSuccess, 2})
	running := submit(4, JobSpec{Card: 1, Cmd: "exec sleep 30"})
	add(4, running, want{store.OutcomeKilled, 1})
	queued := submit(5, JobSpec{Card: 1, Cmd: "true"})
	add(5, queued, want{store.OutcomeKilled, 0})

	poll(t, "job 4 running", func() bool { return runs(4) == 1 })
	kill(queued.ID)
	kill(running.ID)

	for id, w := range wants {
		// A done job's record may still be held in memory; it is shown
		// done meanwhile, and written once the store takes writes again.
		info := b.wait(id, "done", func(w Watch) bool { return w.Done }).Info
		if info.Outcome != w.outcome {
			t.Errorf("job %d (%s): outcome %s, want %s", ids[id], id[:6], info.Outcome, w.outcome)
		}
	}
	poll(t, "held records written", func() bool {
		st := b.s.Status()
		return st.Persistence.OK && st.Persistence.Held == 0
	})
	for id, w := range wants {
		rec, err := b.st.Job(id)
		if err != nil || rec.State != store.StateDone || rec.Outcome != w.outcome {
			t.Errorf("job %d stored as %+v, %v", ids[id], rec, err)
		}
		if got := runs(ids[id]); got != w.runs {
			t.Errorf("job %d ran %d times, want %d", ids[id], got, w.runs)
		}
	}
	active, err := b.st.Active()
	if err != nil {
		t.Fatal(err)
	}
	finished, err := b.st.Finished()
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != 0 || len(finished) != len(acked) {
		t.Errorf("store holds %d active and %d finished jobs; %d were acknowledged", len(active), len(finished), len(acked))
	}
	if st := b.s.Status(); !st.Persistence.OK || st.Persistence.Held != 0 {
		t.Errorf("persistence after the scenario: %+v", st.Persistence)
	}
	plan.mu.Lock()
	defer plan.mu.Unlock()
	return plan.writes, plan.fired
}

// TestScheduler_FaultAtEveryTransition runs the scenario once without a
// fault to count its writes, then once per write with exactly that write
// failing, so that every transition (submit, start, done, done plus the
// next start, kill of a queued job, kill of a running one) meets a failed
// commit in some run.
func TestScheduler_FaultAtEveryTransition(t *testing.T) {
	t.Parallel()
	total, _ := faultScenario(t, 0)
	if total < 8 {
		t.Fatalf("the scenario made only %d writes", total)
	}
	for n := 1; n <= total; n++ {
		t.Run(fmt.Sprintf("write%02d", n), func(t *testing.T) {
			t.Parallel()
			_, fired := faultScenario(t, n)
			// Group commits can merge writes, so the last few may not exist
			// in every run; every earlier one must have failed.
			if fired == "" && n <= total-2 {
				t.Errorf("write %d of about %d never happened", n, total)
			}
			t.Logf("failed write %d: %s", n, fired)
		})
	}
}
