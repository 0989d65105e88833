//go:build slurm

package slurm

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/usertest"
)

// nodeName is the Slurm node this host plays. slurmd is told its name
// (-N), so it need not be the host's.
const nodeName = "ttnode"

// slurmdTimeout is how long slurmctld waits for a silent slurmd before it
// marks the node down (slurm.conf SlurmdTimeout), short so that a killed
// slurmd's job is failed within the test's time.
const slurmdTimeout = 5

// slurmCheckInterval is queued's TT_DEVICE_SLURM_CHECK_INTERVAL, short so
// that a hold whose Slurm job is gone ends within the test's time.
const slurmCheckInterval = 2

// cluster is munged, slurmctld and slurmd on this host, configured in a
// directory of the test's, with the node's two cards as GRES tt over fake
// device files, and the scripts of deploy/slurm as Prolog, TaskProlog and
// Epilog, talking to queue.
type cluster struct {
	t      *testing.T
	dir    string
	conf   string
	env    []string // SLURM_CONF and PATH, for the Slurm commands
	sysfs  string
	devDir string
	// scripts holds deploy/slurm's scripts and their tt-slurm.env.
	scripts string
	// ttLog is the Prolog's and Epilog's log (TT_SLURM_LOG), state
	// their markers (TT_SLURM_STATE_DIR).
	ttLog, state string
	// cgroup says whether jobs run in Slurm's cgroups (proctrack/cgroup
	// on a cgroup v1 freezer), which the slurm_job label is read from.
	cgroup     bool
	ctldLog    string
	dLog       string
	slurmd     *proc
	slurmdArgs []string
	q          *queue
	// heartbeats moves the fake firmware heartbeats every 100 ms, but
	// those of the cards stall stopped.
	heartbeats *kmdtest.Heartbeats
}

// queue is the system-mode queued the scripts talk to.
type queue struct {
	sock   string
	resets string // the fake reset command appends "reset <card>" here
	log    string
	proc   *proc
}

// openDir is a new directory every user may enter (0755 up from the
// test's temporary directory).
func openDir(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// startQueue runs queued in system mode as root on cards 0 and 1, with a
// fake reset command that records the card it reset and a health check
// that passes, each job given its cards' PCI addresses from the fake
// sysfs (TT_DEVICE_VISIBLE=bdf), and its Slurm check every
// slurmCheckInterval seconds (squeue, with the cluster's slurm.conf).
func startQueue(t *testing.T, dir, slurmConf, driver, sysfs string) *queue {
	t.Helper()
	qdir := openDir(t, filepath.Join(dir, "queued"))
	q := &queue{sock: filepath.Join(qdir, "queued.sock"), resets: filepath.Join(qdir, "resets.log"), log: filepath.Join(qdir, "queued.log")}
	writeFile(t, q.resets, "", 0o644)
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"SLURM_CONF=" + slurmConf,
		"TT_DEVICE_IDS=0,1",
		"TT_DEVICE_SOCKET=" + q.sock,
		"TT_DEVICE_LOG_DIR=" + filepath.Join(dir, "queued-state"),
		"TT_DEVICE_RESET_CMD=echo reset {device} >> " + q.resets,
		"TT_DEVICE_HEALTH_CHECK_CMD=true",
		"TT_DEVICE_DRIVER_PATH=" + driver,
		"TT_DEVICE_KILL_GRACE=2", "TT_DEVICE_TERM_GRACE=2",
		"TT_DEVICE_SLURM_CHECK_INTERVAL=" + strconv.Itoa(slurmCheckInterval),
		"TT_DEVICE_VISIBLE=bdf",
		"TT_DEVICE_SYSFS_PATH=" + sysfs,
	}
	q.proc = startProc(t, "queued", q.log, env, filepath.Join(bins, "queued"))
	eventually(t, 20*time.Second, "queued answers on its socket", func() (bool, string) {
		if q.proc.exited() {
			t.Fatalf("queued exited at start:\n%s", readFile(q.log))
		}
		r := run(t, nil, q.cliEnv(), filepath.Join(bins, "tt-device-queue"), "status")
		return r.code == 0, r.String()
	})
	return q
}

// cliEnv is the environment the CLI needs to reach the queue.
func (q *queue) cliEnv() []string {
	return []string{"PATH=/usr/bin:/bin", "HOME=/root", "TT_DEVICE_URL=unix://" + q.sock}
}

// ttq runs the CLI as u (root when nil).
func (q *queue) ttq(t *testing.T, u *usertest.User, args ...string) result {
	t.Helper()
	env := q.cliEnv()
	if u != nil {
		env = []string{"PATH=/usr/bin:/bin", "TT_DEVICE_URL=unix://" + q.sock}
	}
	return run(t, u, env, append([]string{filepath.Join(bins, "tt-device-queue")}, args...)...)
}

// startCluster writes the configuration and starts munged, slurmctld and
// slurmd, and waits until the node is idle.
func startCluster(t *testing.T, dir string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	c.env = []string{"SLURM_CONF=" + c.conf, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, d := range []string{"state", "spool", "log", "munge", "tt-state"} {
		openDir(t, filepath.Join(dir, d))
	}
	c.ttLog = filepath.Join(dir, "log", "tt-slurm.log")
	c.state = filepath.Join(dir, "tt-state")
	c.ctldLog = filepath.Join(dir, "log", "slurmctld.log")
	c.dLog = filepath.Join(dir, "log", "slurmd.log")

	// The cards: two fake device nodes (character devices, as the driver
	// makes them) and a fake sysfs that types them p150a.
	c.devDir = openDir(t, filepath.Join(dir, "dev", "tenstorrent"))
	for _, n := range []string{"0", "1"} {
		if err := unix.Mknod(filepath.Join(c.devDir, n), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatalf("making a fake device node: %v", err)
		}
	}
	sysfs := kmdtest.BusySysfs(t, openDir(t, filepath.Join(dir, "sysfs")), 2)
	c.sysfs = sysfs.Root
	c.heartbeats = sysfs.Beat(100*time.Millisecond, 0, 1)

	// gres.conf and the node's Gres= come from the command under test.
	r := run(t, nil, []string{"PATH=/usr/bin:/bin", "HOME=/root"}, filepath.Join(bins, "tt-device-queue"), "--json", "slurm", "gres",
		"--sysfs", c.sysfs, "--dev-dir", c.devDir, "--node", nodeName)
	var gres struct {
		GresConf  []string `json:"gres_conf"`
		SlurmConf []string `json:"slurm_conf"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &gres) != nil || len(gres.SlurmConf) != 2 {
		t.Fatalf("tt-device-queue slurm gres: %v", r)
	}
	writeFile(t, filepath.Join(dir, "gres.conf"), strings.Join(gres.GresConf, "\n")+"\n", 0o644)
	nodeGres := strings.TrimPrefix(gres.SlurmConf[1], "NodeName="+nodeName+" ")

	c.installScripts(t)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("TT_SLURM_E2E_LOG") != "" {
			t.Logf("--- the scripts' log (%s) ---\n%s", c.ttLog, readFile(c.ttLog))
			t.Logf("--- slurmd's log (%s) ---\n%s", c.dLog, tail([]byte(readFile(c.dLog)), 8000))
		}
	})

	// munged: its own key, socket and files.
	keyDir := filepath.Join(dir, "munge-key")
	if err := os.Mkdir(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(keyDir, "munge.key"), string(key), 0o400)
	munge := filepath.Join(dir, "munge", "munge.socket")
	startProc(t, "munged", filepath.Join(dir, "log", "munged.out"), c.env, "munged", "--foreground", "--force",
		"--key-file="+filepath.Join(keyDir, "munge.key"), "--socket="+munge,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "log", "munged.log"),
		"--seed-file="+filepath.Join(keyDir, "seed"))
	eventually(t, 10*time.Second, "munged's socket", func() (bool, string) {
		_, err := os.Stat(munge)
		return err == nil, fmt.Sprint(err)
	})

	// Jobs run in Slurm's cgroups where the host has a cgroup v1 freezer
	// hierarchy to make them in (this one does; cgroup v2 is not
	// delegated here), else they are tracked by their process tree.
	proctrack := "proctrack/linuxproc"
	if fi, err := os.Stat("/sys/fs/cgroup/freezer"); err == nil && fi.IsDir() && unix.Access("/sys/fs/cgroup/freezer", unix.W_OK) == nil {
		proctrack, c.cgroup = "proctrack/cgroup", true
		writeFile(t, filepath.Join(dir, "cgroup.conf"), "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n", 0o644)
		t.Cleanup(removeSlurmCgroups)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	conf := fmt.Sprintf(`# Written by test/slurm: one host, controller and node.
ClusterName=ttkit
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[4]s
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[6]s
SlurmdLogFile=%[7]s
SlurmdDebug=debug
MailProg=/bin/true
ProctrackType=%[8]s
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdTimeout=%[9]d
ReturnToService=2
SlurmdParameters=config_overrides
GresTypes=tt
PrologFlags=Alloc
Prolog=%[10]s/prolog.sh
TaskProlog=%[10]s/taskprolog.sh
Epilog=%[10]s/epilog.sh
NodeName=%[11]s NodeAddr=127.0.0.1 CPUs=%[12]d RealMemory=1000 %[13]s State=UNKNOWN
PartitionName=tt Nodes=ALL Default=YES MaxTime=10 State=UP
`, host, freePort(t), freePort(t), munge, dir, c.ctldLog, c.dLog, proctrack, slurmdTimeout, c.scripts, nodeName, max(runtime.NumCPU(), 2), nodeGres)
	writeFile(t, c.conf, conf, 0o644)

	// queued, before the jobs that would talk to it.
	driver := kmdtest.NewTree(t, filepath.Join(dir, "driver-queued")).Dir
	c.q = startQueue(t, dir, c.conf, driver, c.sysfs)

	ctld := startProc(t, "slurmctld", filepath.Join(dir, "log", "slurmctld.out"), c.env, "slurmctld", "-D", "-c", "-f", c.conf)
	c.slurmdArgs = []string{"slurmd", "-D", "-N", nodeName, "-f", c.conf}
	c.startSlurmd(t)
	eventually(t, 30*time.Second, "the node is idle", func() (bool, string) {
		if ctld.exited() {
			t.Fatalf("slurmctld exited:\n%s", readFile(c.ctldLog))
		}
		r := c.slurm(t, "sinfo", "-h", "-N", "-o", "%T %G")
		return strings.HasPrefix(strings.TrimSpace(r.stdout), "idle "), r.String()
	})
	return c
}

// stall stops (true) or restarts card's heartbeat.
func (c *cluster) stall(card int, stop bool) { c.heartbeats.Stall(card, stop) }

// startSlurmd starts (or starts again) the node's slurmd.
func (c *cluster) startSlurmd(t *testing.T) {
	t.Helper()
	c.slurmd = startProc(t, "slurmd", filepath.Join(c.dir, "log", "slurmd.out"), c.env, c.slurmdArgs...)
	// Cleanups run last first: every job is cancelled before this slurmd,
	// and then slurmctld, are stopped.
	t.Cleanup(c.cancelAll)
}

// installScripts copies deploy/slurm's scripts into the cluster's
// directory, with the tt-slurm.env that points them at the test's queue,
// CLI, state directory, log and sysfs.
func (c *cluster) installScripts(t *testing.T) {
	t.Helper()
	c.scripts = openDir(t, filepath.Join(c.dir, "tt"))
	for _, name := range []string{"prolog.sh", "taskprolog.sh", "epilog.sh", "tt-slurm.sh"} {
		b, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", "slurm", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(c.scripts, name), string(b), 0o755)
	}
	c.setReset(t, "never")
}

// setReset writes tt-slurm.env with the given TT_SLURM_RESET; the
// scripts read it each time they run.
func (c *cluster) setReset(t *testing.T, policy string) {
	t.Helper()
	env := fmt.Sprintf(`# Written by test/slurm.
TT_SLURM_CLI=%s
TT_SLURM_SOCKET=%s
TT_SLURM_STATE_DIR=%s
TT_SLURM_LOG=%s
TT_SLURM_SYSFS=%s
TT_SLURM_HOLD_WAIT=90s
TT_SLURM_FIT_WAIT=20s
TT_SLURM_RESET=%s
`, filepath.Join(bins, "tt-device-queue"), filepath.Join(c.dir, "queued", "queued.sock"), c.state, c.ttLog, c.sysfs, policy)
	tmp := filepath.Join(c.scripts, ".tt-slurm.env")
	writeFile(t, tmp, env, 0o644)
	if err := os.Rename(tmp, filepath.Join(c.scripts, "tt-slurm.env")); err != nil {
		t.Fatal(err)
	}
}

// slurm runs a Slurm command as root.
func (c *cluster) slurm(t *testing.T, argv ...string) result {
	t.Helper()
	return run(t, nil, c.env, argv...)
}

// sbatch submits script with its arguments as u, with the sbatch options
// opts, and returns the job id.
func (c *cluster) sbatch(t *testing.T, u usertest.User, opts []string, script string, args ...string) string {
	t.Helper()
	argv := append([]string{"sbatch", "--parsable", "--time=3", "--chdir=" + u.Home}, opts...)
	argv = append(append(argv, script), args...)
	r := run(t, &u, append([]string{"PATH=/usr/bin:/bin"}, c.env...), argv...)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^[0-9]+$`).MatchString(id) {
		t.Fatalf("sbatch: %v", r)
	}
	return id
}

// job reads a job's state and exit code from scontrol ("" when slurmctld
// no longer knows the job).
func (c *cluster) job(t *testing.T, id string) (state, exit string) {
	t.Helper()
	r := c.slurm(t, "scontrol", "-o", "show", "job", id)
	if m := regexp.MustCompile(`JobState=(\S+)`).FindStringSubmatch(r.stdout); m != nil {
		state = m[1]
	}
	if m := regexp.MustCompile(`ExitCode=(\S+)`).FindStringSubmatch(r.stdout); m != nil {
		exit = m[1]
	}
	return state, exit
}

// waitJob waits until the job is in one of states and returns its exit
// code.
func (c *cluster) waitJob(t *testing.T, id string, within time.Duration, states ...string) string {
	t.Helper()
	var exit string
	eventually(t, within, "slurm job "+id+" in "+strings.Join(states, "|"), func() (bool, string) {
		var state string
		state, exit = c.job(t, id)
		for _, s := range states {
			if state == s {
				return true, state
			}
		}
		return false, "state " + state + ", exit " + exit
	})
	return exit
}

// cancelAll cancels every job and waits (bounded) until slurmctld has none
// left running, so that no job outlives the test.
func (c *cluster) cancelAll() {
	t := c.t
	c.slurm(t, "scancel", "--partition=tt")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := c.slurm(t, "squeue", "-h", "-t", "R,CG,CF,PD,S", "-o", "%i")
		if strings.TrimSpace(r.stdout) == "" || r.code != 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logHas waits until the scripts' log has a line holding every piece.
func (c *cluster) logHas(t *testing.T, within time.Duration, pieces ...string) string {
	t.Helper()
	var found string
	eventually(t, within, fmt.Sprintf("a line in %s with %q", c.ttLog, pieces), func() (bool, string) {
		for _, line := range strings.Split(readFile(c.ttLog), "\n") {
			ok := true
			for _, p := range pieces {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				found = line
				return true, line
			}
		}
		return false, readFile(c.ttLog)
	})
	return found
}

// removeSlurmCgroups removes the cgroups slurmd made for the node (a
// slurm_<node> tree in each cgroup v1 hierarchy), deepest first, once
// their processes are gone.
func removeSlurmCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/slurm_" + nodeName)
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		deadline := time.Now().Add(10 * time.Second)
		for i := len(dirs) - 1; i >= 0; i-- {
			for os.Remove(dirs[i]) != nil && time.Now().Before(deadline) {
				if _, err := os.Stat(dirs[i]); err != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}
