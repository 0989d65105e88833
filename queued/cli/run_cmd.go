package cli

import "time"

// RunCmd submits a program and behaves as if it ran here: position and
// estimated wait on stderr while queued, the output on stdout as it is
// produced, and the job's exit status.
type RunCmd struct {
	Submission
	WaitTimeout Duration `placeholder:"DURATION" help:"Stop waiting after this long (seconds, or such as 10m) and exit 124; the job goes on. 0 (the default) waits without limit."`
	OutputLimit int64    `placeholder:"BYTES" help:"Print only the first this many bytes of the output, as the Python tt-device-queue's run did, and say where the rest is; the job runs on to its end. 0 (the default) prints all of it."`
	Program     []string `arg:"" passthrough:"partial" placeholder:"PROGRAM" help:"After --: a shell program as one quoted argument, such as -- 'python3 a.py | tee log', or a command as several words, each one argument, such as -- python3 a.py 'an arg'."`
}

// Run submits and waits.
func (r *RunCmd) Run(a *App) error {
	if r.OutputLimit < 0 {
		return usageErr("--output-limit %d: want 0 (all the output) or more", r.OutputLimit)
	}
	req, err := r.request(a, program(r.Program))
	if err != nil {
		return err
	}
	sub, err := a.submit(req)
	if err != nil {
		return err
	}
	return a.await(sub, time.Duration(r.WaitTimeout), r.OutputLimit)
}
