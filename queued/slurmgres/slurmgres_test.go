package slurmgres_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/slurmgres"
)

// job is squeue --json's answer for job 42 on nodes (name, gres_detail
// entry, in turn), as Slurm 22.05 shapes it.
func job(nodeGres ...string) []byte {
	var nodes, gres []string
	for i := 0; i+1 < len(nodeGres); i += 2 {
		nodes = append(nodes, fmt.Sprintf(`{"nodename":%q}`, nodeGres[i]))
		gres = append(gres, fmt.Sprintf("%q", nodeGres[i+1]))
	}
	return []byte(fmt.Sprintf(`{"jobs":[{"job_id":42,"gres_detail":[%s],"job_resources":{"allocated_nodes":[%s]}}]}`,
		strings.Join(gres, ","), strings.Join(nodes, ",")))
}

// The answer a real Slurm 22.05 gave for a job whose name and comment
// carry fake GRES lines: only slurmctld's gres_detail counts.
func TestNodeGres_HostileNameAndComment(t *testing.T) {
	b, err := os.ReadFile("../../deploy/slurm/testdata/squeue-hostile.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := slurmgres.NodeGres(b, 42, "ttnode")
	if err != nil || got != "tt:p150a:1(IDX:0)" {
		t.Fatalf("NodeGres = %q, %v", got, err)
	}
	idx, err := slurmgres.Indexes(got, "tt")
	if err != nil || !slices.Equal(idx, []int{0}) {
		t.Errorf("Indexes = %v, %v", idx, err)
	}
}

func TestNodeGres(t *testing.T) {
	for _, tc := range []struct {
		name, answer, node, want, err string
	}{
		{"second node", string(job("n1", "tt:1(IDX:0)", "n2", "tt:2(IDX:1-2)")), "n2", "tt:2(IDX:1-2)", ""},
		{"no GRES anywhere", `{"jobs":[{"job_id":42,"job_resources":{"allocated_nodes":[{"nodename":"n1"}]}}]}`, "n1", "", ""},
		{"a null entry", `{"jobs":[{"job_id":42,"gres_detail":[null],"job_resources":{"allocated_nodes":[{"nodename":"n1"}]}}]}`, "n1", "", ""},
		{"other jobs beside", `{"jobs":[{"job_id":7,"gres_detail":["tt:4(IDX:0-3)"],"job_resources":{"allocated_nodes":[{"nodename":"n1"}]}},` +
			string(job("n1", "tt:1(IDX:0)"))[9:], "n1", "tt:1(IDX:0)", ""},
		{"not JSON", "JobId=42 GRES=tt:1(IDX:0)", "n1", "", "not JSON"},
		{"two objects", string(job("n1", "tt:1(IDX:0)")) + "{}", "n1", "", "goes on after"},
		{"no jobs list", `{"errors":[{"error":"x"}]}`, "n1", "", `no "jobs" list`},
		{"no such job", `{"jobs":[]}`, "n1", "", "knows no job 42"},
		{"job twice", `{"jobs":[{"job_id":42},{"job_id":42}]}`, "n1", "", "job 42 twice"},
		{"a later schema", `{"jobs":[{"job_id":42,"gres_detail":["tt:1(IDX:0)"],"job_resources":{"nodes":{"allocation":[{"name":"n1"}]}}}]}`, "n1", "", "allocated_nodes"},
		{"not this node's job", string(job("n1", "tt:1(IDX:0)")), "n9", "", `node "n9" is not among`},
		{"node twice", string(job("n1", "tt:1(IDX:0)", "n1", "tt:1(IDX:1)")), "n1", "", "twice"},
		{"entries and nodes differ", `{"jobs":[{"job_id":42,"gres_detail":["tt:1(IDX:0)"],"job_resources":{"allocated_nodes":[{"nodename":"n1"},{"nodename":"n2"}]}}]}`, "n2", "", "1 gres_detail entries for 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := slurmgres.NodeGres([]byte(tc.answer), 42, tc.node)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Errorf("= %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, slurmgres.ErrUnreadable) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want ErrUnreadable naming %q", err, tc.err)
			}
		})
	}
}

func TestIndexes(t *testing.T) {
	for _, tc := range []struct {
		detail string
		want   []int
		err    string
	}{
		{"", nil, ""},
		{"tt:p150a:2(IDX:0-1)", []int{0, 1}, ""},
		{"gpu:2(IDX:0,1),tt:2(IDX:0,3)", []int{0, 3}, ""},
		{"tt:p150a:1(IDX:2),tt:n300:2(IDX:0-1)", []int{2, 0, 1}, ""},
		{"ttx:1(IDX:0),gpu:1(CNT:1)", nil, ""},
		{"tt(IDX:0)", nil, "want tt[:TYPE]:COUNT(IDX:LIST)"},
		{"tt:1(CNT:1)", nil, "want tt[:TYPE]:COUNT(IDX:LIST)"},
		{"tt:1(IDX:0-)", nil, `"0-" is not N or N-M`},
		{"tt:1(IDX:3-1)", nil, "not N or N-M"},
		{"tt:1(IDX:99999)", nil, "not N or N-M"},
		{"tt:2(IDX:0,0)", nil, "index 0 given twice"},
		{"tt:1(IDX:0),tt:1(IDX:0)", nil, "given twice"},
		{"tt:1(IDX:0-2)", nil, "a count of 1 for 3 indexes"},
		{"tt:1(IDX:0", nil, `GRES "tt:1(IDX:0"`},
		{"tt:1(IDX:0) x", nil, "GRES"},
		{"gpu:1(IDX:0),", nil, `GRES ""`},
	} {
		got, err := slurmgres.Indexes(tc.detail, "tt")
		if tc.err == "" {
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("Indexes(%q) = %v, %v; want %v", tc.detail, got, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, slurmgres.ErrUnreadable) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Indexes(%q): error %v, want ErrUnreadable naming %q", tc.detail, err, tc.err)
		}
	}
}

// slurmdG is slurmd -G on a node whose gres.conf lists cards 0, 1 and 3.
const slurmdG = `slurmd: Gres Name=gpu Type=(null) Count=1 Index=0 ID=7696487 File=/dev/nvidia0 (null)
slurmd: Gres Name=tt Type=p150a Count=1 Index=0 ID=29812 File=/dev/tenstorrent/0 (null)
slurmd: Gres Name=tt Type=p150a Count=1 Index=1 ID=29812 File=/dev/tenstorrent/1 (null)
slurmd: Gres Name=tt Type=p150a Count=1 Index=3 ID=29812 File=/dev/tenstorrent/3 (null)
`

func TestCards(t *testing.T) {
	got, err := slurmgres.Cards([]byte(slurmdG), "tt", []int{2, 0})
	if err != nil || !slices.Equal(got, []int{3, 0}) {
		t.Errorf("Cards = %v, %v", got, err)
	}
	for _, tc := range []struct {
		g   string
		idx []int
		err string
	}{
		{slurmdG, []int{3}, "index 3, but slurmd -G lists 3 tt device files"},
		{"slurmd: Gres Name=tt Type=p150a Count=2 Index=0 ID=1 File=/dev/tenstorrent/[0-1] (null)\n", []int{0}, "Count=1"},
		{"slurmd: Gres Name=tt Type=p150a Count=1 Index=0 ID=1 File=/dev/tenstorrent/x (null)\n", []int{0}, "not a /dev/tenstorrent/N card"},
		{"slurmd: Gres Name=tt Type=p150a Count=1 Index=0 ID=1 (null)\n", []int{0}, "want one File="},
		{"slurmd: Gres Name=tt Count=1 File=/dev/tenstorrent/0\nslurmd: Gres Name=tt Count=1 File=/dev/tenstorrent/0\n", []int{0, 1}, "card 0 twice"},
	} {
		if _, err := slurmgres.Cards([]byte(tc.g), "tt", tc.idx); !errors.Is(err, slurmgres.ErrUnreadable) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Cards(%q, %v): error %v, want ErrUnreadable naming %q", tc.g, tc.idx, err, tc.err)
		}
	}
}
