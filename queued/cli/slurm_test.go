package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

// runSlurmGres runs the real CLI's slurm gres with env alone: it needs no
// daemon, and TT_DEVICE_IDS must come only from env.
func runSlurmGres(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "tt-device-queue"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	return runCmd(t, cmd)
}

// devNodes makes a /dev/tenstorrent-like directory holding nodes for the
// given cards (plain files: only their names are read).
func devNodes(t *testing.T, cards ...int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "dev", "tenstorrent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range append([]string{"not-a-card"}, numbers(cards)...) {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func numbers(cards []int) []string {
	s := make([]string, len(cards))
	for i, c := range cards {
		s[i] = strconv.Itoa(c)
	}
	return s
}

// The fake host of one Blackhole p150a: one typed line, and the slurm.conf
// lines as a comment, byte for byte.
func TestSlurmGres_P150(t *testing.T) {
	sys := kmdtest.CopySysfs(t, "p150")
	dev := devNodes(t, 0)
	r := runSlurmGres(t, nil, "slurm", "gres", "--sysfs", sys.Root, "--dev-dir", dev, "--node", "bh-01")
	want := "# gres.conf for bh-01: 1 Tenstorrent card (from `tt-device-queue slurm gres`).\n" +
		"# slurm.conf needs (with the node's CPUs and memory on its NodeName line):\n" +
		"#   GresTypes=tt\n" +
		"#   NodeName=bh-01 Gres=tt:p150a:1\n" +
		"NodeName=bh-01 Name=tt Type=p150a File=" + dev + "/0\n"
	if r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Fatalf("want exit 0 and\n%s\ngot %v", want, r)
	}
}

// The Wormhole n300 host, its card named by TT_DEVICE_IDS as queued's
// are; without --node the lines carry no NodeName (a per-host gres.conf)
// and the hint names this host.
func TestSlurmGres_N300FromDeviceIDs(t *testing.T) {
	sys := kmdtest.CopySysfs(t, "n300")
	r := runSlurmGres(t, []string{"TT_DEVICE_IDS=0"}, "slurm", "gres", "--sysfs", sys.Root)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := strings.Cut(host, ".")
	r.want(t, 0, []string{"#   NodeName=" + short + " Gres=tt:n300:1\n", "\nName=tt Type=n300 File=/dev/tenstorrent/0\n"}, nil)
	if strings.Contains(r.stdout, "Note") {
		t.Errorf("a fully typed host got a note: %v", r)
	}
}

// The four-card hosts: a QuietBox of Blackhole p150a cards and a T3000 of
// Wormhole n300 cards, each card its own line and one count for the node.
func TestSlurmGres_FourCardHosts(t *testing.T) {
	for _, tc := range []struct{ kind, cardType string }{{"quietbox", "p150a"}, {"t3000", "n300"}} {
		t.Run(tc.kind, func(t *testing.T) {
			sys := kmdtest.CopySysfs(t, tc.kind)
			dev := devNodes(t, 0, 1, 2, 3)
			r := runSlurmGres(t, nil, "slurm", "gres", "--sysfs", sys.Root, "--dev-dir", dev, "--node", tc.kind)
			want := []string{"#   NodeName=" + tc.kind + " Gres=tt:" + tc.cardType + ":4\n"}
			for n := range 4 {
				want = append(want, fmt.Sprintf("NodeName=%s Name=tt Type=%s File=%s/%d\n", tc.kind, tc.cardType, dev, n))
			}
			r.want(t, 0, want, nil)
			if strings.Contains(r.stdout, "Note") || r.stderr != "" {
				t.Errorf("a fully typed host got a note or a warning: %v", r)
			}
		})
	}
}

// A host of several cards of two types (the shape of a mixed QuietBox or
// a T3000 beside a p150), one of whose nodes is missing: one line a card
// found, and one count per type, in card order.
func TestSlurmGres_MixedTypes(t *testing.T) {
	sys := kmdtest.BusySysfs(t, t.TempDir(), 5)
	for _, n := range []int{2, 3, 4} {
		sys.Set(n, "tt_card_type", "n300")
	}
	dev := devNodes(t, 0, 1, 3, 4) // card 2's node is gone
	r := runSlurmGres(t, nil, "--json", "slurm", "gres", "--sysfs", sys.Root, "--dev-dir", dev, "--node", "qb-01")
	var got struct {
		Node  string `json:"node"`
		Cards []struct {
			Card int    `json:"card"`
			Type string `json:"type"`
			File string `json:"file"`
		} `json:"cards"`
		GresConf  []string `json:"gres_conf"`
		SlurmConf []string `json:"slurm_conf"`
		Notes     []string `json:"notes"`
	}
	decode(t, r, &got)
	wantLines := []string{
		"NodeName=qb-01 Name=tt Type=p150a File=" + dev + "/0",
		"NodeName=qb-01 Name=tt Type=p150a File=" + dev + "/1",
		"NodeName=qb-01 Name=tt Type=n300 File=" + dev + "/3",
		"NodeName=qb-01 Name=tt Type=n300 File=" + dev + "/4",
	}
	if strings.Join(got.GresConf, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("gres.conf lines:\n%s\nwant\n%s", strings.Join(got.GresConf, "\n"), strings.Join(wantLines, "\n"))
	}
	if want := []string{"GresTypes=tt", "NodeName=qb-01 Gres=tt:p150a:2,tt:n300:2"}; strings.Join(got.SlurmConf, "|") != strings.Join(want, "|") {
		t.Errorf("slurm.conf lines %q, want %q", got.SlurmConf, want)
	}
	if len(got.Cards) != 4 || got.Cards[2].Card != 3 || got.Cards[2].Type != "n300" || got.Node != "qb-01" || len(got.Notes) != 0 {
		t.Errorf("cards %+v, node %q, notes %q", got.Cards, got.Node, got.Notes)
	}
}

// Slurm's slurmd refuses a node whose tt cards are typed in part ("Some tt
// GRES in slurm.conf have a type while others do not"): one card without a
// type, or with one Slurm cannot read, leaves the type out for all, and the
// comment says why.
func TestSlurmGres_PartlyTypedGoesUntyped(t *testing.T) {
	for _, tc := range []struct {
		name, note string
		change     func(*kmdtest.Sysfs)
	}{
		{"no type", "card 1: the driver reports no type (tt_card_type)", func(s *kmdtest.Sysfs) { s.Remove(1, "tt_card_type") }},
		{"unusable type", `card 1: type "p150a:x" cannot be a Slurm GRES type`, func(s *kmdtest.Sysfs) { s.Set(1, "tt_card_type", "p150a:x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := kmdtest.BusySysfs(t, t.TempDir(), 2)
			tc.change(sys)
			r := runSlurmGres(t, []string{"TT_DEVICE_IDS=0,1"}, "slurm", "gres", "--sysfs", sys.Root, "--node", "n1")
			r.want(t, 0, []string{
				"# Note: " + tc.note + ".\n",
				"# Note: types left out for every card: Slurm refuses a node whose tt cards are typed in part.\n",
				"#   NodeName=n1 Gres=tt:2\n",
				"NodeName=n1 Name=tt File=/dev/tenstorrent/0\nNodeName=n1 Name=tt File=/dev/tenstorrent/1\n",
			}, nil)
			if strings.Contains(r.stdout, "Type=") {
				t.Errorf("a partly typed host kept a type: %v", r)
			}
		})
	}
}

// A driver without the sysfs class (an older tt-kmd) gives no types and
// no error: the lines are untyped.
func TestSlurmGres_NoSysfsClass(t *testing.T) {
	r := runSlurmGres(t, []string{"TT_DEVICE_IDS=0,1"}, "slurm", "gres", "--sysfs", t.TempDir(), "--node", "n1")
	r.want(t, 0, []string{"#   NodeName=n1 Gres=tt:2\n", "NodeName=n1 Name=tt File=/dev/tenstorrent/1\n"}, nil)
	if strings.Contains(r.stdout, "Type=") || strings.Contains(r.stdout, "types left out") {
		t.Errorf("untyped host: %v", r)
	}
}

// Bad input is refused with the value named; a host without cards says
// how to name them.
func TestSlurmGres_Refusals(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "dev")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		msg  string
	}{
		{"relative sysfs", nil, []string{"--sysfs", "sys", "--devices", "0"}, 2, `--sysfs "sys": want an absolute path`},
		{"relative dev dir", nil, []string{"--dev-dir", "dev", "--devices", "0"}, 2, `--dev-dir "dev": want an absolute path`},
		{"bad ids", []string{"TT_DEVICE_IDS=0,x"}, nil, 2, `--devices (TT_DEVICE_IDS) "0,x": "x" is not a card number`},
		{"bad node", nil, []string{"--devices", "0", "--node", "a b"}, 2, `--node "a b": want a Slurm node name`},
		{"no cards", nil, []string{"--dev-dir", empty}, 1, "no numeric device nodes in " + empty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSlurmGres(t, tc.env, append([]string{"slurm", "gres"}, tc.args...)...)
			r.want(t, tc.code, nil, []string{tc.msg})
			if r.stdout != "" {
				t.Errorf("stdout not empty: %v", r)
			}
		})
	}
}
