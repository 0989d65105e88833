// Package slurmgres reads, as root's Slurm Prolog needs it, which of this
// node's cards Slurm allocated a job: from what slurmctld itself says of
// the allocation, never from text the job's user wrote. Slurm 22.05 gives
// a Prolog no variable for a GRES other than gpu, and the text of
// `scontrol show job -d` cannot be trusted: a job's name, comment, working
// directory and command are printed in it as they were given, newlines
// included, so a name such as "x\n     Nodes=n1 ... GRES=tt:4(IDX:0-3)"
// prints a line Slurm never wrote. squeue --json prints the same
// allocation as JSON, in which the user's text is a quoted string that
// cannot pass for a field; this package reads it, and slurmd -G's list of
// the node's GRES device files, strictly: anything it does not recognise
// is an error (ErrUnreadable), never a guess.
package slurmgres

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// ErrUnreadable is wrapped by every error that comes from an answer of
// squeue or slurmd this package cannot read strictly: the caller must then
// take no card rather than guess (fail closed).
var ErrUnreadable = errors.New("cannot read Slurm's answer strictly")

// maxIndex bounds a GRES index: far above any node's card count, low
// enough that a range in a corrupt answer cannot make a huge list.
const maxIndex = 1024

// squeueAnswer is the part of `squeue --json` (Slurm 22.05: the openapi
// v0.0.38 plugin's job records) read here. job_resources.allocated_nodes
// lists the job's nodes in the order of gres_detail, which holds a string
// per node ("tt:p150a:2(IDX:0-1),gpu:1(IDX:0)"), both built by slurmctld.
type squeueAnswer struct {
	Jobs *[]squeueJob `json:"jobs"`
}

type squeueJob struct {
	JobID        *uint64   `json:"job_id"`
	GresDetail   []*string `json:"gres_detail"`
	JobResources *struct {
		AllocatedNodes *[]struct {
			Nodename string `json:"nodename"`
		} `json:"allocated_nodes"`
	} `json:"job_resources"`
}

// NodeGres returns the GRES slurmctld allocated job on node, as the one
// entry of gres_detail that is node's in squeue's JSON answer ("" when the
// job has no GRES there). Exactly one job record must be job's, node must
// be one of its nodes exactly once, and there must be a gres_detail entry
// per node (or none at all: a job without GRES); anything else is an
// error wrapping ErrUnreadable.
func NodeGres(answer []byte, job uint64, node string) (string, error) {
	var a squeueAnswer
	dec := json.NewDecoder(bytes.NewReader(answer))
	if err := dec.Decode(&a); err != nil {
		return "", fmt.Errorf("%w: squeue --json's answer is not JSON: %v", ErrUnreadable, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("%w: squeue --json's answer goes on after its JSON object", ErrUnreadable)
	}
	if a.Jobs == nil {
		return "", fmt.Errorf("%w: squeue --json's answer has no \"jobs\" list", ErrUnreadable)
	}
	var found *squeueJob
	for i := range *a.Jobs {
		j := &(*a.Jobs)[i]
		if j.JobID == nil || *j.JobID != job {
			continue
		}
		if found != nil {
			return "", fmt.Errorf("%w: squeue --json lists job %d twice", ErrUnreadable, job)
		}
		found = j
	}
	if found == nil {
		return "", fmt.Errorf("%w: squeue --json knows no job %d", ErrUnreadable, job)
	}
	if found.JobResources == nil || found.JobResources.AllocatedNodes == nil {
		return "", fmt.Errorf("%w: squeue --json's job %d has no job_resources.allocated_nodes (the form of Slurm 22.05's openapi/v0.0.38; is the job running?)", ErrUnreadable, job)
	}
	nodes := *found.JobResources.AllocatedNodes
	at := -1
	for i, n := range nodes {
		if n.Nodename != node {
			continue
		}
		if at >= 0 {
			return "", fmt.Errorf("%w: squeue --json lists node %q twice in job %d's allocated_nodes", ErrUnreadable, node, job)
		}
		at = i
	}
	if at < 0 {
		return "", fmt.Errorf("%w: node %q is not among job %d's allocated_nodes in squeue --json", ErrUnreadable, node, job)
	}
	switch {
	case len(found.GresDetail) == 0:
		return "", nil // no GRES on any node
	case len(found.GresDetail) != len(nodes):
		return "", fmt.Errorf("%w: squeue --json's job %d has %d gres_detail entries for %d allocated_nodes", ErrUnreadable, job, len(found.GresDetail), len(nodes))
	case found.GresDetail[at] == nil:
		return "", nil
	}
	return *found.GresDetail[at], nil
}

// entry is one entry of a gres_detail string for the named GRES:
// NAME[:TYPE]:COUNT(IDX:LIST), as slurmctld prints it.
var entry = regexp.MustCompile(`^([A-Za-z0-9_.-]+)(?::([A-Za-z0-9_.-]+))?:([0-9]+)\(IDX:([0-9,-]+)\)$`)

// Indexes returns the indexes (IDX) of the GRES called name in a node's
// gres_detail string ("tt:p150a:2(IDX:0,2),gpu:1(IDX:0)" gives 0 and 2 for
// tt), in the order given. Entries of other GRES are skipped once their
// parentheses balance; an entry of name's that is not NAME[:TYPE]:COUNT(
// IDX:LIST) with COUNT the length of LIST, or an index given twice, is an
// error wrapping ErrUnreadable.
func Indexes(detail, name string) ([]int, error) {
	if detail == "" {
		return nil, nil
	}
	var out []int
	seen := map[int]bool{}
	for _, e := range splitTop(detail) {
		if e == "" || strings.Count(e, "(") != strings.Count(e, ")") || strings.ContainsAny(e, " \t\r\n") {
			return nil, fmt.Errorf("%w: GRES %q in %q", ErrUnreadable, e, detail)
		}
		if e != name && !strings.HasPrefix(e, name+":") && !strings.HasPrefix(e, name+"(") {
			continue // another GRES
		}
		m := entry.FindStringSubmatch(e)
		if m == nil || m[1] != name {
			return nil, fmt.Errorf("%w: GRES %q in %q: want %s[:TYPE]:COUNT(IDX:LIST)", ErrUnreadable, e, detail, name)
		}
		idx, err := expand(m[4])
		if err != nil {
			return nil, fmt.Errorf("%w: GRES %q in %q: %v", ErrUnreadable, e, detail, err)
		}
		if n, err := strconv.Atoi(m[3]); err != nil || n != len(idx) {
			return nil, fmt.Errorf("%w: GRES %q in %q: a count of %s for %d indexes", ErrUnreadable, e, detail, m[3], len(idx))
		}
		for _, i := range idx {
			if seen[i] {
				return nil, fmt.Errorf("%w: GRES %q in %q: index %d given twice", ErrUnreadable, e, detail, i)
			}
			seen[i] = true
			out = append(out, i)
		}
	}
	return out, nil
}

// splitTop splits s at the commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// expand turns an index list (0-1,3) into its numbers.
func expand(list string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, errA := number(lo)
		b, errB := number(hi)
		if errA != nil || errB != nil || a > b {
			return nil, fmt.Errorf("index list %q: %q is not N or N-M", list, part)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

func number(s string) (int, error) {
	if s == "" || len(s) > 4 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("not an index: %q", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxIndex {
		return 0, fmt.Errorf("not an index: %q", s)
	}
	return n, nil
}

// gresLine is a GRES record of `slurmd -G` ("slurmd: Gres Name=tt
// Type=p150a Count=1 Index=0 ID=29812 File=/dev/tenstorrent/0 (null)"),
// one per device file, in the order the IDX of gres_detail counts them.
var gresLine = regexp.MustCompile(`(?:^|\s)Gres Name=(\S+)\s`)

// cardFile is a card's device file: the card number is its last element.
var cardFile = regexp.MustCompile(`^/\S*/([0-9]{1,4})$`)

// Cards maps a node's GRES indexes of the GRES called name to card
// numbers through slurmd -G's answer (slurmd -G -N NODE: the node's GRES
// records, from gres.conf, which only root writes): index i is the i-th
// record of name, and its File= ends in the card number
// (/dev/tenstorrent/3). A record without one File= naming a card, with a
// Count other than 1, or an index past the records is an error wrapping
// ErrUnreadable.
func Cards(slurmdG []byte, name string, idx []int) ([]int, error) {
	var files []int
	sc := bufio.NewScanner(bytes.NewReader(slurmdG))
	for sc.Scan() {
		line := sc.Text()
		m := gresLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		var file, count []string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "File="); ok {
				file = append(file, v)
			}
			if v, ok := strings.CutPrefix(f, "Count="); ok {
				count = append(count, v)
			}
		}
		if len(count) > 1 || len(count) == 1 && count[0] != "1" {
			return nil, fmt.Errorf("%w: slurmd -G: %q: want one device file a record (Count=1)", ErrUnreadable, line)
		}
		if len(file) != 1 {
			return nil, fmt.Errorf("%w: slurmd -G: %q: want one File=", ErrUnreadable, line)
		}
		fm := cardFile.FindStringSubmatch(file[0])
		if fm == nil {
			return nil, fmt.Errorf("%w: slurmd -G: File=%s is not a /dev/tenstorrent/N card", ErrUnreadable, file[0])
		}
		n, _ := strconv.Atoi(fm[1])
		files = append(files, n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: slurmd -G: %v", ErrUnreadable, err)
	}
	out := make([]int, 0, len(idx))
	seen := map[int]bool{}
	for _, i := range idx {
		if i >= len(files) {
			return nil, fmt.Errorf("%w: GRES %s index %d, but slurmd -G lists %d %s device files", ErrUnreadable, name, i, len(files), name)
		}
		if seen[files[i]] {
			return nil, fmt.Errorf("%w: slurmd -G lists card %d twice", ErrUnreadable, files[i])
		}
		seen[files[i]] = true
		out = append(out, files[i])
	}
	return out, nil
}
