package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ttkit/ttkit/internal/ttsysfs"
	"github.com/ttkit/ttkit/queued/config"
)

// SlurmCmd groups what a host needs to join a Slurm cluster. Slurm knows
// nothing of Tenstorrent cards: it hands them out as a generic resource
// (GRES) named tt, and queued's Prolog and Epilog (deploy/slurm) turn each
// allocation into a hold on the cards, so queued starts nothing on them
// while a Slurm job has them.
type SlurmCmd struct {
	Gres  SlurmGresCmd  `cmd:"" help:"Print gres.conf lines for this host's cards, and the slurm.conf lines that go with them."`
	Cards SlurmCardsCmd `cmd:"" help:"Print the cards Slurm allocated a job on a node, from squeue --json and slurmd -G (for the Prolog)."`
}

// SlurmGresCmd prints the gres.conf lines that describe this host's cards
// to Slurm, one line a card, typed by the card type the driver reports in
// sysfs, and the slurm.conf lines that must match them. It needs no daemon.
type SlurmGresCmd struct {
	Devices string `name:"devices" env:"TT_DEVICE_IDS" placeholder:"0,1,..." help:"Cards to describe (default: the numeric nodes in --dev-dir, as queued finds them)."`
	DevDir  string `name:"dev-dir" default:"${dev_dir}" placeholder:"DIR" help:"Directory of the cards' device nodes; each line's File= is in it."`
	Sysfs   string `name:"sysfs" default:"/sys" placeholder:"DIR" help:"Where sysfs is mounted, for each card's type (class/tenstorrent/tenstorrent!N/tt_card_type)."`
	Node    string `name:"node" placeholder:"NAME" help:"Slurm node name: puts NodeName=NAME on every line, for one gres.conf shared by every node (default: no NodeName, and this host's short name in the slurm.conf hint)."`
}

// gresName is the name of the cards' GRES in gres.conf and slurm.conf,
// and so in --gres=tt:N. The Prolog (deploy/slurm/prolog.sh) looks for it.
const gresName = "tt"

// slurmCard is one card as gres.conf describes it.
type slurmCard struct {
	Card int    `json:"card"`
	Type string `json:"type,omitempty"`
	File string `json:"file"`
}

// slurmGres is what slurm gres prints, as --json gives it.
type slurmGres struct {
	Node  string      `json:"node"`
	Cards []slurmCard `json:"cards"`
	// GresConf are the gres.conf lines, SlurmConf the slurm.conf lines
	// that go with them.
	GresConf  []string `json:"gres_conf"`
	SlurmConf []string `json:"slurm_conf"`
	// Notes say why a card's type was left out.
	Notes []string `json:"notes,omitempty"`
}

// Run finds the cards and their types and prints the lines.
func (s *SlurmGresCmd) Run(a *App) error {
	for flag, dir := range map[string]string{"--dev-dir": s.DevDir, "--sysfs": s.Sysfs} {
		if !filepath.IsAbs(dir) {
			return usageErr("%s %q: want an absolute path", flag, dir)
		}
	}
	cards, err := s.cards()
	if err != nil {
		return err
	}
	node := s.Node
	if node == "" {
		host, err := os.Hostname()
		if err != nil {
			return &Error{Code: ExitRefused, Err: fmt.Errorf("finding this host's name for the slurm.conf line: %w; give --node", err)}
		}
		node, _, _ = strings.Cut(host, ".")
	} else if strings.ContainsAny(node, " \t\n=#") {
		return usageErr("--node %q: want a Slurm node name (no spaces, '=' or '#')", node)
	}
	types, errs := cardTypes(s.Sysfs)
	for _, err := range errs {
		fmt.Fprintf(a.Err, "%s: warning: %v\n", Name, err)
	}
	g := describeGres(node, s.Node != "", s.DevDir, cards, types)
	if a.JSON {
		return a.printJSON(g)
	}
	fmt.Fprint(a.Out, g.text())
	return nil
}

// cards is --devices (TT_DEVICE_IDS) or the numeric nodes of --dev-dir.
func (s *SlurmGresCmd) cards() ([]int, error) {
	if strings.TrimSpace(s.Devices) != "" {
		ids, err := config.ParseDevices(s.Devices)
		if err != nil {
			return nil, usageErr("--devices (TT_DEVICE_IDS) %q: %w", s.Devices, err)
		}
		return ids, nil
	}
	ids, err := config.Discover(s.DevDir)
	if errors.Is(err, config.ErrNoDevices) {
		return nil, &Error{Code: ExitRefused, Err: fmt.Errorf("%w (or give --devices)", err)}
	}
	if err != nil {
		return nil, &Error{Code: ExitRefused, Err: err}
	}
	return ids, nil
}

// cardTypes reads every card's tt_card_type under the sysfs root: card
// number to type, only for the cards whose driver reports one. A sysfs
// without the tenstorrent class (an older driver, or none loaded) gives no
// type and no error.
func cardTypes(root string) (map[int]string, []error) {
	r := ttsysfs.New(ttsysfs.Options{Root: root, Workers: 1})
	defer r.Close()
	read, errs := r.Read(nil)
	types := make(map[int]string, len(read))
	for _, c := range read {
		if c.Info.CardType != "" {
			types[c.Number] = c.Info.CardType
		}
	}
	return types, errs
}

// validGresType reports whether t can stand as a GRES type in gres.conf
// and in --gres=tt:TYPE:N: the card types the driver reports (n150, n300,
// p150a, ...) always can; anything with a separator Slurm reads (':', ',',
// '=', space) cannot.
func validGresType(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// describeGres lays out the gres.conf and slurm.conf lines for cards.
// Slurm refuses a node on which some cards of one GRES have a type and
// others do not (slurmd exits: "Some tt GRES in slurm.conf have a type
// while others do not"), so one card without a usable type leaves the
// type out for all of them, and a note says which card lacked it.
func describeGres(node string, withNode bool, devDir string, cards []int, types map[int]string) slurmGres {
	g := slurmGres{Node: node}
	typed := true
	for _, n := range cards {
		t, ok := types[n]
		switch {
		case !ok:
			typed = false
			g.Notes = append(g.Notes, fmt.Sprintf("card %d: the driver reports no type (tt_card_type)", n))
		case !validGresType(t):
			typed = false
			g.Notes = append(g.Notes, fmt.Sprintf("card %d: type %q cannot be a Slurm GRES type", n, t))
		}
	}
	if !typed && len(types) > 0 {
		g.Notes = append(g.Notes, "types left out for every card: Slurm refuses a node whose tt cards are typed in part")
	}
	counts := map[string]int{}
	var order []string
	for _, n := range cards {
		c := slurmCard{Card: n, File: filepath.Join(devDir, strconv.Itoa(n))}
		if typed {
			c.Type = types[n]
		}
		if counts[c.Type] == 0 {
			order = append(order, c.Type)
		}
		counts[c.Type]++
		g.Cards = append(g.Cards, c)
		line := "Name=" + gresName
		if c.Type != "" {
			line += " Type=" + c.Type
		}
		line += " File=" + c.File
		if withNode {
			line = "NodeName=" + node + " " + line
		}
		g.GresConf = append(g.GresConf, line)
	}
	gres := make([]string, 0, len(order))
	for _, t := range order {
		if t == "" {
			gres = append(gres, fmt.Sprintf("%s:%d", gresName, counts[t]))
			continue
		}
		gres = append(gres, fmt.Sprintf("%s:%s:%d", gresName, t, counts[t]))
	}
	g.SlurmConf = []string{"GresTypes=" + gresName, "NodeName=" + node + " Gres=" + strings.Join(gres, ",")}
	return g
}

// text is the gres.conf fragment: a comment with the slurm.conf lines
// and the notes, then one line a card.
func (g slurmGres) text() string {
	var b strings.Builder
	cards := "cards"
	if len(g.Cards) == 1 {
		cards = "card"
	}
	fmt.Fprintf(&b, "# gres.conf for %s: %d Tenstorrent %s (from `%s slurm gres`).\n", g.Node, len(g.Cards), cards, Name)
	for _, n := range g.Notes {
		fmt.Fprintf(&b, "# Note: %s.\n", n)
	}
	b.WriteString("# slurm.conf needs (with the node's CPUs and memory on its NodeName line):\n")
	for _, l := range g.SlurmConf {
		fmt.Fprintf(&b, "#   %s\n", l)
	}
	for _, l := range g.GresConf {
		b.WriteString(l + "\n")
	}
	return b.String()
}
