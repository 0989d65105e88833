package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// unitSettings returns the [Service] settings of a systemd unit file: the
// last value of each key, as systemd reads them.
func unitSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			got[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestQueuedUnit_SurvivesItsJobs: the unit keeps queued and the other
// cards' jobs running when the kernel OOM-kills one job (OOMPolicy=continue;
// the default, stop, ends the whole unit), delegates its cgroup so each job
// gets its own (Delegate=yes), gives jobs a usable open-file limit, bounds
// the tasks, and reports a failed exec as a failed start (Type=exec). Where
// systemd-analyze is installed, it also accepts every setting.
func TestQueuedUnit_SurvivesItsJobs(t *testing.T) {
	unit := filepath.Join("..", "..", "..", "deploy", "systemd", "queued.service")
	s := unitSettings(t, unit)
	want := map[string]*regexp.Regexp{
		"Type":        regexp.MustCompile(`^(exec|notify)$`),
		"OOMPolicy":   regexp.MustCompile(`^continue$`),
		"Delegate":    regexp.MustCompile(`^yes$`),
		"LimitNOFILE": regexp.MustCompile(`^\d+(:\d+)?$`),
		"TasksMax":    regexp.MustCompile(`^(\d+%?|infinity)$`),
		"KillMode":    regexp.MustCompile(`^mixed$`),
	}
	for k, re := range want {
		if !re.MatchString(s[k]) {
			t.Errorf("%s: %s=%q, want %s", unit, k, s[k], re)
		}
	}

	// The soft limit is what jobs get; 1024, the default, is what they
	// must not be left with.
	soft, _, _ := strings.Cut(s["LimitNOFILE"], ":")
	if n, err := strconv.Atoi(soft); err != nil || n < 65536 {
		t.Errorf("%s: LimitNOFILE=%q, want a soft limit of at least 65536", unit, s["LimitNOFILE"])
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze not installed; the unit's syntax is not verified")
		return
	}
	// verify checks that ExecStart exists; point it at a binary that does.
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	fixed := regexp.MustCompile(`(?m)^ExecStart=.*$`).ReplaceAll(b, []byte("ExecStart=/bin/true"))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "queued.service"), fixed, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "./queued.service")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
}
