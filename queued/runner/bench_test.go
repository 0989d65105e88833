package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/account"
)

// BenchmarkSpawnFloor is the floor the queue's drain is measured against:
// `bash -c /bin/true` started and waited for from Go, nothing else.
func BenchmarkSpawnFloor(b *testing.B) {
	sh := Shell()
	for b.Loop() {
		if err := exec.Command(sh[0], sh[1], "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// buildHelper builds queued-exec, the exec helper queued uses in
// production, into a temporary directory.
func buildHelper(b *testing.B) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), HelperName)
	if msg, err := exec.Command("go", "build", "-o", out, "github.com/ttkit/ttkit/queued/cmd/queued-exec").CombinedOutput(); err != nil {
		b.Fatalf("building %s: %v\n%s", HelperName, err, msg)
	}
	return out
}

// BenchmarkRun is one job's worth of runner work: the exec helper
// (queued-exec, as installed), pipe, session, output file, wait, cleanup.
func BenchmarkRun(b *testing.B) {
	dir := b.TempDir()
	env := append(testEnv(), JobEnvVar+"=bench")
	helper := buildHelper(b)
	for b.Loop() {
		l := NewLog(filepath.Join(dir, "out"), 1<<20)
		if res := Run(Spec{Shell: Shell(), Cmd: "/bin/true", Dir: dir, Env: env, Helper: helper}, l, nil); res.ExitCode != 0 {
			b.Fatalf("%+v", res)
		}
		l.Close()
	}
}

// BenchmarkRunAsUser is BenchmarkRun in system mode: the job runs as
// another user (credentials set in the child, a session keyring of its
// own from a thread of its own). Compare with BenchmarkRun for the cost.
func BenchmarkRunAsUser(b *testing.B) {
	u := usertest.New(b, "ttqbench")
	a, err := account.LookupUID(u.UID)
	if err != nil {
		b.Fatal(err)
	}
	dir := usertest.OpenDir(b)
	out := b.TempDir()
	helper := buildHelper(b)
	env := append([]string{"PATH=/usr/bin:/bin"}, a.Env()...)
	for b.Loop() {
		l := NewLog(filepath.Join(out, "out"), 1<<20)
		if res := Run(Spec{Shell: Shell(), Cmd: "/bin/true", Dir: dir, Env: env, Account: &a, Helper: helper}, l, nil); res.ExitCode != 0 {
			b.Fatalf("%+v", res)
		}
		l.Close()
	}
}

// BenchmarkScanJob is the sweep that follows every job's end where no
// cgroup holds the job: one pass over /proc for what left its process
// group (its session, or its marker on a process started since it).
// BenchmarkRun pays it once per job.
func BenchmarkScanJob(b *testing.B) {
	self := os.Getpid()
	marks := marksOf("bench-none", uint32(os.Geteuid()))
	st, err := readStat("/proc", self)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if pids := scanJob("/proc", trace{sid: 1 << 30, started: st.start, audit: 1<<32 - 2, marks: marks}, self); len(pids) != 0 {
			b.Fatalf("found %v", pids)
		}
	}
}

// BenchmarkRunOutputIdleWatch is a job that writes 64 MiB, without and
// with an idle timeout: the watch costs each read of the job's output one
// clock read and an atomic store, and the run one timer.
func BenchmarkRunOutputIdleWatch(b *testing.B) {
	dir := b.TempDir()
	env := append(testEnv(), JobEnvVar+"=bench")
	helper := buildHelper(b)
	for _, idle := range []time.Duration{0, time.Hour} {
		b.Run("idle="+idle.String(), func(b *testing.B) {
			b.SetBytes(64 << 20)
			for b.Loop() {
				l := NewLog(filepath.Join(dir, "out"), 1<<20)
				spec := Spec{Shell: Shell(), Cmd: "head -c 67108864 /dev/zero", Dir: dir, Env: env, Helper: helper, IdleTimeout: idle}
				if res := Run(spec, l, nil); res.ExitCode != 0 {
					b.Fatalf("%+v", res)
				}
				l.Close()
			}
		})
	}
}

// BenchmarkSweepAfterJob is the whole sweep that follows a job's end
// where no cgroup holds the job, on this host as it is: the window of
// PIDs handed out since the job's leader (here, since the benchmark's
// own start of a process) bounds what it reads. Compare with
// BenchmarkScanJob, one pass over every process.
func BenchmarkSweepAfterJob(b *testing.B) {
	b.StopTimer()
	for range b.N {
		clock := readPIDClock("/proc")
		cmd := exec.Command("/bin/true")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if err := waitExited(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		st, err := readStat("/proc", cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		killStragglers("/proc", trace{sid: cmd.Process.Pid, started: st.start, audit: 1<<32 - 2,
			marks: marksOf("bench-none", uint32(os.Geteuid()))}, clock)
		b.StopTimer()
		cmd.Wait()
	}
}

// BenchmarkStartSpare is one spare helper made ready (its first status
// line read) and ended: forked by queued-exec's spawner, as queued makes
// them, against started by queued as before the spawner (issue 41). It
// reports, beside the time, queued's CPU a spare (this process's) and
// the spare's own (its children's, once reaped) and the spawner's.
func BenchmarkStartSpare(b *testing.B) {
	helper := buildHelper(b)
	for _, tc := range []struct {
		name string
		key  string
	}{{"spawner", helper}, {"started", helper + "-started"}} {
		b.Run(tc.name, func(b *testing.B) {
			h := helperExec{argv: []string{helper}}
			if tc.name == "started" {
				spawners.Lock()
				if spawners.byHelper == nil {
					spawners.byHelper = map[string]*spawner{}
				}
				spawners.byHelper[tc.key] = nil // a helper known to be no spawner
				spawners.Unlock()
			} else if spawnerFor(tc.key, h) == nil {
				b.Fatal("queued-exec is no spawner")
			}
			spawnerCPU := func() int64 { return 0 }
			if sp := spawnerFor(tc.key, h); sp != nil {
				path := "/proc/" + strconv.Itoa(sp.cmd.Process.Pid) + "/schedstat"
				spawnerCPU = func() int64 {
					b, _ := os.ReadFile(path) // nanoseconds on the CPU first
					ns, _ := strconv.ParseInt(strings.Fields(string(b) + " 0")[0], 10, 64)
					return ns
				}
			}
			fork0 := spawnerCPU()
			var self0, kids0 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &self0)
			unix.Getrusage(unix.RUSAGE_CHILDREN, &kids0)
			line := make([]byte, 64)
			for b.Loop() {
				sp, err := startSpare(tc.key, h)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := sp.sr.Read(line); err != nil || n == 0 {
					b.Fatalf("the spare's first status: %q, %v", line[:n], err)
				}
				sp.discard()
			}
			var self1, kids1 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &self1)
			unix.Getrusage(unix.RUSAGE_CHILDREN, &kids1)
			cpu := func(a, z unix.Rusage) float64 {
				return float64(z.Utime.Nano()+z.Stime.Nano()-a.Utime.Nano()-a.Stime.Nano()) / float64(b.N) / 1e3
			}
			b.ReportMetric(cpu(self0, self1), "queued-µs/op")
			b.ReportMetric(cpu(kids0, kids1), "spare-µs/op")
			b.ReportMetric(float64(spawnerCPU()-fork0)/float64(b.N)/1e3, "spawner-µs/op")
		})
	}
}
