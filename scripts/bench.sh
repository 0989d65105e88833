#!/usr/bin/env bash
# make bench: every Go benchmark, the ratios to their floors measured in the
# same run, then queuebench (queued's drain against tsp, nq and a floor,
# submission and dispatch latency, CPU and memory), then fairbench
# (queued's memory with the largest records queued, finished and listed,
# and another user's status while one user floods a shared socket).
#
#   QUICK=1   CI mode: shorter benchmark time, queuebench -short and
#             fairbench -short
#
# Run from the repository root: bash scripts/bench.sh
set -euo pipefail

[[ -f go.mod ]] || { echo "bench: run me from the repository root (make bench does)" >&2; exit 2; }
GO=${GO:-go}
benchtime=1s
short=()
if [[ -n ${QUICK:-} ]]; then
	benchtime=200ms
	short=(-short)
fi

out=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$out" "$tmp"' EXIT

# Jobs start through queued-exec's C build, as the daemon's do: the
# runner's benchmarks are given it (QUEUED_TEST_EXEC_HELPER), and the
# scheduler's test binary is built beside it, where it looks for its
# helper. Without it both fall back to the test binary itself as the Go
# helper, a path the daemon takes only where queued-exec is missing.
CGO_ENABLED=1 "$GO" build -o "$tmp/queued-exec" ./queued/cmd/queued-exec
"$GO" test -c -o "$tmp/scheduler.test" ./queued/scheduler
echo "jobs start through $tmp/queued-exec (the C build)"

# BenchmarkDrain900 runs a whole 900-job drain per iteration: once is enough.
QUEUED_TEST_EXEC_HELPER="$tmp/queued-exec" "$GO" test -run '^$' -bench . -benchmem -benchtime "$benchtime" \
	./internal/... ./receiver/... ./queued/runner/... ./queued/store/... ./queued/api/... | tee "$out"
(cd queued/scheduler && "$tmp/scheduler.test" -test.run '^$' -test.bench '^BenchmarkDrain900$' -test.benchtime 1x) | tee -a "$out"
(cd queued/scheduler && "$tmp/scheduler.test" -test.run '^$' -test.bench '^Benchmark[^D]' -test.benchmem -test.benchtime "$benchtime") | tee -a "$out"

# ratio NAME FLOOR TARGET prints NAME's ns/op over FLOOR's, both from this run.
ratio() {
	awk -v a="$1" -v b="$2" -v target="$3" '
		function nsop(line,   i, f) { n = split(line, f, /[ \t]+/); for (i = 2; i < n; i++) if (f[i+1] == "ns/op") return f[i]; return 0 }
		$1 ~ "^Benchmark" a "(-[0-9]+)?$" { x = nsop($0) }
		$1 ~ "^Benchmark" b "(-[0-9]+)?$" { y = nsop($0) }
		END {
			if (x == 0 || y == 0) { printf "  %-36s missing from this run\n", a; exit }
			r = x / y
			printf "  %-36s %10.0f ns/op = %.2fx %s (target <= %sx) %s\n", a, x, r, b, target, (r <= target ? "pass" : "MISS")
		}' "$out"
}

# scaling NAME SMALL LARGE prints NAME/LARGE's ns/op over NAME/SMALL's next
# to the linear ratio LARGE/SMALL and the quadratic one; within twice the
# linear ratio passes.
scaling() {
	awk -v a="$1/$3" -v b="$1/$2" -v lin="$(($3 / $2))" '
		function nsop(line,   i, f) { n = split(line, f, /[ \t]+/); for (i = 2; i < n; i++) if (f[i+1] == "ns/op") return f[i]; return 0 }
		$1 ~ "^Benchmark" a "(-[0-9]+)?$" { x = nsop($0) }
		$1 ~ "^Benchmark" b "(-[0-9]+)?$" { y = nsop($0) }
		END {
			if (x == 0 || y == 0) { printf "  %-36s missing from this run\n", a; exit }
			r = x / y
			printf "  %-36s %10.0f ns/op = %.2fx %s (linear %dx, quadratic %dx; target <= %dx) %s\n", a, x, r, b, lin, lin * lin, 2 * lin, (r <= 2 * lin ? "pass" : "MISS")
		}' "$out"
}

echo
echo "== Ratios to floors, measured in this run =="
ratio ScanSteadyState Floor 3
ratio Scrape ScrapeFloor 3
ratio Run SpawnFloor 1.3

echo
echo "== Scaling with holders, measured in this run =="
scaling ScrapeHolders 1000 8000

# under NAME TARGET_NS prints NAME's ns/op against an absolute target.
under() {
	awk -v a="$1" -v target="$2" '
		function nsop(line,   i, f) { n = split(line, f, /[ \t]+/); for (i = 2; i < n; i++) if (f[i+1] == "ns/op") return f[i]; return 0 }
		$1 ~ "^Benchmark" a "(-[0-9]+)?$" { x = nsop($0) }
		END {
			if (x == 0) { printf "  %-36s missing from this run\n", a; exit }
			printf "  %-36s %10.0f ns/op (target <= %d ns) %s\n", a, x, target, (x <= target ? "pass" : "MISS")
		}' "$out"
}

# extra NAME BASE prints how much more NAME costs than BASE, both from this run.
extra() {
	awk -v a="$1" -v b="$2" '
		function nsop(line,   i, f) { n = split(line, f, /[ \t]+/); for (i = 2; i < n; i++) if (f[i+1] == "ns/op") return f[i]; return 0 }
		$1 ~ "^Benchmark" a "(-[0-9]+)?$" { x = nsop($0) }
		$1 ~ "^Benchmark" b "(-[0-9]+)?$" { y = nsop($0) }
		END {
			if (x == 0 || y == 0) { printf "  %-36s missing from this run\n", a; exit }
			printf "  %-36s %10.0f ns/op = %s + %.0f ns\n", a, x, b, x - y
		}' "$out"
}

echo
echo "== Card health and attribution, measured in this run =="
under CardScrape 1000000
under Read32 1000000
extra NewHolder/attributed NewHolder/identity

echo
echo "== queuebench: queued against tsp, nq and a floor =="
"$GO" run ./test/bench/cmd/queuebench "${short[@]}"

echo
echo "== fairbench: memory with the largest records, and a shared socket under a flood =="
"$GO" run ./test/bench/cmd/fairbench "${short[@]}"
