package cli

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
)

// toolchainEnv are the variables a job gets from the submitter's shell by
// default: what decides which python3, which libraries and which tt-metal
// build a command finds, so a job runs as it would in that shell even
// though the daemon (a user service) started with another environment.
var toolchainEnv = []string{"PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "LD_LIBRARY_PATH", "ARCH_NAME"}

// toolchainPrefixes extend toolchainEnv to whole families.
var toolchainPrefixes = []string{"TT_METAL_"}

// neverSentPrefixes are the queue's own settings (the CLI's connection,
// the daemon's limits): they configure the queue, not the job, and are
// never taken from the shell, not even by --inherit-env-all.
var neverSentPrefixes = []string{"TT_DEVICE_", "TT_QUEUE_"}

// visibleDevices is never taken from the shell either: the queue does not
// choose devices for a job, and a value left over in the shell would
// silently send the job to another card than its queue's. --env passes it.
const visibleDevices = "TT_VISIBLE_DEVICES"

// fromShell picks from environ (os.Environ's form) the variables a job
// inherits: the toolchain ones, or with all every variable whose name a
// shell could export; never the queue's own settings or
// TT_VISIBLE_DEVICES.
func fromShell(environ []string, all bool) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !api.ValidEnvName(name) || name == visibleDevices || hasAnyPrefix(name, neverSentPrefixes) {
			continue
		}
		if all || contains(toolchainEnv, name) || hasAnyPrefix(name, toolchainPrefixes) {
			env[name] = value
		}
	}
	return env
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// jobEnv merges the shell's variables (unless --no-inherit-env) with
// --env's, which win, and returns the names that came from the shell,
// sorted. It warns, once, when the shell sets TT_VISIBLE_DEVICES and
// --env does not pass it, and refuses an environment above
// api.MaxEnvBytes before anything is sent.
func (s *Submission) jobEnv(a *App, given map[string]string) (map[string]string, []string, error) {
	env := map[string]string{}
	var shell []string
	if !s.NoInheritEnv {
		for k, v := range fromShell(os.Environ(), s.InheritEnvAll) {
			if _, over := given[k]; !over {
				env[k] = v
				shell = append(shell, k)
			}
		}
	}
	for k, v := range given {
		env[k] = v
	}
	sort.Strings(shell)
	if v, set := os.LookupEnv(visibleDevices); set && !s.warned {
		if _, passed := given[visibleDevices]; !passed {
			s.warned = true
			a.progress.note("warning: %s=%s is set in this shell but not sent: the queue does not choose devices for a job; add --env %s=%s if the job needs it",
				visibleDevices, v, visibleDevices, v)
		}
	}
	if err := checkEnvSize(env); err != nil {
		return nil, nil, err
	}
	if len(env) == 0 {
		return nil, nil, nil
	}
	return env, shell, nil
}

// checkRecordSize refuses a job whose command and environment together
// pass the daemon's record budget (api.MaxRecordBytes), naming both sizes.
func checkRecordSize(cmd string, env map[string]string) error {
	envBytes := api.EnvBytes(env)
	if len(cmd)+envBytes <= api.MaxRecordBytes {
		return nil
	}
	return usageErr("the job's command (%d bytes) and environment (%d bytes) take %d bytes together, above the limit of %d for one job; "+
		"send fewer variables (--no-inherit-env, with --env for those the job needs) or put a long program in a script file",
		len(cmd), envBytes, len(cmd)+envBytes, api.MaxRecordBytes)
}

// checkEnvSize refuses an environment the daemon would refuse, naming the
// largest variables.
func checkEnvSize(env map[string]string) error {
	total := api.EnvBytes(env)
	if total <= api.MaxEnvBytes {
		return nil
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if len(env[names[i]]) != len(env[names[j]]) {
			return len(env[names[i]]) > len(env[names[j]])
		}
		return names[i] < names[j]
	})
	var big []string
	for _, k := range names[:min(3, len(names))] {
		big = append(big, fmt.Sprintf("%s (%d bytes)", k, len(k)+len(env[k])+2))
	}
	return usageErr("the job's environment is %d bytes, above the limit of %d; the largest: %s. Send fewer variables: --no-inherit-env, with --env for those the job needs",
		total, api.MaxEnvBytes, strings.Join(big, ", "))
}
