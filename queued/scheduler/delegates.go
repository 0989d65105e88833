package scheduler

// The Scheduler's methods that hand a request to the part of it that
// serves it (the submitter, the job index, the reset and hold desks, the
// reporter), kept apart from its start, stop and dispatch loop.

// OutputPath is where the job's output file lives (it may not exist).
func (s *Scheduler) OutputPath(id string) string { return s.core.outputPath(id) }

// MaxQueuedPerUser is the queued jobs one owner may have
// (Options.MaxQueuedPerUser, its default applied).
func (s *Scheduler) MaxQueuedPerUser() int { return s.core.opt.MaxQueuedPerUser }

// MaxCompletedPerUser is the finished jobs one owner keeps
// (Options.MaxCompletedPerUser, its default applied).
func (s *Scheduler) MaxCompletedPerUser() int { return s.core.opt.MaxCompletedPerUser }

// Cards lists the configured card numbers, ascending.
func (s *Scheduler) Cards() []int { return append([]int(nil), s.core.order...) }

// Submit durably queues a job; see submitter.submit.
func (s *Scheduler) Submit(spec JobSpec) (JobInfo, error) { return s.sub.submit(spec) }

// SubmitArray queues one job per index of spec.Array, all or none; see submitter.submitArray.
func (s *Scheduler) SubmitArray(spec JobSpec) ([]JobInfo, error) { return s.sub.submitArray(spec) }

// Kill stops a job; see submitter.kill.
func (s *Scheduler) Kill(id string) (JobInfo, error) { return s.sub.kill(id) }

// Resolve turns a unique id prefix into the full id; see jobIndex.resolve.
func (s *Scheduler) Resolve(prefix string) (string, error) { return s.idx.resolve(prefix) }

// Job returns a job by full id, brief; see jobIndex.job.
func (s *Scheduler) Job(id string) (JobInfo, error) { return s.idx.job(id) }

// Record returns a job by full id, whole; see jobIndex.record.
func (s *Scheduler) Record(id string) (JobInfo, error) { return s.idx.record(id) }

// Watch returns the job's current Watch; see jobIndex.watch.
func (s *Scheduler) Watch(id string) (Watch, error) { return s.idx.watch(id) }

// List returns the jobs f selects; see jobIndex.list.
func (s *Scheduler) List(f ListFilter) ([]JobInfo, error) { return s.idx.list(f) }

// ListEach hands the jobs f selects to fn one by one, reading the
// finished ones a page at a time; see jobIndex.each.
func (s *Scheduler) ListEach(f ListFilter, fn func(JobInfo) error) error { return s.idx.each(f, fn) }

// Reset schedules resets; see resetDesk.request.
func (s *Scheduler) Reset(req ResetRequest) ([]ResetOutcome, error) { return s.desk.request(req) }

// Hold queues a hold of spec.Cards; see holdDesk.hold.
func (s *Scheduler) Hold(spec HoldSpec) (JobInfo, error) { return s.hold.hold(spec) }

// Release ends hold id (why says who released it); see holdDesk.release.
func (s *Scheduler) Release(id, why string) (JobInfo, error) { return s.hold.release(id, why) }

// ReleaseSlurm ends every live hold taken for Slurm job slurmID.
func (s *Scheduler) ReleaseSlurm(slurmID, why string) ([]JobInfo, error) {
	return s.hold.releaseSlurm(slurmID, why)
}

// Status returns a snapshot; see reporter.status.
func (s *Scheduler) Status() Status { return s.rep.status() }

// Changes returns the change generation and a channel that closes at the
// next change; see changeFeed.
func (s *Scheduler) Changes() (gen uint64, changed <-chan struct{}) { return s.core.changes.current() }
