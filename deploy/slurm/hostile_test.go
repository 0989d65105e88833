package slurm_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// cliBin is a directory holding the real tt-device-queue, built once: the
// stand-in runs it for `tt-device-queue slurm ...`.
var cliBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tt-slurm-scripts-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cliBin = dir
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/ttkit/ttkit/queued/cmd/tt-device-queue")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building tt-device-queue:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A job whose name and comment carry text shaped like scontrol's
// per-node GRES lines, on the line of the name and on lines of their own
// (Slurm 22.05 takes a newline in either: sbatch -J $'x\n     Nodes=...'),
// as a real slurmctld printed them for a job Slurm gave card 0, gets a
// hold on card 0 alone, and the Epilog resets card 0 alone.
func TestProlog_HostileJobTextCannotWidenTheCards(t *testing.T) {
	t.Parallel()
	h := newHost(t, "TT_SLURM_RESET=always")
	h.answer(t, "scontrol", "job", 0, "", readTestdata(t, "scontrol-hostile.txt"))
	h.answer(t, "squeue", "job", 0, "", readTestdata(t, "squeue-hostile.json"))
	h.answer(t, "slurmd", "G", 0, "", slurmdG)
	h.answer(t, "tt-device-queue", "hold", 0, "", holdAnswer("0", "active"))
	r := h.run(t, "prolog.sh", prologEnv("42", "ttnode")...)
	// The gate before the hold (fitness_test.go) and the hold: card 0 alone.
	want := "gate --device 0 --wait 600|hold --device 0 --slurm-job 42 --json --reason slurm job 42 (alice) --for-uid 1000"
	if got := strings.Join(h.cliCalls(), "|"); r.code != 0 || got != want {
		t.Fatalf("tt-device-queue calls %q, want %q\n%v", got, want, r)
	}
	if m := h.marker("42"); m != "hold="+holdID+"\ncards=0\n" {
		t.Fatalf("marker %q", m)
	}
	h.answer(t, "tt-device-queue", "hold-status", 0, "", holdAnswer("0", "active"))
	h.answer(t, "tt-device-queue", "release", 0, "", "released hold "+holdID+"\n")
	r = h.run(t, "epilog.sh", epilogEnv("42", "0:0")...)
	var resets []string
	for _, c := range h.cliCalls() {
		if strings.HasPrefix(c, "reset ") {
			resets = append(resets, c)
		}
	}
	if r.code != 0 || strings.Join(resets, "|") != "reset --device 0 --no-interrupt" {
		t.Errorf("the Epilog's resets %q, want card 0's alone\n%v", resets, r)
	}
}

// Whatever Slurm's answer the Prolog cannot read strictly, it takes no
// hold (fails closed) and leaves in the marker why, for the TaskProlog to
// fail the job with; it still exits 0, so no job can drain the node.
func TestProlog_UnreadableAllocationFailsClosed(t *testing.T) {
	t.Parallel()
	job := func(gres, nodes string) string {
		return `{"jobs":[{"job_id":42,"name":"n","gres_detail":[` + gres + `],"job_resources":{"nodes":"ttnode","allocated_nodes":[` + nodes + `]}}]}`
	}
	node := `{"nodename":"ttnode"}`
	for _, tc := range []struct {
		name, squeue string
		code         int
		want         string
	}{
		{"squeue without --json", "", 1, "squeue: unrecognized option '--json'"},
		{"not JSON", "JobId=42 Nodes=ttnode GRES=tt(IDX:0-3)", 0, "squeue --json"},
		{"no such job", `{"jobs":[]}`, 0, "no job 42"},
		{"the job twice", `{"jobs":[{"job_id":42,"gres_detail":[],"job_resources":{"allocated_nodes":[]}},{"job_id":42,"gres_detail":[],"job_resources":{"allocated_nodes":[]}}]}`, 0, "job 42 twice"},
		{"another node", job(`"tt:1(IDX:0)"`, `{"nodename":"n9"}`), 0, "ttnode"},
		{"this node twice", job(`"tt:1(IDX:0)","tt:3(IDX:1-3)"`, node+","+node), 0, "ttnode"},
		{"fewer GRES than nodes", job(`"tt:1(IDX:0)"`, `{"nodename":"n9"},`+node), 0, "gres_detail"},
		{"a malformed index list", job(`"tt:1(IDX:0-)"`, node), 0, "tt:1(IDX:0-)"},
		{"an index twice", job(`"tt:2(IDX:0,0)"`, node), 0, "tt:2(IDX:0,0)"},
		{"a count that is not the list's", job(`"tt:1(IDX:0-2)"`, node), 0, "tt:1(IDX:0-2)"},
		{"unbalanced", job(`"tt:1(IDX:0"`, node), 0, "tt:1(IDX:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t)
			h.answer(t, "squeue", "job", tc.code, "squeue: unrecognized option '--json'", tc.squeue)
			h.answer(t, "scontrol", "job", 0, "", "     Nodes=ttnode CPU_IDs=0 Mem=0 GRES=tt:1(IDX:0)\n")
			h.answer(t, "slurmd", "G", 0, "", slurmdG)
			r := h.run(t, "prolog.sh", prologEnv("42", "ttnode")...)
			m := h.marker("42")
			if r.code != 0 || len(h.cliCalls()) != 0 || !strings.HasPrefix(m, "error=cannot tell which tt cards Slurm gave this job on ttnode: ") ||
				!strings.Contains(m, tc.want) {
				t.Errorf("want no hold and an error naming %q; calls %q, marker %q\n%v", tc.want, h.cliCalls(), m, r)
			}
		})
	}
}

// A job whose Prolog took no hold (its marker says why) gets no reset
// from the Epilog, whatever hold queued has for its Slurm job id: a hold
// another user took with --slurm-job on cards the job never had must not
// steer root's reset.
func TestEpilog_NoResetWithoutTheProlog(t *testing.T) {
	t.Parallel()
	h := newHost(t, "TT_SLURM_RESET=always")
	h.setMarker(t, "42", "error=cannot tell which tt cards Slurm gave this job on ttnode: no job 42\n")
	h.answer(t, "tt-device-queue", "hold-status", 0, "", holdAnswer("0-3", "active"))
	h.answer(t, "tt-device-queue", "release", 0, "", "no live hold for Slurm job 42\n")
	r := h.run(t, "epilog.sh", epilogEnv("42", "0:0")...)
	for _, c := range h.cliCalls() {
		if strings.HasPrefix(c, "reset ") || strings.HasPrefix(c, "hold-status ") {
			t.Errorf("the Epilog ran %q for a job the Prolog took no hold for\n%v", c, r)
		}
	}
	if r.code != 0 || h.marker("42") != "" {
		t.Errorf("%v; marker %q", r, h.marker("42"))
	}
}

// squeueJob is squeue --json's answer (Slurm 22.05) for a running job on
// nodes, given as node name and that node's gres_detail entry, in turn.
func squeueJob(job int, nodeGres ...string) string {
	var nodes, gres []string
	for i := 0; i+1 < len(nodeGres); i += 2 {
		nodes = append(nodes, fmt.Sprintf(`{"sockets":{"0":{"cores":{"0":"allocated"}}},"nodename":%q,"cpus_used":0}`, nodeGres[i]))
		gres = append(gres, fmt.Sprintf("%q", nodeGres[i+1]))
	}
	return fmt.Sprintf(`{"meta":{"plugin":{"type":"openapi\/v0.0.38"}},"errors":[],"jobs":[{"job_id":%d,"name":"train","gres_detail":[%s],`+
		`"job_resources":{"nodes":"x","allocated_nodes":[%s]},"job_state":"RUNNING"}]}`+"\n", job, strings.Join(gres, ","), strings.Join(nodes, ","))
}
