package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shellEnv is a submitter's shell: the toolchain variables the CLI sends
// by default, the queue's own settings it never sends, TT_VISIBLE_DEVICES
// and an unrelated variable.
func shellEnv(bin string) []string {
	return []string{
		"PATH=" + bin + ":" + os.Getenv("PATH"),
		"VIRTUAL_ENV=/venvs/tt", "CONDA_PREFIX=/conda/envs/tt", "CONDA_DEFAULT_ENV=tt",
		"PYTHONPATH=/src/tt-metal", "LD_LIBRARY_PATH=/opt/tt/lib",
		"TT_METAL_HOME=/src/tt-metal", "TT_METAL_LOGGER_LEVEL=Debug", "ARCH_NAME=blackhole",
		"TT_DEVICE_RESULT_BYTES=99", "TT_QUEUE_SECRET=x", "TT_VISIBLE_DEVICES=1", "UNRELATED=1",
	}
}

// printEnv is a job that prints the variables the test looks at.
const printEnv = `for v in PATH VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV PYTHONPATH LD_LIBRARY_PATH TT_METAL_HOME TT_METAL_LOGGER_LEVEL ARCH_NAME TT_DEVICE_RESULT_BYTES TT_QUEUE_SECRET TT_VISIBLE_DEVICES UNRELATED; do echo "$v=${!v-unset}"; done`

// TestEnv_SubmitterToolchainIsInherited: by default a job sees the
// submitter's toolchain variables and nothing else of the shell; --env
// overrides them; job lists which came from the shell.
func TestEnv_SubmitterToolchainIsInherited(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	bin := filepath.Join(t.TempDir(), "venv-bin")
	env := shellEnv(bin)

	// "." comes first on PYTHONPATH, as the Python tool gave every job.
	t.Run("default", func(t *testing.T) {
		r := d.runWith(env, "", "run", "--", printEnv)
		r.want(t, 0, []string{
			"PATH=" + bin + ":", "VIRTUAL_ENV=/venvs/tt\n", "CONDA_PREFIX=/conda/envs/tt\n", "CONDA_DEFAULT_ENV=tt\n",
			"PYTHONPATH=.:/src/tt-metal\n", "LD_LIBRARY_PATH=/opt/tt/lib\n", "TT_METAL_HOME=/src/tt-metal\n",
			"TT_METAL_LOGGER_LEVEL=Debug\n", "ARCH_NAME=blackhole\n",
			"TT_DEVICE_RESULT_BYTES=unset\n", "TT_QUEUE_SECRET=unset\n", "TT_VISIBLE_DEVICES=unset\n", "UNRELATED=unset\n",
		}, []string{"TT_VISIBLE_DEVICES=1 is set in this shell but not sent", "--env TT_VISIBLE_DEVICES=1"})
	})
	t.Run("--env overrides, and job shows what came from the shell", func(t *testing.T) {
		r := d.runWith(env, "", "queue", "-e", "ARCH_NAME=wormhole", "-e", "TT_VISIBLE_DEVICES=0", "--", printEnv)
		r.want(t, 0, nil, nil)
		if strings.Contains(r.stderr, "TT_VISIBLE_DEVICES=1 is set") {
			t.Fatalf("warned about TT_VISIBLE_DEVICES although --env gives it: %v", r)
		}
		id := strings.TrimSpace(r.stdout)
		d.run("result", id).want(t, 0, []string{"ARCH_NAME=wormhole\n", "TT_VISIBLE_DEVICES=0\n", "VIRTUAL_ENV=/venvs/tt\n"}, nil)
		j := d.job(id)
		want := []string{"CONDA_DEFAULT_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "TT_METAL_HOME", "TT_METAL_LOGGER_LEVEL", "VIRTUAL_ENV"}
		if !slices.Equal(j.EnvFromShell, want) || j.Env["ARCH_NAME"] != "wormhole" || j.Env["VIRTUAL_ENV"] != "/venvs/tt" {
			t.Fatalf("job env %v from shell %v; want the shell's %v and ARCH_NAME from --env", j.Env, j.EnvFromShell, want)
		}
		d.run("job", id).want(t, 0, []string{"env        ARCH_NAME=wormhole TT_VISIBLE_DEVICES=0\n", "shell env  CONDA_DEFAULT_ENV=tt CONDA_PREFIX=/conda/envs/tt "}, nil)
	})
	t.Run("--no-inherit-env sends nothing", func(t *testing.T) {
		r := d.runWith(env, "", "run", "--no-inherit-env", "-e", "UNRELATED=2", "--", printEnv)
		r.want(t, 0, []string{"VIRTUAL_ENV=unset\n", "ARCH_NAME=unset\n", "UNRELATED=2\n"}, nil)
		if strings.Contains(r.stdout, bin) {
			t.Fatalf("--no-inherit-env still sent PATH: %v", r)
		}
	})
	t.Run("--inherit-env-all sends the whole environment but the queue's own", func(t *testing.T) {
		r := d.runWith(append(env, "BASH_FUNC_f%%=() {  echo f\n}"), "", "run", "--inherit-env-all", "--", printEnv)
		r.want(t, 0, []string{"UNRELATED=1\n", "VIRTUAL_ENV=/venvs/tt\n", "TT_DEVICE_RESULT_BYTES=unset\n", "TT_QUEUE_SECRET=unset\n", "TT_VISIBLE_DEVICES=unset\n"}, nil)
	})
	t.Run("both switches are a usage error", func(t *testing.T) {
		d.runWith(env, "", "queue", "--no-inherit-env", "--inherit-env-all", "--", "true").want(t, 2, nil, []string{"--no-inherit-env"})
	})
	t.Run("an environment too large is refused before sending", func(t *testing.T) {
		big := append([]string(nil), env...)
		for _, c := range "ABCDEF" {
			big = append(big, "TT_METAL_"+string(c)+"="+strings.Repeat("x", 100<<10))
		}
		d.runWith(big, "", "queue", "--", "true").want(t, 2, nil, []string{"TT_METAL_A", "--no-inherit-env"})
	})
}

// TestEnv_VenvOfTheSubmitter is the venv case: from a shell where a
// virtual environment is active, `run -- 'python3 ...'` runs the venv's
// python3, not the one on the daemon's PATH.
func TestEnv_VenvOfTheSubmitter(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(realPython(t), "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("creating a venv: %v\n%s", err, out)
	}
	active := []string{"VIRTUAL_ENV=" + venv, "PATH=" + filepath.Join(venv, "bin") + ":" + os.Getenv("PATH")}
	r := d.runWith(active, "", "run", "--", `python3 -c 'import sys; print(sys.prefix)'`)
	r.want(t, 0, []string{venv + "\n"}, nil)
	script := filepath.Join(t.TempDir(), "prefix.py")
	if err := os.WriteFile(script, []byte("import sys\nprint(sys.prefix)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.runWith(active, "", "queue-python", "--wait", script).want(t, 0, []string{venv + "\n"}, nil)
}
