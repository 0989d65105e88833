//go:build e2e

package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/porttest"
)

var (
	otelcolBin = flag.String("otelcol", "../../bin/otelcol-tt", "path of the otelcol-tt binary under test")
	promBin    = flag.String("prometheus", "prometheus", "path of the prometheus server binary")
)

const (
	hostName      = "e2e-host"
	containerName = "e2e-container"
	// collectionInterval is the receiver's cycle; scrapeInterval is
	// Prometheus's. A retired series must be gone from an instant query
	// within two scrape intervals of its process leaving the pids file.
	collectionInterval = time.Second
	scrapeInterval     = 2 * time.Second
)

func TestOtelcolTTWithPrometheus(t *testing.T) {
	otelcol, err := filepath.Abs(*otelcolBin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(otelcol); err != nil {
		t.Fatalf("otelcol-tt binary: %v (run `make e2e`, which builds it)", err)
	}
	prometheus, err := exec.LookPath(*promBin)
	if err != nil {
		t.Fatalf("prometheus server: %v (install Debian's prometheus package)", err)
	}
	dir := t.TempDir()
	// Something holds the collector's usual telemetry port 8888 (Jupyter's
	// default): otelcol-tt must start all the same.
	if l, err := net.Listen("tcp", "127.0.0.1:8888"); err == nil {
		t.Cleanup(func() { l.Close() })
	}

	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	work := kmdtest.Workloads(t, dir)
	train, pytest, sleeper := work[0], work[1], work[2]
	writeFile(t, filepath.Join(dir, "serve.py"), "import sys\nsys.stdin.read()\n")
	secret := kmdtest.Start(t, dir, nil, "python3", "serve.py", "--token=hunter2")
	secret.FriendlyName, secret.CommandLine = "serve.py", "python3 serve.py --token=***"
	work = append(work, secret)
	// A process of a queued job: queued puts the job marker in its
	// environment.
	job := kmdtest.Start(t, dir, []string{queuedJobEnv + "=" + queuedJobID}, "python3", "serve.py", "--job")
	job.FriendlyName, job.CommandLine = "serve.py", "python3 serve.py --job"
	work = append(work, job)
	// A process in a Kubernetes pod's container: a real cgroup laid out as
	// the kubelet's cgroupfs driver lays it out.
	podCgroup := newPodCgroup(t)
	pod := kmdtest.Start(t, dir, nil, "python3", "serve.py", "--pod")
	pod.FriendlyName, pod.CommandLine = "serve.py", "python3 serve.py --pod"
	podCgroup.enter(t, pod.PID())
	work = append(work, pod)

	// The host tree: several devices, duplicate lines (one per open fd),
	// and a process on two devices, as the KMD writes them.
	hostTree := kmdtest.NewTree(t, filepath.Join(dir, "driver-host"))
	hostTree.SetPids(0, train.PID(), train.PID(), pytest.PID())
	hostTree.SetPids(1, pytest.PID(), sleeper.PID(), secret.PID(), job.PID(), pod.PID())
	hostTree.SetPids(2)
	// The container case: a collector outside the host PID namespace reads
	// every holder as 0.
	containerTree := kmdtest.NewTree(t, filepath.Join(dir, "driver-container"))
	containerTree.SetPids(0, 0, 0)
	containerTree.SetPids(1, 0)

	// Two collectors run the shipped default config, steered by its
	// environment variables: one sees the host tree, one the container's.
	// The host collector reads a Blackhole p150's sysfs and labels each
	// holder with its user, queued job, container and pod; the container's
	// reads an n300's and keeps the receiver's default labels.
	hostMetrics := startCollector(t, dir, otelcol, "host", hostTree.Dir, kmdtest.CopySysfs(t, "p150").Root, hostName,
		"--set=receivers::ttprocess::attribution::user=true",
		"--set=receivers::ttprocess::attribution::queued_job=true",
		"--set=receivers::ttprocess::attribution::container_id=true",
		"--set=receivers::ttprocess::attribution::k8s_pod_uid=true",
		"--set=receivers::ttprocess::card_telemetry::heartbeat_stall_window="+stallWindow.String())
	ctrMetrics := startCollector(t, dir, otelcol, "container", containerTree.Dir, kmdtest.CopySysfs(t, "n300").Root, containerName)
	promPort := freePort(t)

	promConfig := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promConfig, fmt.Sprintf(`
global:
  scrape_interval: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: otelcol-tt
    static_configs:
      - targets: ['%s', '%s']
`, scrapeInterval, scrapeInterval, hostMetrics, ctrMetrics))
	startServer(t, "prometheus", dir, nil, prometheus,
		"--config.file="+promConfig,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	prom := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	waitHTTP(t, prom+"/-/ready")

	// Every holder is a tt_process series with exact labels and value 1.
	hostSel := fmt.Sprintf(`tt_process{hostname=%q}`, hostName)
	got := waitQuery(t, prom, hostSel, 30*time.Second, func(r []sample) bool { return len(r) == len(work) })
	t.Logf("%s -> %s", hostSel, render(got))
	for _, w := range work {
		s, ok := findPID(got, w.PID())
		if !ok {
			t.Fatalf("no tt_process series for pid %d (%s)", w.PID(), w.CommandLine)
		}
		if s.Value != "1" {
			t.Errorf("pid %d: value %s, want 1", w.PID(), s.Value)
		}
		want := map[string]string{
			"hostname":      hostName,
			"pid":           strconv.Itoa(w.PID()),
			"friendly_name": w.FriendlyName,
			"command_line":  w.CommandLine,
		}
		wantJob := "none"
		if w == job {
			wantJob = queuedJobID
		}
		want["user"], want["queued_job"] = me.Username, wantJob
		for k, v := range want {
			if s.Metric[k] != v {
				t.Errorf("pid %d: label %s = %q, want %q", w.PID(), k, s.Metric[k], v)
			}
		}
	}
	countSel := fmt.Sprintf(`tt_process_count{hostname=%q}`, hostName)
	got = waitQuery(t, prom, countSel, 10*time.Second, func(r []sample) bool { return len(r) == 1 })
	t.Logf("%s -> %s", countSel, render(got))
	if got[0].Value != strconv.Itoa(len(work)) {
		t.Errorf("%s = %s, want %d", countSel, got[0].Value, len(work))
	}

	// The container case: count is a floor of 1, and nothing is named.
	ctrCount := fmt.Sprintf(`tt_process_count{hostname=%q}`, containerName)
	got = waitQuery(t, prom, ctrCount, 10*time.Second, func(r []sample) bool { return len(r) == 1 })
	t.Logf("%s -> %s", ctrCount, render(got))
	if got[0].Value != "1" {
		t.Errorf("%s = %s, want 1", ctrCount, got[0].Value)
	}
	ctrSel := fmt.Sprintf(`tt_process{hostname=%q}`, containerName)
	if got := query(t, prom, ctrSel); len(got) != 0 {
		t.Errorf("%s = %s, want no series", ctrSel, render(got))
	}

	checkCardHealth(t, prom)
	checkPodHolder(t, prom, pod.PID(), podCgroup)

	// A process exits: the KMD drops its fds from the pids file, and its
	// series must leave Prometheus within two scrape intervals rather than
	// at the exporter's five-minute expiry.
	sleeper.Stop()
	hostTree.SetPids(1, pytest.PID(), secret.PID(), job.PID(), pod.PID())
	gone := time.Now()
	got = waitQuery(t, prom, hostSel, 2*scrapeInterval, func(r []sample) bool { return len(r) == len(work)-1 })
	t.Logf("after killing pid %d: series gone in %s; %s -> %s", sleeper.PID(), time.Since(gone).Round(10*time.Millisecond), hostSel, render(got))
	if _, ok := findPID(got, sleeper.PID()); ok {
		t.Errorf("the killed process's series is still there")
	}
	got = waitQuery(t, prom, countSel, 2*scrapeInterval, func(r []sample) bool {
		return len(r) == 1 && r[0].Value == strconv.Itoa(len(work)-1)
	})
	t.Logf("%s -> %s", countSel, render(got))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// freePort is a loopback port for one of the test's servers, never one
// handed out before in this run (see porttest).
func freePort(t *testing.T) int { return porttest.Free(t) }

// startCollector runs otelcol-tt with the default config from deploy/,
// overriding only what a test must: addresses, the driver and sysfs trees,
// the host name, a short collection interval, and args. It returns the
// metrics address.
func startCollector(t *testing.T, dir, otelcol, name, driver, sysfs, hostname string, args ...string) string {
	t.Helper()
	config, err := filepath.Abs("../../deploy/otelcol-tt/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	health := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	telemetry := freePort(t)
	env := []string{
		fmt.Sprintf("OTELCOL_TT_TELEMETRY_PORT=%d", telemetry),
		"OTELCOL_TT_PROMETHEUS_ENDPOINT=" + metrics,
		"OTELCOL_TT_HEALTH_ENDPOINT=" + health,
		fmt.Sprintf("OTELCOL_TT_OTLP_GRPC_ENDPOINT=127.0.0.1:%d", freePort(t)),
		fmt.Sprintf("OTELCOL_TT_OTLP_HTTP_ENDPOINT=127.0.0.1:%d", freePort(t)),
		"OTELCOL_TT_DRIVER_PATH=" + driver,
		"OTELCOL_TT_SYSFS_PATH=" + sysfs,
		"OTELCOL_TT_HOSTNAME=" + hostname,
	}
	startServer(t, "otelcol-tt-"+name, dir, env, otelcol, append([]string{"--config=" + config,
		"--set=receivers::ttprocess::collection_interval=" + collectionInterval.String()}, args...)...)
	waitHTTP(t, "http://"+health+"/")
	// The collector's own metrics, on the port the variable moved them to.
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetry))
	return metrics
}

// startServer runs a server for the test's lifetime, its output in a log
// file that is printed if the test fails.
func startServer(t *testing.T, name, dir string, env []string, path string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- %s log ---\n%s", name, b)
		}
	})
}

func waitHTTP(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within 30s (last error: %v)", u, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sample is one series of a Prometheus instant-query vector result.
type sample struct {
	Metric map[string]string
	Value  string
}

func query(t *testing.T, prom, q string) []sample {
	t.Helper()
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query %s: decoding: %v", q, err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s", q, body.Error)
	}
	out := make([]sample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		v, _ := r.Value[1].(string)
		out = append(out, sample{Metric: r.Metric, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metric["pid"] < out[j].Metric["pid"] })
	return out
}

// waitQuery polls an instant query until ok accepts the result or the
// deadline passes.
func waitQuery(t *testing.T, prom, q string, within time.Duration, ok func([]sample) bool) []sample {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := query(t, prom, q)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s: still %s after %s", q, render(got), within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func findPID(samples []sample, pid int) (sample, bool) {
	for _, s := range samples {
		if s.Metric["pid"] == strconv.Itoa(pid) {
			return s, true
		}
	}
	return sample{}, false
}

func render(samples []sample) string {
	var parts []string
	for _, s := range samples {
		keys := make([]string, 0, len(s.Metric))
		for k := range s.Metric {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var labels []string
		for _, k := range keys {
			labels = append(labels, fmt.Sprintf("%s=%q", k, s.Metric[k]))
		}
		parts = append(parts, fmt.Sprintf("{%s} %s", strings.Join(labels, ", "), s.Value))
	}
	if len(parts) == 0 {
		return "(no series)"
	}
	return strings.Join(parts, "; ")
}
