package procscan

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

const (
	testPod       = "8f3c2a1e-4b5d-4c6e-9f70-1a2b3c4d5e6f"
	testContainer = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"
	testCRIO      = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678901234567890abcdefabcdef"
	testDocker    = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	testJob       = "0123456789abcdef0123456789abcdef"
)

// TestParseCgroup reads the shared cgroup files (testdata/cgroup): the
// container layouts of containerd, CRI-O and Docker under both cgroup
// drivers, Slurm's v1 and v2 layouts, and paths that name none of them.
func TestParseCgroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file                  string
		slurm, container, pod string
	}{
		{"containerd-systemd-v2", "", testContainer, testPod},
		{"containerd-guaranteed-systemd-v2", "", testContainer, testPod},
		{"containerd-cgroupfs-v1", "", testContainer, testPod},
		{"crio-systemd-v2", "", testCRIO, testPod},
		{"crio-conmon-systemd-v2", "", "", testPod}, // the monitor, not the container
		{"crio-cgroupfs-v1", "", testCRIO, testPod},
		{"crio-cgroupfs-v2", "", testCRIO, testPod},
		{"crio-conmon-cgroupfs-v2", "", "", testPod},
		{"podman-cgroupfs-v2", "", testDocker, ""},
		{"docker-systemd-v2", "", testDocker, ""},
		{"docker-cgroupfs-v1", "", testDocker, ""},
		{"slurm-v1", "4242", "", ""},
		{"slurm-v2", "4242", "", ""},
		{"host-session-v2", "", "", ""},
		{"queued-job-v2", "", "", ""}, // a queued job's cgroup is no container
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join(kmdtest.Testdata(t), "cgroup", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			slurm, container, pod := ParseCgroup(data)
			if slurm != tc.slurm || container != tc.container || pod != tc.pod {
				t.Errorf("ParseCgroup = slurm %q, container %q, pod %q; want %q, %q, %q",
					slurm, container, pod, tc.slurm, tc.container, tc.pod)
			}
		})
	}
}

func TestParseCgroup_Malformed(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"",
		"garbage",
		"0::/job_12/step_0",                      // a job_ element, but no slurm
		"0::/slurm/job_x12/step_0",               // not a number
		"0::/kubepods/besteffort/podnot-a-uid/x", // not a UID
		"0::/docker/0123",                        // too short for an id
		"0::/kubepods.slice/kubepods-besteffort-pod.slice",
		"0::/system.slice/cri-containerd-" + strings.Repeat("g", 64) + ".scope",
		"0::/system.slice/" + testDocker + ".scope", // a scope no runtime names
		"0::/kubepods/besteffort/crio-conmon-" + testCRIO,
	} {
		if s, c, p := ParseCgroup([]byte(in)); s != "" || c != "" || p != "" {
			t.Errorf("ParseCgroup(%q) = %q, %q, %q; want nothing", in, s, c, p)
		}
	}
	// The <slice>:<runtime>:<id> form some setups write.
	_, c, p := ParseCgroup([]byte("1:name=systemd:/system.slice/containerd.service/kubepods-burstable-pod" +
		strings.ReplaceAll(testPod, "-", "_") + ".slice:cri-containerd:" + testContainer + "\n"))
	if c != testContainer || p != testPod {
		t.Errorf("slice:runtime:id form: container %q, pod %q", c, p)
	}
}

func TestJobFromEnviron(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) []byte { return []byte(strings.Join(kv, "\x00") + "\x00") }
	for _, tc := range []struct {
		name    string
		environ []byte
		want    string
	}{
		{"last, as queued appends it", env("PATH=/bin", "HOME=/root", JobEnvVar+"="+testJob, "TT_QUEUE_DEVICE=0"), testJob},
		{"first wins, as for getenv", env(JobEnvVar+"="+testJob, JobEnvVar+"=ffffffffffffffffffffffffffffffff"), testJob},
		{"no trailing NUL", []byte("A=b\x00" + JobEnvVar + "=" + testJob), testJob},
		{"absent", env("PATH=/bin", "XTT_QUEUE_JOB_ID="+testJob), ""},
		{"not a job id", env(JobEnvVar + "=$(rm -rf /)"), ""},
		{"upper case", env(JobEnvVar + "=" + strings.ToUpper(testJob)), ""},
		{"empty", nil, ""},
	} {
		if got := jobFromEnviron(tc.environ); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestScan_Attribution reads each holder's attribution from a fake procfs
// once, with its identity; a process whose files are missing gets Unknown
// for what could not be read, and switched-off reads stay empty.
func TestScan_Attribution(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	cgroup, err := os.ReadFile(filepath.Join(kmdtest.Testdata(t), "cgroup", "containerd-systemd-v2"))
	if err != nil {
		t.Fatal(err)
	}
	h.set(t, 100, "stat", fakeStat(100, "python3", 7))
	h.set(t, 100, "cmdline", "python3\x00train.py\x00")
	h.set(t, 100, "environ", "PATH=/bin\x00"+JobEnvVar+"="+testJob+"\x00")
	h.set(t, 100, "cgroup", string(cgroup))
	h.set(t, 200, "stat", fakeStat(200, "tt-smi", 8))
	h.set(t, 200, "cmdline", "tt-smi\x00")
	h.list(t, 100, 200)
	owner := userName(uint32(os.Getuid())) // the fake /proc/<pid> is the test's own

	ids := identities(t, h.scanner(t, Options{Attribution: AttributionOptions{User: true, QueuedJob: true, Cgroup: true}}))
	want := Attribution{User: owner, QueuedJob: testJob, ContainerID: testContainer, PodUID: testPod}
	if got := ids[100].Attribution; got != want {
		t.Errorf("pid 100: %+v, want %+v", got, want)
	}
	want = Attribution{User: owner, QueuedJob: Unknown, SlurmJob: Unknown, ContainerID: Unknown, PodUID: Unknown}
	if got := ids[200].Attribution; got != want {
		t.Errorf("pid 200 (no environ, no cgroup): %+v, want %+v", got, want)
	}

	ids = identities(t, h.scanner(t, Options{Attribution: AttributionOptions{QueuedJob: true}}))
	if got := ids[100].Attribution; got != (Attribution{QueuedJob: testJob}) {
		t.Errorf("only queued_job on: %+v", got)
	}
	ids = identities(t, h.scanner(t, Options{}))
	if got := ids[100].Attribution; got != (Attribution{}) {
		t.Errorf("attribution off: %+v", got)
	}
}

// TestScan_AttributionRealProcess reads a real process that carries
// queued's job marker, as a job's child does, and names its owner.
func TestScan_AttributionRealProcess(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), JobEnvVar+"="+testJob)
	pid := startProcess(t, cmd, "sleep 300")
	driver := t.TempDir()
	writeFile(t, driver, "0/pids", pidLines(pid))
	s := New(Options{DriverPath: driver, Attribution: AttributionOptions{User: true, QueuedJob: true, Cgroup: true}})
	t.Cleanup(func() { _ = s.Close() })
	ids := identities(t, s)
	got := ids[pid].Attribution
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if got.User != me.Username || got.QueuedJob != testJob {
		t.Errorf("real process: %+v; want user %q and job %s", got, me.Username, testJob)
	}
	if got.SlurmJob == Unknown || got.ContainerID == Unknown || got.PodUID == Unknown {
		t.Errorf("a readable cgroup file gave Unknown: %+v", got)
	}
}

// A holder whose read has not returned is pending, and so is its
// attribution: Unknown, never "no job".
func TestScan_PendingAttributionIsUnknown(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	fifo := filepath.Join(h.proc, "300")
	if err := os.MkdirAll(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	kmdtest.Fifo(t, filepath.Join(fifo, "cmdline")) // a read that blocks
	writeFile(t, h.proc, "300/stat", fakeStat(300, "stuck", 9))
	h.list(t, 300)
	s := h.scanner(t, Options{ReadTimeout: 20 * time.Millisecond, Attribution: AttributionOptions{QueuedJob: true}})
	id := identities(t, s)[300]
	if !id.Pending || id.Attribution.QueuedJob != Unknown {
		t.Errorf("pending %v, attribution %+v; want pending with queued job Unknown", id.Pending, id.Attribution)
	}
}

// Only slurmd's cgroup layouts name a Slurm job; a user's delegated
// subtree never does, whatever it holds.
func TestSlurmJobDir_OnlySlurmdsLayouts(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/slurm/uid_1000/job_42/step_0/task_0":                                 "/slurm/uid_1000/job_42",
		"/slurm_ttnode/uid_1000/job_42/step_batch/task_0":                      "/slurm_ttnode/uid_1000/job_42", // built for several slurmds a host (Debian's)
		"/slurm_/uid_1000/job_42":                                              "",
		"/slurmx/uid_1000/job_42":                                              "",
		"/system.slice/slurmstepd.scope/job_42/step_0/user/task_0":             "/system.slice/slurmstepd.scope/job_42",
		"/system.slice/node1_slurmstepd.scope/job_42/step_batch":               "/system.slice/node1_slurmstepd.scope/job_42",
		"/user.slice/user-1000.slice/user@1000.service/app.slice/slurm/job_42": "",
		"/user.slice/user-1000.slice/user@1000.service/slurm/uid_1000/job_42":  "",
		"/system.slice/slurmstepd.scope/user@1000.service/job_42":              "",
		"/mine/slurm/uid_1000/job_42":                                          "",
		"/slurm/uid_x/job_42":                                                  "",
		"/system.slice/slurmstepd.scope/job_4x2":                               "",
	} {
		if _, dir := slurmJobDir(path); dir != want {
			t.Errorf("slurmJobDir(%q) = %q, want %q", path, dir, want)
		}
	}
}

// The AI agent a queued job was queued by (TT_QUEUE_AGENT, set by queued
// only in an agent's job): printable ASCII, at most 64 bytes, as queued
// accepts it; absent is empty. Like the job id it is a claim.
func TestAgentFromEnviron(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) []byte { return []byte(strings.Join(kv, "\x00") + "\x00") }
	for _, tc := range []struct {
		name    string
		environ []byte
		want    string
	}{
		{"an agent's job", env("PATH=/bin", JobEnvVar+"="+testJob, "TT_QUEUE_DEVICE=0", AgentEnvVar+"=claude-code"), "claude-code"},
		{"first wins", env(AgentEnvVar+"=codex", AgentEnvVar+"=cursor"), "codex"},
		{"a person's job", env("PATH=/bin", JobEnvVar+"="+testJob), ""},
		{"control characters dropped", env(AgentEnvVar + "=a\x1b[31mb\tc"), "a[31mbc"},
		{"cut to 64 bytes", env(AgentEnvVar + "=" + strings.Repeat("x", 100)), strings.Repeat("x", 64)},
		{"empty", nil, ""},
	} {
		if got := agentFromEnviron(tc.environ); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestScan_AttributionAgent reads the agent with the job from the same
// environment; a process whose environment cannot be read is Unknown.
func TestScan_AttributionAgent(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.set(t, 100, "stat", fakeStat(100, "python3", 7))
	h.set(t, 100, "cmdline", "python3\x00train.py\x00")
	h.set(t, 100, "environ", "PATH=/bin\x00"+JobEnvVar+"="+testJob+"\x00"+AgentEnvVar+"=claude-code\x00")
	h.set(t, 200, "stat", fakeStat(200, "tt-smi", 8))
	h.set(t, 200, "cmdline", "tt-smi\x00")
	h.list(t, 100, 200)
	ids := identities(t, h.scanner(t, Options{Attribution: AttributionOptions{QueuedAgent: true}}))
	if got := ids[100].Attribution; got != (Attribution{QueuedAgent: "claude-code"}) {
		t.Errorf("pid 100: %+v", got)
	}
	if got := ids[200].Attribution; got != (Attribution{QueuedAgent: Unknown}) {
		t.Errorf("pid 200 (no environ): %+v", got)
	}
	ids = identities(t, h.scanner(t, Options{Attribution: AttributionOptions{QueuedJob: true, QueuedAgent: true}}))
	if got := ids[100].Attribution; got != (Attribution{QueuedJob: testJob, QueuedAgent: "claude-code"}) {
		t.Errorf("pid 100 with both: %+v", got)
	}
}
