package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSlurm writes stand-ins for squeue and slurmd that print the given
// answers (stdout; slurmd -G's on stderr, as slurmd does) and exit with
// code, and returns their paths.
func fakeSlurm(t *testing.T, squeue string, code int, slurmdG string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"squeue": fmt.Sprintf("#!/bin/sh\n[ \"$1 $2 $3\" = '--json -j 42' ] || { echo \"bad args: $*\" >&2; exit 9; }\ncat %q\necho 'squeue: error: something' >&2\nexit %d\n", filepath.Join(dir, "squeue.out"), code),
		"slurmd": fmt.Sprintf("#!/bin/sh\n[ \"$1 $2 $3\" = '-G -N ttnode' ] || exit 9\ncat %q >&2\n", filepath.Join(dir, "slurmd.out")),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range map[string]string{"squeue.out": squeue, "slurmd.out": slurmdG} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "squeue"), filepath.Join(dir, "slurmd")
}

const cardsSlurmdG = "slurmd: Gres Name=tt Type=p150a Count=1 Index=0 ID=1 File=/dev/tenstorrent/0 (null)\n" +
	"slurmd: Gres Name=tt Type=p150a Count=1 Index=1 ID=1 File=/dev/tenstorrent/1 (null)\n" +
	"slurmd: Gres Name=tt Type=p150a Count=1 Index=3 ID=1 File=/dev/tenstorrent/3 (null)\n"

// slurm cards prints the cards slurmctld allocated, from squeue --json as
// a real Slurm 22.05 printed it for a job whose name and comment carry
// fake GRES lines: card 0 alone, not the cards the name claims.
func TestSlurmCards_HostileJobText(t *testing.T) {
	b, err := os.ReadFile("../../deploy/slurm/testdata/squeue-hostile.json")
	if err != nil {
		t.Fatal(err)
	}
	sq, sd := fakeSlurm(t, string(b), 0, cardsSlurmdG)
	r := runSlurmGres(t, nil, "slurm", "cards", "--job", "42", "--node", "ttnode", "--squeue", sq, "--slurmd", sd)
	if r.code != 0 || r.stdout != "0\n" {
		t.Errorf("want card 0 alone: %v", r)
	}
	r = runSlurmGres(t, nil, "--json", "slurm", "cards", "--job", "42", "--node", "ttnode", "--squeue", sq, "--slurmd", sd)
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{"job":"42","node":"ttnode","gres":"tt:p150a:1(IDX:0)","cards":[0]}` {
		t.Errorf("--json: %v", r)
	}
}

// What cannot be read strictly prints no card and exits 1 naming why;
// bad arguments exit 2.
func TestSlurmCards_FailsClosed(t *testing.T) {
	good := `{"jobs":[{"job_id":42,"gres_detail":["tt:2(IDX:1-2)"],"job_resources":{"allocated_nodes":[{"nodename":"ttnode"}]}}]}`
	for _, tc := range []struct {
		name, squeue string
		code         int
		args         []string
		exit         int
		err          string
	}{
		{"squeue fails", "", 1, nil, 1, "squeue --json -j 42: exit status 1: squeue: error: something"},
		{"not JSON", "JobId=42 Nodes=ttnode GRES=tt:4(IDX:0-3)\n", 0, nil, 1, "squeue --json's answer is not JSON"},
		{"a malformed entry", strings.Replace(good, "IDX:1-2", "IDX:1-", 1), 0, nil, 1, `GRES "tt:2(IDX:1-)"`},
		{"an index past gres.conf", strings.Replace(good, "IDX:1-2", "IDX:2-3", 1), 0, nil, 1, "index 3, but slurmd -G lists 3 tt device files"},
		{"a job id that is not one", good, 0, []string{"--job", "42 x"}, 2, `--job "42 x"`},
		{"a node name that is not one", good, 0, []string{"--node", "n1,n2"}, 2, `--node "n1,n2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sq, sd := fakeSlurm(t, tc.squeue, tc.code, cardsSlurmdG)
			args := append([]string{"slurm", "cards", "--job", "42", "--node", "ttnode", "--squeue", sq, "--slurmd", sd}, tc.args...)
			r := runSlurmGres(t, nil, args...)
			if r.code != tc.exit || r.stdout != "" || !strings.Contains(r.stderr, tc.err) {
				t.Errorf("want exit %d, no card and %q on stderr: %v", tc.exit, tc.err, r)
			}
		})
	}
	sq, sd := fakeSlurm(t, good, 0, cardsSlurmdG)
	if r := runSlurmGres(t, nil, "slurm", "cards", "--job", "42", "--node", "ttnode", "--squeue", sq, "--slurmd", sd); r.code != 0 || r.stdout != "1,3\n" {
		t.Errorf("the good answer: %v", r)
	}
}
