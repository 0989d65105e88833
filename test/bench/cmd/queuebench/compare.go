package main

// A/B mode (-against): on a machine whose speed drifts by more than a
// change moves it, two builds measured one after the other can differ by
// the drift alone. This mode runs the drain and the dispatch of two
// builds in turn, run after run, swapping which goes first, and reports
// each run's pair and the median of the paired ratios: drift common to
// both halves of a pair cancels out of its ratio.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// buildAgainst returns the queued binary of against: a path to a queued
// (its queued-exec beside it), or else a git revision of this module,
// checked out in a worktree under dir and built there.
func buildAgainst(dir, against string) (string, error) {
	if fi, err := os.Stat(against); err == nil && !fi.IsDir() {
		bin, err := filepath.Abs(against)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(bin), "queued-exec")); err != nil {
			return "", fmt.Errorf("-against %s: no queued-exec beside it (build both: go build -o DIR/ ./queued/cmd/queued ./queued/cmd/queued-exec): %w", against, err)
		}
		return bin, nil
	}
	root, err := queuedproc.ModuleRoot()
	if err != nil {
		return "", err
	}
	tree := filepath.Join(dir, "against-src")
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", tree, against).CombinedOutput(); err != nil {
		return "", fmt.Errorf("-against %q is neither a queued binary nor a revision git can check out: %w\n%s", against, err, out)
	}
	defer exec.Command("git", "-C", root, "worktree", "remove", "--force", tree).Run()
	return queuedproc.BuildFrom(tree, filepath.Join(dir, "against"))
}

// pairRun is one run of the A/B mode: each build's drain and dispatch.
type pairRun struct {
	a, b         drainResult
	dispA, dispB dispatchResult
	floor        time.Duration // the same jobs spawned from Go, before the pair
	aFirst       bool
}

// compare runs c.runs pairs of drains and dispatch samples, this build
// (c.bin) against other, and prints them.
func compare(c config, other, label string) error {
	var runs []pairRun
	builds := [2]string{c.bin, other}
	for i := range c.runs {
		p := pairRun{aFirst: i%2 == 0}
		fmt.Fprintf(os.Stderr, "run %d/%d: floor\n", i+1, c.runs)
		floor, err := floorDrain(c)
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		p.floor = floor
		order := []int{0, 1}
		if !p.aFirst {
			order = []int{1, 0}
		}
		for _, k := range order {
			cc := c
			cc.bin = builds[k]
			fmt.Fprintf(os.Stderr, "run %d/%d: %s\n", i+1, c.runs, [2]string{"this build", label}[k])
			d, err := ourDrain(cc, 2*i+k)
			if err != nil {
				return fmt.Errorf("drain of %s: %w", builds[k], err)
			}
			disp, err := ourDispatch(cc, "queued-dispatch-"+strconv.Itoa(2*i+k))
			if err != nil {
				return fmt.Errorf("dispatch of %s: %w", builds[k], err)
			}
			if k == 0 {
				p.a, p.dispA = d, disp
			} else {
				p.b, p.dispB = d, disp
			}
		}
		runs = append(runs, p)
	}
	printComparison(c, label, runs)
	return nil
}

// printComparison prints each pair and the medians of the paired ratios
// (this build over the other: under 1 is faster).
func printComparison(c config, label string, runs []pairRun) {
	fmt.Printf("A/B: this build (A) against %s (B), %d jobs a drain, %d pairs, the first of each pair alternating\n\n", label, c.jobs, len(runs))
	fmt.Printf("%-4s %-6s %14s %14s %16s %16s %14s %14s\n", "run", "first", "A per job", "B per job", "A CPU a job", "B CPU a job", "A dispatch", "B dispatch")
	var job, cpu, disp, p99, floorA, floorB, spawnA, spawnB []float64
	for i, r := range runs {
		first := "B"
		if r.aFirst {
			first = "A"
		}
		fmt.Printf("%-4d %-6s %14s %14s %16s %16s %14s %14s\n", i+1, first,
			ms(perJob(r.a.drain, c.jobs)), ms(perJob(r.b.drain, c.jobs)),
			ms(perJob(r.a.cpu-r.a.storm.cpu, c.jobs)), ms(perJob(r.b.cpu-r.b.storm.cpu, c.jobs)),
			ms(r.dispA.median), ms(r.dispB.median))
		job = append(job, ratio(r.a.drain, r.b.drain))
		cpu = append(cpu, ratio(r.a.cpu-r.a.storm.cpu, r.b.cpu-r.b.storm.cpu))
		disp = append(disp, ratio(r.dispA.median, r.dispB.median))
		p99 = append(p99, ratio(r.a.storm.p99, r.b.storm.p99))
		floorA, floorB = append(floorA, ratio(r.a.drain, r.floor)), append(floorB, ratio(r.b.drain, r.floor))
		spawnA, spawnB = append(spawnA, ratio(r.dispA.median, r.dispA.floor)), append(spawnB, ratio(r.dispB.median, r.dispB.floor))
	}
	fmt.Println()
	for _, f := range []struct {
		name string
		rs   []float64
	}{{"drain", job}, {"queued's CPU in the drain", cpu}, {"dispatch on an idle card", disp}, {"submit p99", p99}} {
		med, lo, hi := spread(f.rs)
		fmt.Printf("A / B %-26s %.3f (pairs %.3f to %.3f)\n", f.name, med, lo, hi)
	}
	fmt.Println("\nA ratio under 1 means this build is faster. A change is in the noise while its pairs' range spans 1.")
	fmt.Println()
	for _, f := range []struct {
		name string
		a, b []float64
	}{{"drain over the floor", floorA, floorB}, {"dispatch over Go's spawn", spawnA, spawnB}} {
		ma, la, ha := spread(f.a)
		mb, lb, hb := spread(f.b)
		fmt.Printf("%-26s A %.2fx (%.2f to %.2f), B %.2fx (%.2f to %.2f)\n", f.name, ma, la, ha, mb, lb, hb)
	}
}

func perJob(d time.Duration, jobs int) time.Duration { return d / time.Duration(jobs) }

// spread is the median, lowest and highest of rs (not empty).
func spread(rs []float64) (med, lo, hi float64) {
	s := append([]float64(nil), rs...)
	sort.Float64s(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}
