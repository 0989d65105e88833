package mcpserver

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
)

// JobInput is what tt_run and tt_submit take: what the CLI's run and
// queue take. A job option queued gains is one field here and one line of
// request.
type JobInput struct {
	Command    string            `json:"command" jsonschema:"The job: one shell program, run by bash -c in cwd (pipes, redirects, && and assignments work)."`
	Device     string            `json:"device,omitempty" jsonschema:"The card whose queue takes the job: \"0\" (the default), or the cards of a job that opens several at once: \"0,1\" or \"0-3\"."`
	Cwd        string            `json:"cwd,omitempty" jsonschema:"Absolute directory the job runs in; default: the MCP server's working directory (the project)."`
	TimeoutSec int64             `json:"timeout_sec,omitempty" jsonschema:"How long the whole job may run, every repeat together, in seconds; 0 selects queued's default."`
	Repeat     int               `json:"repeat,omitempty" jsonschema:"Run the program this many times, stopping at the first failure; 0 means once."`
	Env        map[string]string `json:"env,omitempty" jsonschema:"Variables added to the job's environment (over the toolchain variables the server sends, such as PATH and TT_METAL_HOME)."`
	// IdleTimeoutSec and Retries are the CLI's --idle-timeout and
	// --retries (docs/job-endings.md).
	IdleTimeoutSec int64 `json:"idle_timeout_sec,omitempty" jsonschema:"End the job as hung when it writes no output for this many seconds; 0 selects queued's default (off unless the host sets one)."`
	Retries        int   `json:"retries,omitempty" jsonschema:"Run the job again, up to this many times, when it ended because of its card (hung, interrupted by a reset, or its card found unfit after it); never after its own failure on a fit card. 0 to 10."`
	// After and AfterMode are the CLI's --after and --after-mode
	// (docs/workflows.md).
	After     []string `json:"after,omitempty" jsonschema:"Jobs (ids or unique prefixes, on any card, at most 64) this one waits for; it keeps its place in its card's queue without blocking the jobs behind it."`
	AfterMode string   `json:"after_mode,omitempty" jsonschema:"ok (the default: each must succeed), notok (each must fail) or any (each must end); a dependency that can no longer be met ends the job with outcome dependency."`
}

// request checks in and builds the request, naming the field at fault.
func (s *server) request(in JobInput, agent string) (api.QueueRequest, error) {
	if strings.TrimSpace(in.Command) == "" {
		return api.QueueRequest{}, fmt.Errorf("command is empty: give a shell program, such as \"pytest tests/test_add.py\"")
	}
	device := strings.TrimSpace(in.Device)
	if device == "" {
		device = "0"
	}
	if _, err := api.ParseDevices(device); err != nil {
		return api.QueueRequest{}, fmt.Errorf("device %q: %w", in.Device, err)
	}
	if in.TimeoutSec < 0 {
		return api.QueueRequest{}, fmt.Errorf("timeout_sec %d: want 0 (queued's default) or more seconds", in.TimeoutSec)
	}
	if in.Repeat < 0 || in.Repeat > api.MaxRepeat {
		return api.QueueRequest{}, fmt.Errorf("repeat %d: want 0 to %d", in.Repeat, api.MaxRepeat)
	}
	if in.IdleTimeoutSec < 0 {
		return api.QueueRequest{}, fmt.Errorf("idle_timeout_sec %d: want 0 (queued's default) or more seconds", in.IdleTimeoutSec)
	}
	if in.Retries < 0 || in.Retries > api.MaxRetries {
		return api.QueueRequest{}, fmt.Errorf("retries %d: want 0 to %d", in.Retries, api.MaxRetries)
	}
	switch in.AfterMode {
	case "", "ok", "notok", "any":
	default:
		return api.QueueRequest{}, fmt.Errorf("after_mode %q: want ok, notok or any", in.AfterMode)
	}
	if len(in.After) > api.MaxAfter {
		return api.QueueRequest{}, fmt.Errorf("after: %d jobs, at most %d", len(in.After), api.MaxAfter)
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = s.opt.Cwd
	}
	if !filepath.IsAbs(cwd) {
		return api.QueueRequest{}, fmt.Errorf("cwd %q: want an absolute directory", in.Cwd)
	}
	env := maps.Clone(s.opt.ShellEnv)
	if env == nil {
		env = map[string]string{}
	}
	for _, name := range slices.Sorted(maps.Keys(in.Env)) {
		switch {
		case !api.ValidEnvName(name):
			return api.QueueRequest{}, fmt.Errorf("env %q: not a variable name (letters, digits and _, not starting with a digit)", name)
		case api.ReservedEnv(name):
			return api.QueueRequest{}, fmt.Errorf("env %q: queued sets %s itself", name, name)
		}
		env[name] = in.Env[name]
	}
	var shell []string
	for name := range s.opt.ShellEnv {
		if _, given := in.Env[name]; !given {
			shell = append(shell, name)
		}
	}
	slices.Sort(shell)
	if len(env) == 0 {
		env = nil
	}
	return api.QueueRequest{Cmd: in.Command, Cwd: filepath.Clean(cwd), DeviceID: device, Env: env, EnvFromShell: shell,
		Timeout: in.TimeoutSec, Repeat: in.Repeat, IdleTimeout: in.IdleTimeoutSec, Retries: in.Retries, After: in.After, AfterMode: in.AfterMode,
		ClientID: s.opt.ClientID, Agent: agent}, nil
}
