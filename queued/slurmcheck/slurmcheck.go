// Package slurmcheck asks Slurm whether a job is gone, for queued's holds:
// a hold taken for a Slurm job by its Prolog is released by its Epilog,
// and a node that rebooted or a slurmd that crashed never runs that
// Epilog, so queued asks squeue now and then and ends the holds of jobs
// Slurm no longer runs.
package slurmcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Find returns the squeue to ask: setting (TT_DEVICE_SLURM_CHECK) when it
// names one, none for "off", else squeue when it is on PATH (none when it
// is not).
func Find(setting string) (string, error) {
	switch setting {
	case "off":
		return "", nil
	case "":
		p, err := exec.LookPath("squeue")
		if err != nil {
			return "", nil // no Slurm on this host: nothing to ask
		}
		return p, nil
	}
	p, err := exec.LookPath(setting)
	if err != nil {
		return "", fmt.Errorf("TT_DEVICE_SLURM_CHECK=%s: %w", setting, err)
	}
	return p, nil
}

// finished are the job states in which a Slurm job no longer holds its
// node's cards.
var finished = map[string]bool{
	"COMPLETED": true, "CANCELLED": true, "FAILED": true, "TIMEOUT": true, "NODE_FAIL": true,
	"PREEMPTED": true, "OUT_OF_MEMORY": true, "BOOT_FAIL": true, "DEADLINE": true, "SPECIAL_EXIT": true,
}

// Gone returns a function that asks squeue at path about a Slurm job:
// gone when squeue knows no such job (it forgets a job some minutes after
// it ends) or reports it finished. An answer squeue cannot give (it
// cannot reach slurmctld) is an error, and the hold stays.
func Gone(path string) func(ctx context.Context, id string) (bool, string, error) {
	return func(ctx context.Context, id string) (bool, string, error) {
		if id == "" || strings.ContainsAny(id, " \t\n") {
			return false, "", fmt.Errorf("slurm job id %q", id)
		}
		cmd := exec.CommandContext(ctx, path, "-h", "-j", id, "-o", "%T")
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err := cmd.Run()
		state := strings.TrimSpace(out.String())
		msg := strings.TrimSpace(stderr.String())
		var exit *exec.ExitError
		switch {
		case err == nil && state == "":
			return true, "squeue knows no such job", nil
		case err == nil && finished[state]:
			return true, "it is " + strings.ToLower(state), nil
		case err == nil:
			return false, strings.ToLower(state), nil
		case errors.As(err, &exit) && strings.Contains(msg, "Invalid job id"):
			return true, "squeue knows no such job", nil
		}
		return false, "", fmt.Errorf("asking %s about Slurm job %s: %w: %s", path, id, err, msg)
	}
}
