package ttprocessreceiver

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/procscan"
)

const (
	testJob       = "0123456789abcdef0123456789abcdef"
	testPod       = "8f3c2a1e-4b5d-4c6e-9f70-1a2b3c4d5e6f"
	testContainer = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"
)

var attributionLabels = []string{"user", "queued_job", "slurm_job", "container_id", "k8s_pod_uid"}

// attributed writes a holder's environ and cgroup (a shared fixture of
// testdata/cgroup, or none).
func (h *fakeHost) attributed(pid int, job, cgroupFixture string) {
	h.t.Helper()
	dir := filepath.Join(h.proc, strconv.Itoa(pid))
	env := "PATH=/usr/bin\x00HOME=/home/alice\x00"
	if job != "" {
		env += procscan.JobEnvVar + "=" + job + "\x00TT_QUEUE_DEVICE=0\x00"
	}
	h.write(filepath.Join(dir, "environ"), env)
	cgroup := "0::/user.slice/user-1000.slice/session-3.scope\n"
	if cgroupFixture != "" {
		b, err := os.ReadFile(filepath.Join(kmdtest.Testdata(h.t), "cgroup", cgroupFixture))
		require.NoError(h.t, err)
		cgroup = string(b)
	}
	h.write(filepath.Join(dir, "cgroup"), cgroup)
}

func allAttribution(cfg *Config) {
	cfg.Attribution = AttributionConfig{User: true, QueuedJob: true, SlurmJob: true, ContainerID: true, K8sPodUID: true}
}

// populateAttributed is a shared host: a queued job, a Slurm job, a pod's
// container, a process of no job, and one whose environment and cgroup
// cannot be read.
func populateAttributed(h *fakeHost) {
	h.process(4242, 9001, "python3", "python3", "train.py")
	h.attributed(4242, testJob, "")
	h.process(4243, 9002, "python3", "python3", "-m", "pytest", "tests/test_conv.py")
	h.attributed(4243, "", "slurm-v2")
	h.cgroupDir("/system.slice/slurmstepd.scope/job_4242", 0) // slurmd's
	h.process(4244, 9003, "python3", "python3", "serve.py")
	h.attributed(4244, "", "containerd-systemd-v2")
	h.process(4245, 9004, "tt-smi", "tt-smi")
	h.attributed(4245, "", "")
	h.process(4246, 9005, "python3", "python3", "other.py") // no environ, no cgroup
	h.pids(0, 4242, 4243, 4244)
	h.pids(1, 4245, 4246)
}

// TestScrape_AttributionOffByDefault: without the switches, tt_process has
// the seed's four labels and nothing else, and every point is the host's.
func TestScrape_AttributionOffByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	populateAttributed(b.host)
	b.start(t)
	md := b.scrape(t)
	require.Equal(t, 1, md.ResourceMetrics().Len())
	for pid, dp := range processPoints(t, md) {
		assert.Equal(t, 4, dp.Attributes().Len(), "pid %s: %v", pid, dp.Attributes().AsRaw())
	}
}

func TestScrape_AttributionGolden(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) {
		allAttribution(cfg)
		cfg.Hostname = "bh-glx-c09u02"
	})
	populateAttributed(b.host)
	b.start(t)
	md := b.scrape(t)
	// The golden file holds the owner as the tests' own user.
	owner := ownerName(t)
	forEachPoint(md, "tt_process", func(dp pmetric.NumberDataPoint) {
		if v, ok := dp.Attributes().Get("user"); ok && v.Str() == owner {
			dp.Attributes().PutStr("user", "alice")
		}
	})
	compareGolden(t, "attributed", md)

	got := processPoints(t, md)
	want := map[string]map[string]string{
		"4242": {"queued_job": testJob, "slurm_job": "", "container_id": "", "k8s_pod_uid": ""},
		"4243": {"queued_job": "none", "slurm_job": "4242", "container_id": "", "k8s_pod_uid": ""},
		"4244": {"queued_job": "none", "slurm_job": "", "container_id": testContainer, "k8s_pod_uid": testPod},
		"4245": {"queued_job": "none", "slurm_job": "", "container_id": "", "k8s_pod_uid": ""},
		"4246": {"queued_job": "<unknown>", "slurm_job": "<unknown>", "container_id": "<unknown>", "k8s_pod_uid": "<unknown>"},
	}
	for pid, labels := range want {
		dp := got[pid]
		assert.Equal(t, "alice", attr(dp, "user"), "pid %s", pid)
		for k, v := range labels {
			assert.Equal(t, v, attr(dp, k), "pid %s label %s", pid, k)
		}
	}
}

// ownerName is the user label of a fake /proc/<pid> the tests created.
func ownerName(t *testing.T) string {
	t.Helper()
	h := newFakeHost(t)
	h.process(1, 1, "init", "init")
	h.pids(0, 1)
	s := procscan.New(procscan.Options{DriverPath: h.driver.Dir, ProcPath: h.proc, SelfPID: ownPID,
		Attribution: procscan.AttributionOptions{User: true}})
	defer s.Close()
	res := s.Scan()
	require.Len(t, res.Processes, 1)
	return res.Processes[0].Identity.Attribution.User
}

// TestScrape_HolderInAPodHasItsOwnResource: the k8sattributes processor
// associates resources, not points, with pods, so a holder in a pod goes
// out under a resource carrying k8s.pod.uid and container.id (and
// host.name); everything else stays under the host's.
func TestScrape_HolderInAPodHasItsOwnResource(t *testing.T) {
	t.Parallel()
	b := setup(t, allAttribution)
	populateAttributed(b.host)
	b.start(t)
	md := b.scrape(t)
	require.Equal(t, 2, md.ResourceMetrics().Len())
	pod := resourceWith(t, md, "k8s.pod.uid")
	assertResource(t, pod, map[string]string{"host.name": b.s.hostname, "k8s.pod.uid": testPod, "container.id": testContainer})
	pts := pointsOf(pod, "tt_process")
	require.Len(t, pts, 1)
	assert.Equal(t, "4244", attr(pts[0], "pid"))
	assert.Empty(t, pointsOf(pod, "tt_process_count"), "counts are the host's")

	// The pod's process exits: its staleness point goes out under the
	// same resource.
	b.host.pids(0, 4242, 4243)
	md = b.scrape(t)
	pod = resourceWith(t, md, "k8s.pod.uid")
	pts = pointsOf(pod, "tt_process")
	require.Len(t, pts, 1)
	assert.True(t, stale(pts[0]), "the ended series' point is flagged no recorded value")
	assert.Equal(t, "4244", attr(pts[0], "pid"))
}

// TestScrape_AttributionReadOnce: like command_line, the attribution labels
// are read when the process is first seen and never change.
func TestScrape_AttributionReadOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, allAttribution)
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.attributed(4242, "", "")
	b.host.pids(0, 4242)
	b.start(t)
	first := processPoints(t, b.scrape(t))["4242"]
	assert.Equal(t, NoQueuedJob, attr(first, "queued_job"), "read, and no job marker")

	b.host.attributed(4242, testJob, "slurm-v1") // would change the labels if read again
	for range 3 {
		dp := processPoints(t, b.scrape(t))["4242"]
		assert.Equal(t, first.Attributes().AsRaw(), dp.Attributes().AsRaw())
	}
}

func resourceWith(t *testing.T, md pmetric.Metrics, key string) pmetric.ResourceMetrics {
	t.Helper()
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		if _, ok := md.ResourceMetrics().At(i).Resource().Attributes().Get(key); ok {
			return md.ResourceMetrics().At(i)
		}
	}
	t.Fatalf("no resource with %s", key)
	return pmetric.ResourceMetrics{}
}

func assertResource(t *testing.T, rm pmetric.ResourceMetrics, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	rm.Resource().Attributes().Range(func(k string, v pcommon.Value) bool {
		got[k] = v.AsString()
		return true
	})
	assert.Equal(t, want, got)
}

func pointsOf(rm pmetric.ResourceMetrics, name string) []pmetric.NumberDataPoint {
	md := pmetric.NewMetrics()
	rm.CopyTo(md.ResourceMetrics().AppendEmpty())
	return points(md, name)
}

// TestScrape_QueuedAgent: with attribution.queued_agent, an AI agent's job
// (TT_QUEUE_AGENT, which queued sets in a job queued through
// tt-device-queue mcp) carries queued_agent; a person's job and a process
// of no job carry it empty (no label in Prometheus), one whose environment
// cannot be read <unknown>. Off, the label is absent.
func TestScrape_QueuedAgent(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) { cfg.Attribution = AttributionConfig{QueuedJob: true, QueuedAgent: true} })
	b.host.process(4242, 9001, "python3", "python3", "-m", "pytest")
	b.host.write(filepath.Join(b.host.proc, "4242", "environ"),
		"PATH=/usr/bin\x00"+procscan.JobEnvVar+"="+testJob+"\x00"+procscan.AgentEnvVar+"=claude-code\x00")
	b.host.process(4243, 9002, "python3", "python3", "train.py")
	b.host.attributed(4243, testJob, "")
	b.host.process(4244, 9003, "python3", "python3", "other.py") // no environ
	b.host.pids(0, 4242, 4243, 4244)
	b.start(t)
	pts := processPoints(t, b.scrape(t))
	assert.Equal(t, "claude-code", attr(pts["4242"], "queued_agent"))
	assert.Equal(t, testJob, attr(pts["4242"], "queued_job"))
	assert.Equal(t, "", attr(pts["4243"], "queued_agent"))
	assert.Equal(t, procscan.Unknown, attr(pts["4244"], "queued_agent"))

	off := setup(t, allAttribution)
	populateAttributed(off.host)
	off.start(t)
	for pid, dp := range processPoints(t, off.scrape(t)) {
		_, has := dp.Attributes().Get("queued_agent")
		assert.False(t, has, "pid %s: queued_agent without its switch", pid)
	}
}
