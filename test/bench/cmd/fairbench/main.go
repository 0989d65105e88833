// Command fairbench measures what a queue shared by several people costs
// queued when it is used hard, against the targets of the fair-share
// issue, on the real daemon (built from this module, or $QUEUED_BIN):
//
//   - its memory at rest (RssAnon and RssFile of /proc/<pid>/status,
//     apart and together) after 10,000 jobs with the largest records
//     allowed have finished, and again after a restart: at most 48 MiB;
//   - its memory with 1,000 such jobs queued: at most 64 MiB above its
//     memory idle;
//   - the growth of its peak memory while 8 clients list 1,000 of those
//     finished jobs at once (GET /jobs?limit=1000): at most 32 MiB;
//   - with one user holding 1,000 long-polls and 64 request bodies that
//     never finish on a system-mode queued's socket, the p99 of another
//     user's GET /status: at most 50 ms. This needs root (the flood
//     connects as another uid); without it, it is reported as skipped.
//
// A record of the largest size is api.MaxRecordBytes of command and
// environment together: a 64 KiB command and two variables of 96 KiB.
//
//	go run ./test/bench/cmd/fairbench            # the sizes
//	QUICK=1 go run ./test/bench/cmd/fairbench    # 500 finished, 200 queued, 2 s of flood (CI)
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

type config struct {
	finished, queued, listers, listLimit int
	flood                                time.Duration
	polls, slowBodies, statusSamples     int
	bin, work                            string
	failOnTarget                         bool
}

func main() {
	var c config
	quick := os.Getenv("QUICK") != ""
	short := flag.Bool("short", quick, "CI mode: 500 finished and 200 queued jobs, 2 s of flood (also QUICK=1).")
	flag.IntVar(&c.finished, "finished", 10000, "Finished jobs of the largest records for the memory at rest.")
	flag.IntVar(&c.queued, "queued", 1000, "Queued jobs of the largest records.")
	flag.IntVar(&c.listers, "listers", 8, "Concurrent GET /jobs?limit=1000.")
	flag.DurationVar(&c.flood, "flood", 10*time.Second, "How long one user floods the socket while another asks for status.")
	flag.IntVar(&c.polls, "polls", 1000, "Long-polls the flooding user holds.")
	flag.IntVar(&c.slowBodies, "slow-bodies", 64, "Request bodies the flooding user never finishes.")
	flag.BoolVar(&c.failOnTarget, "fail-on-target", false, "Exit 1 when a target is missed, not only on errors.")
	flag.Parse()
	c.listLimit = 1000
	if *short {
		c.finished, c.queued, c.flood = 500, 200, 2*time.Second
	}
	code, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fairbench:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(c config) (int, error) {
	work, err := os.MkdirTemp("", "fairbench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	// The flooding user must reach the socket below it.
	if err := os.Chmod(work, 0o755); err != nil {
		return 0, err
	}
	c.work = work
	fmt.Fprintf(os.Stderr, "building queued...\n")
	if c.bin, err = queuedproc.Build(work); err != nil {
		return 0, err
	}
	host, _ := os.Hostname()
	fmt.Printf("fairbench: %s, %s, %d CPUs, %s; records of %d KiB (command and environment)\n\n",
		time.Now().Format("2006-01-02"), host, runtime.NumCPU(), runtime.Version(), recordBytes>>10)
	rep := &report{}
	if err := memoryRound(c, rep); err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	if err := floodRound(c, rep); err != nil {
		return 0, fmt.Errorf("flood: %w", err)
	}
	fmt.Println()
	for _, t := range rep.targets {
		fmt.Println(t)
	}
	if rep.failed > 0 && c.failOnTarget {
		return 1, nil
	}
	return 0, nil
}

// report gathers the figures' targets, printed together at the end.
type report struct {
	targets []string
	failed  int
}

func (r *report) target(name string, ok bool, got string) {
	mark := "pass"
	if !ok {
		mark = "FAIL"
		r.failed++
	}
	r.targets = append(r.targets, fmt.Sprintf("target %-58s %-12s %s", name, got, mark))
}

func (r *report) skipped(name, why string) {
	r.targets = append(r.targets, fmt.Sprintf("target %-58s %-12s skipped: %s", name, "-", why))
}

// mib formats bytes in MiB.
func mib(n int64) string { return queuedproc.MiB(n) }

// usageText is a Usage's memory, whole and split.
func usageText(u queuedproc.Usage) string {
	return fmt.Sprintf("%s (anon %s, file %s)", mib(u.RSS), mib(u.RSSAnon), mib(u.RSSFile))
}
