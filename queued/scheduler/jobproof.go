package scheduler

import (
	"os"

	"github.com/ttkit/ttkit/internal/procscan"
	"github.com/ttkit/ttkit/queued/jobcgroup"
	"github.com/ttkit/ttkit/queued/store"
)

// Whose a process is. TT_QUEUE_JOB_ID in a process's environment is what
// the process says about itself: anyone can start a process with another
// user's running job id in it. So it never makes a process a job's: not
// for cross-card detection (where it would get the job marked, or killed
// under TT_DEVICE_CROSS_CARD=kill), not for telling a card's own holders
// from foreign ones (where it would hide a process from
// tt_device_queue.card.foreign and TT_DEVICE_WAIT_FOREIGN). A process is
// job J's only on evidence the kernel keeps and a user cannot forge:
//
//   - it is in J's cgroup (where queued made one: see package jobcgroup),
//     which only root, or queued, can move a process into; or
//   - it runs as J's user (real uid) and either is in J's session (jobs
//     start with setsid, so the session id is J's leader's pid, and no
//     process can join another session) while that leader is alive with
//     its recorded start time, or descends from that leader by the parent
//     chain (at most maxAncestry steps up).
//
// A process that fails all of them holding a card is foreign there, and
// cross-card kill never touches it: it kills only a job whose own proven
// process opened a card outside the job's.

// maxAncestry bounds the parent-chain walk from a holder to a job's leader.
const maxAncestry = 64

// ownJob is a running job (or reset command) as the evidence needs it.
type ownJob struct {
	id   string
	kind store.Kind
	// leader and start are the iteration's leader: its pid, which is also
	// its process group and session id, and its start time (field 22 of
	// /proc/<pid>/stat); leader 0 before it started.
	leader int
	start  uint64
	// uid is the user it runs as; hasUID false when that is not known (a
	// system-mode job without a recorded owner), so only its cgroup can
	// prove a process its.
	uid    uint32
	hasUID bool
}

// ownJobOf is j's ownJob; s.mu held. (Functions, not methods of core:
// core's embedders are at their bound of methods.)
func ownJobOf(s *core, j *job) ownJob {
	o := ownJob{id: j.rec.ID, kind: j.rec.Kind, leader: j.rec.PGID, start: j.rec.LeaderStart}
	o.uid, o.hasUID = runUID(&s.opt, &j.rec)
	return o
}

// runningOf lists every card's running job or reset, each once; s.mu
// held.
func runningOf(s *core) []ownJob {
	var out []ownJob
	seen := map[*job]bool{}
	for _, id := range s.order {
		if j := s.cards[id].current; j != nil && !seen[j] {
			seen[j] = true
			out = append(out, ownJobOf(s, j))
		}
	}
	return out
}

// runUID is the user rec runs as, as launcher.spec decides it: a reset's
// ResetAccount, else queued's own user for a reset or any job of a
// user-mode daemon, else the job's owner.
func runUID(opt *Options, rec *store.Job) (uint32, bool) {
	switch {
	case rec.Kind == store.KindReset && opt.ResetAccount != nil:
		return opt.ResetAccount.UID, true
	case rec.Kind == store.KindReset || !opt.Mode.System():
		return uint32(os.Getuid()), true
	case rec.OwnerUID != nil:
		return *rec.OwnerUID, true
	}
	return 0, false
}

// provenJob is a running job with what its leader shows now.
type provenJob struct {
	ownJob
	// alive says its leader is the process it started (same start time).
	alive bool
	// cgroup is the job's cgroup v2 path where queued made it one (its
	// leader is in a cgroup named for the job), else "".
	cgroup string
}

// prover decides whose each process is, among the jobs it was made for,
// reading each process's lineage once.
type prover struct {
	procRoot string
	jobs     []provenJob
	lineage  map[int]*procscan.Lineage // nil: unreadable (gone, or not ours to read)
	cgroups  map[int]string
}

// newProver reads the leader of each of jobs, once.
func newProver(procRoot string, jobs []ownJob) *prover {
	p := &prover{procRoot: procRoot, lineage: map[int]*procscan.Lineage{}, cgroups: map[int]string{}}
	for _, j := range jobs {
		pj := provenJob{ownJob: j}
		if j.leader > 0 {
			if l := p.read(j.leader); l != nil && l.Start == j.start {
				pj.alive = true
				if cg := p.cgroup(j.leader); jobcgroup.IsJobCgroup(cg, j.id) {
					pj.cgroup = cg
				}
			}
		}
		p.jobs = append(p.jobs, pj)
	}
	return p
}

// read is pid's lineage, or nil when it cannot be read.
func (p *prover) read(pid int) *procscan.Lineage {
	if l, ok := p.lineage[pid]; ok {
		return l
	}
	var lp *procscan.Lineage
	if l, err := procscan.ReadLineage(p.procRoot, pid); err == nil {
		lp = &l
	}
	p.lineage[pid] = lp
	return lp
}

// cgroup is pid's cgroup v2 path, "" when it cannot be read.
func (p *prover) cgroup(pid int) string {
	if cg, ok := p.cgroups[pid]; ok {
		return cg
	}
	cg, _ := procscan.ReadCgroup2(p.procRoot, pid)
	p.cgroups[pid] = cg
	return cg
}

// ownerOf is the job pid is proven to belong to, or nil.
func (p *prover) ownerOf(pid int) *ownJob {
	for i := range p.jobs {
		if p.belongs(pid, &p.jobs[i]) {
			return &p.jobs[i].ownJob
		}
	}
	return nil
}

// belongs applies the evidence rule (see above) to pid and job j.
func (p *prover) belongs(pid int, j *provenJob) bool {
	if j.cgroup != "" && procscan.WithinCgroup(p.cgroup(pid), j.cgroup) {
		return true
	}
	if !j.alive || !j.hasUID {
		return false
	}
	l := p.read(pid)
	if l == nil || l.UID != j.uid {
		return false
	}
	if l.Session == j.leader {
		return true
	}
	return p.descends(l, j)
}

// descends reports whether the parent chain from l reaches j's leader,
// the very process (by start time), within maxAncestry steps.
func (p *prover) descends(l *procscan.Lineage, j *provenJob) bool {
	for range maxAncestry {
		if l.PID == j.leader {
			return l.Start == j.start
		}
		if l.PPID <= 1 {
			return false
		}
		if l = p.read(l.PPID); l == nil {
			return false
		}
	}
	return false
}
