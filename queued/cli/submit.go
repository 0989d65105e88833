package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// Submission holds the options shared by run, queue and queue-python.
type Submission struct {
	Device  string   `short:"d" default:"0" placeholder:"N" help:"Card whose queue takes the job; match it to the device your code opens. A job that opens several cards at once names them all (0,1 or 0-3): it starts when it is at the head of every one of their queues."`
	Cwd     string   `placeholder:"DIR" help:"Directory the job runs in (default: the current directory)."`
	Timeout Duration `placeholder:"DURATION" help:"How long the whole job may run, every --repeat iteration together (seconds, or such as 10m, as for --wait-timeout); 0 selects the daemon's default (TT_DEVICE_DEFAULT_TIMEOUT)."`
	Repeat  int      `placeholder:"N" help:"Run the program N times, stopping at the first failure."`
	// IdleTimeout and Retries: see docs/job-endings.md.
	IdleTimeout Duration `name:"idle-timeout" placeholder:"DURATION" help:"End the job as hung (exit code -124) when it writes no output for this long (seconds, or such as 10m); 0 selects the daemon's default (TT_DEVICE_IDLE_TIMEOUT, off unless set)."`
	Retries     int      `placeholder:"N" help:"Run the job again, up to N times (0 to 10), when its card ends it: hung, interrupted by a reset, or failed on a card the gate then finds unfit; never when it fails by its own exit status on a fit card."`
	Env         []string `short:"e" sep:"none" placeholder:"NAME=VALUE" help:"Add a variable to the job's environment, over the shell's; repeat for more."`
	// After and AfterMode: see docs/jobs.md, "Dependencies".
	After     []string `placeholder:"ID,..." help:"Wait for these jobs (ids or unique prefixes, on any card) to end before starting; the job keeps its place in its card's queue without holding up the jobs behind it."`
	AfterMode string   `name:"after-mode" enum:"ok,notok,any" default:"ok" help:"Which ending of the --after jobs lets this one run: ok (each succeeded, the default), notok (each did not) or any. Otherwise it ends at once with outcome dependency, without running."`

	NoInheritEnv  bool `name:"no-inherit-env" xor:"inherit" help:"Send none of this shell's variables: the job gets the daemon's environment and --env."`
	InheritEnvAll bool `name:"inherit-env-all" xor:"inherit" help:"Send this shell's whole environment, not only its toolchain variables (never TT_DEVICE_*, TT_QUEUE_* or TT_VISIBLE_DEVICES)."`

	// warned is set once the TT_VISIBLE_DEVICES warning was given.
	warned bool
}

// request checks the options locally, so mistakes get a usage error
// before anything is queued, and builds the request for cmd.
func (s *Submission) request(a *App, cmd string) (api.QueueRequest, error) {
	if _, err := api.ParseDevices(s.Device); err != nil {
		return api.QueueRequest{}, usageErr("--device: %v", err)
	}
	if s.Repeat < 0 {
		return api.QueueRequest{}, usageErr("--repeat %d: want a count, 1 or more", s.Repeat)
	}
	if s.Retries < 0 || s.Retries > api.MaxRetries {
		return api.QueueRequest{}, usageErr("--retries %d: want 0 to %d", s.Retries, api.MaxRetries)
	}
	if len(s.After) > api.MaxAfter {
		return api.QueueRequest{}, usageErr("--after: %d jobs, the limit is %d", len(s.After), api.MaxAfter)
	}
	for _, id := range s.After {
		if id = strings.TrimSpace(id); id == "" {
			return api.QueueRequest{}, usageErr("--after %q: an empty job id", strings.Join(s.After, ","))
		}
	}
	if strings.TrimSpace(cmd) == "" {
		return api.QueueRequest{}, usageErr("the program is empty: give a shell program as one quoted argument, such as -- 'python3 script.py', or a command as words, such as -- python3 script.py")
	}
	given, err := parseEnv(s.Env)
	if err != nil {
		return api.QueueRequest{}, err
	}
	env, shell, err := s.jobEnv(a, given)
	if err != nil {
		return api.QueueRequest{}, err
	}
	if err := checkRecordSize(cmd, env); err != nil {
		return api.QueueRequest{}, err
	}
	cwd := s.Cwd
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return api.QueueRequest{}, usageErr("finding the current directory for --cwd: %w", err)
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return api.QueueRequest{}, usageErr("--cwd: %w", err)
	}
	req := api.QueueRequest{
		Cmd: cmd, Cwd: cwd, DeviceID: strings.TrimSpace(s.Device), Env: env, EnvFromShell: shell,
		Timeout: int64((time.Duration(s.Timeout) + time.Second - 1) / time.Second), Repeat: s.Repeat, ClientID: a.clientID(),
		IdleTimeout: int64((time.Duration(s.IdleTimeout) + time.Second - 1) / time.Second), Retries: s.Retries,
		After: s.afterIDs(), AfterMode: s.afterMode(),
	}
	// Every job gets "." on PYTHONPATH, as the Python tool gave every job:
	// a script run from a subdirectory still imports the modules of the
	// directory it was submitted from.
	dotOnPythonPath(&req)
	return req, nil
}

// program makes the job's shell program of run's and queue's words, as
// the Python tt-device-queue does: one word is a shell program (the
// specification's one quoted argument, whose assignments, pipes,
// redirects and && reach bash intact); several are a command split by the
// shell, each word one argument, joined with shell quoting as Python's
// shlex.join joins them. A leading "--", which kong leaves to a
// pass-through argument, is not a word.
func program(words []string) string {
	if len(words) > 0 && words[0] == "--" {
		words = words[1:]
	}
	if len(words) == 1 {
		return words[0]
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	return strings.Join(quoted, " ")
}

// parseEnv reads NAME=VALUE pairs. A name must be a shell variable name
// and not one queued sets itself, the rules the daemon applies to a
// request's env (api.ValidEnvName, api.ReservedEnv); a name given twice
// is a mistake.
func parseEnv(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(pairs))
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		switch {
		case !ok:
			return nil, usageErr("--env %q: want NAME=VALUE", p)
		case !api.ValidEnvName(name):
			return nil, usageErr("--env %q: %q is not a variable name (letters, digits and _, not starting with a digit)", p, name)
		case api.ReservedEnv(name):
			return nil, usageErr("--env %q: queued sets %s itself", p, name)
		}
		if _, dup := env[name]; dup {
			return nil, usageErr("--env: %s is given twice", name)
		}
		env[name] = value
	}
	return env, nil
}

// submit queues req and reports the answer on stderr.
func (a *App) submit(req api.QueueRequest) (api.QueueResponse, error) {
	c, err := a.connect()
	if err != nil {
		return api.QueueResponse{}, err
	}
	res, err := c.Queue(a.ctx, req)
	if err != nil {
		e := a.explain(a.ctx, err)
		if e.Code == ExitInterrupted {
			e.Err = fmt.Errorf("interrupted while submitting: the job may have been queued; `%s status` shows the queues", Name)
		}
		return res, e
	}
	return res, nil
}

// afterIDs is --after's ids, trimmed; nil without it.
func (s *Submission) afterIDs() []string {
	var ids []string
	for _, id := range s.After {
		ids = append(ids, strings.TrimSpace(id))
	}
	return ids
}

// afterMode is --after-mode for the request: sent only with --after, so
// a request without dependencies reads as it always has.
func (s *Submission) afterMode() string {
	if len(s.After) == 0 {
		return ""
	}
	return s.AfterMode
}
