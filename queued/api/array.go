package api

import (
	"fmt"
	"strconv"
	"strings"
)

// The variables queued sets in each element of an array (QueueRequest.
// Array): its index, and the array's id, which wait, kill, result, list
// and logs take to mean every element.
const (
	ArrayIndexEnvVar = "TT_QUEUE_ARRAY_INDEX"
	ArrayIDEnvVar    = "TT_QUEUE_ARRAY_ID"
)

// MaxArray bounds the elements of one array: each is a queued job, and
// the daemon's bound on queued jobs (TT_DEVICE_MAX_QUEUED_JOBS) still
// holds, all of the array or none of it.
const MaxArray = 1000

// MaxArrayIndex bounds an array index, so a typo such as 0-70000 is a
// clear error rather than a long walk.
const MaxArrayIndex = 1 << 20

// ParseArray reads an array's indices as Slurm's --array writes them:
// "0-7", "1,3,5", "0-15:4" (every fourth), or a list of these, ascending
// and each once. Slurm's "%K" (at most K running at once) is refused: every
// element runs on the same card(s), whose FIFO queue runs them one at a
// time already, so it could change nothing (docs/jobs.md, "Arrays").
func ParseArray(spec string) ([]int, error) {
	text := strings.TrimSpace(spec)
	if i := strings.IndexByte(text, '%'); i >= 0 {
		return nil, fmt.Errorf("array %q: %s cannot change anything: every element runs on the --device card(s), whose queue runs them one at a time already", spec, text[i:])
	}
	if text == "" {
		return nil, fmt.Errorf("array %q: empty; want a range such as 0-7", spec)
	}
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(text, ",") {
		lo, hi, step, err := arrayPart(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", spec, err)
		}
		for i := lo; i <= hi; i += step {
			if seen[i] {
				return nil, fmt.Errorf("array %q: index %d is given twice", spec, i)
			}
			if len(out) == MaxArray {
				return nil, fmt.Errorf("array %q: more than %d elements", spec, MaxArray)
			}
			seen[i] = true
			out = append(out, i)
		}
	}
	return out, nil
}

// arrayPart reads one part of an array: N, A-B or A-B:S.
func arrayPart(part string) (lo, hi, step int, err error) {
	step = 1
	if r, s, ok := strings.Cut(part, ":"); ok {
		part = r
		if step, err = arrayNumber(s); err != nil || step < 1 {
			return 0, 0, 0, fmt.Errorf("step %q: want a whole number, 1 or more", s)
		}
	}
	a, b, isRange := strings.Cut(part, "-")
	if lo, err = arrayNumber(a); err != nil {
		return 0, 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = arrayNumber(b); err != nil {
			return 0, 0, 0, err
		}
	}
	if hi < lo {
		return 0, 0, 0, fmt.Errorf("range %q runs backwards", part)
	}
	return lo, hi, step, nil
}

// arrayNumber reads one index.
func arrayNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q is not an index (a whole number, 0 or more)", s)
	}
	if n > MaxArrayIndex {
		return 0, fmt.Errorf("index %d is above %d", n, MaxArrayIndex)
	}
	return n, nil
}
