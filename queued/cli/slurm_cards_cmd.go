package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/ttkit/ttkit/queued/slurmgres"
)

// SlurmCardsCmd prints the cards Slurm allocated a job on a node, for
// root's Prolog (deploy/slurm/prolog.sh), which holds exactly those in
// queued. They come from slurmctld's own account of the allocation
// (squeue --json: the node's gres_detail entry) and the node's gres.conf
// (slurmd -G: which device file each GRES index is), read strictly, so
// that nothing the job's user wrote (its name, comment, working
// directory) can add a card; whatever cannot be read that way is an
// error and prints no card, so the Prolog takes no hold.
type SlurmCardsCmd struct {
	Job    string `name:"job" required:"" placeholder:"ID" help:"The Slurm job (the Prolog's SLURM_JOB_ID)."`
	Node   string `name:"node" required:"" placeholder:"NAME" help:"The Slurm node (the Prolog's SLURMD_NODENAME)."`
	Squeue string `name:"squeue" default:"squeue" placeholder:"PATH" help:"The squeue to ask (squeue --json -j ID), by name on PATH or by path."`
	Slurmd string `name:"slurmd" default:"slurmd" placeholder:"PATH" help:"The slurmd to ask for the node's GRES device files (slurmd -G -N NAME)."`
}

// slurmCards is what slurm cards --json prints.
type slurmCards struct {
	Job   string `json:"job"`
	Node  string `json:"node"`
	Gres  string `json:"gres"`
	Cards []int  `json:"cards"`
}

// Run asks squeue and slurmd and prints the cards, comma-separated (an
// empty line when the job has none on the node).
func (s *SlurmCardsCmd) Run(a *App) error {
	job, err := strconv.ParseUint(s.Job, 10, 32)
	if err != nil || job == 0 || strconv.FormatUint(job, 10) != s.Job {
		return usageErr("--job %q: want a Slurm job id (digits)", s.Job)
	}
	if s.Node == "" || strings.ContainsAny(s.Node, " \t\r\n=,()[]") {
		return usageErr("--node %q: want a Slurm node name", s.Node)
	}
	answer, _, err := s.ask(a, s.Squeue, "--json", "-j", s.Job)
	if err != nil {
		return err
	}
	detail, err := slurmgres.NodeGres(answer, job, s.Node)
	if err != nil {
		return refused(err)
	}
	idx, err := slurmgres.Indexes(detail, gresName)
	if err != nil {
		return refused(err)
	}
	out := slurmCards{Job: s.Job, Node: s.Node, Gres: detail, Cards: []int{}}
	if len(idx) > 0 {
		stdout, stderr, err := s.ask(a, s.Slurmd, "-G", "-N", s.Node)
		if err != nil {
			return err
		}
		if out.Cards, err = slurmgres.Cards(append(stdout, stderr...), gresName, idx); err != nil {
			return refused(err)
		}
	}
	if a.JSON {
		return a.printJSON(out)
	}
	list := make([]string, len(out.Cards))
	for i, c := range out.Cards {
		list[i] = strconv.Itoa(c)
	}
	fmt.Fprintln(a.Out, strings.Join(list, ","))
	return nil
}

// ask runs a Slurm command with this command's environment (SLURM_CONF)
// and returns its stdout and stderr (slurmd -G prints its records on
// stderr); a failure is an error naming the command and quoting what it
// said on stderr.
func (s *SlurmCardsCmd) ask(a *App, prog string, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(a.ctx, prog, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		said := strings.Join(strings.Fields(errb.String()), " ")
		if len(said) > 300 {
			said = said[:300] + "..."
		}
		return nil, nil, &Error{Code: ExitRefused, Err: fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, said)}
	}
	return out.Bytes(), errb.Bytes(), nil
}

// refused is an answer that could not be read: exit 1, no card.
func refused(err error) error {
	if errors.Is(err, slurmgres.ErrUnreadable) {
		return &Error{Code: ExitRefused, Err: err}
	}
	return err
}
