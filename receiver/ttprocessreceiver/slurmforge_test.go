package ttprocessreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A user's systemd gives them a delegated cgroup subtree, where they may
// create .../slurm/job_4242 and run a process in it; another may sit in a
// Slurm-looking path whose job directory the user, not slurmd, owns. Only
// a job directory slurmd made (root's, under the Slurm cgroup root) names
// a Slurm job: the others get no slurm_job, while the real Slurm step's
// process keeps its job.
func TestScrape_SlurmJobOnlyFromSlurmdsCgroup(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) { cfg.Attribution = AttributionConfig{SlurmJob: true} })
	h := b.host
	forged := "/user.slice/user-1000.slice/user@1000.service/app.slice/slurm/job_4242"
	h.cgroupDir(forged, 1000)
	h.process(5001, 9001, "python3", "python3", "forged.py")
	h.write(h.proc+"/5001/cgroup", "0::"+forged+"/step_0\n")
	lookalike := "/system.slice/slurmstepd.scope/job_5151"
	h.cgroupDir(lookalike, 1000) // not slurmd's: a user's chown or a misconfiguration
	h.process(5002, 9002, "python3", "python3", "lookalike.py")
	h.write(h.proc+"/5002/cgroup", "0::"+lookalike+"/step_0\n")
	real := "/system.slice/slurmstepd.scope/job_4243"
	h.cgroupDir(real+"/step_0", 0)
	h.process(5003, 9003, "python3", "python3", "real.py")
	h.write(h.proc+"/5003/cgroup", "0::"+real+"/step_0/user/task_0\n")
	v1 := "memory/slurm/uid_1000/job_4244"
	h.cgroupDir(v1, 0)
	h.process(5004, 9004, "python3", "python3", "v1.py")
	h.write(h.proc+"/5004/cgroup", "12:memory:/slurm/uid_1000/job_4244/step_0/task_0\n")
	h.pids(0, 5001, 5002, 5003, 5004)
	b.start(t)
	got := processPoints(t, b.scrape(t))
	for pid, want := range map[string]string{"5001": "", "5002": "", "5003": "4243", "5004": "4244"} {
		assert.Equal(t, want, attr(got[pid], "slurm_job"), "pid %s", pid)
	}
}
