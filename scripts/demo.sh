#!/usr/bin/env bash
# make demo: the whole of ttkit on a machine without Tenstorrent hardware.
#
# Builds queued, tt-device-queue and otelcol-tt; starts queued with two
# simulated cards (TT_DEVICE_IDS=0,1) and harmless reset and health
# commands in a temporary state directory on a free loopback port; submits
# jobs to both cards; runs jobs from a shell with a venv active (they use
# the venv's python3, as submitted); resets one; shows status; then lists
# the running jobs in a simulated driver tree (like /proc/driver/tenstorrent/<n>/pids), starts
# otelcol-tt on it and prints the tt_process series from its Prometheus
# endpoint. Everything it starts is stopped on exit, and every wait is
# bounded. Run from the repository root: bash scripts/demo.sh
#
#   DEMO_SKIP_BUILD=1   use the binaries already in bin/
#   DEMO_HOLD=SECONDS   keep everything running that long at the end, to
#                       look at the live status page whose URL it prints
set -euo pipefail

[[ -f go.mod && -d queued ]] || { echo "demo: run me from the repository root (make demo does)" >&2; exit 2; }
ROOT=$PWD
BIN=$ROOT/bin
GO=${GO:-go}

if [[ -t 1 ]]; then B=$'\e[1m' N=$'\e[0m'; else B= N=; fi
section() { printf '\n%s== %s ==%s\n' "$B" "$*" "$N"; }
# cmdline prints a command as a user would type it; show also runs it.
cmdline() {
	local out= a
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
	done
	printf '%s$%s%s\n' "$B" "$out" "$N"
}
show() { cmdline "$@"; "$@"; }
die() { echo "demo: $*" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ttkit-demo.XXXXXX")
QUEUED_PID= OTELCOL_PID= ROGUE_PID=
cleanup() {
	local rc=$?
	set +e
	# queued ends its running jobs as interrupted when it gets SIGTERM.
	for pid in $OTELCOL_PID $ROGUE_PID $QUEUED_PID; do kill -TERM "$pid" 2>/dev/null; done
	for pid in $OTELCOL_PID $ROGUE_PID $QUEUED_PID; do
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
	done
	wait 2>/dev/null
	if [[ $rc != 0 ]]; then
		echo "demo: failed (exit $rc); the daemons' logs follow" >&2
		tail -n 30 "$WORK"/*.log >&2 2>/dev/null
	fi
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# until CMD... retries CMD for at most 30 s.
until_ok() {
	for _ in $(seq 150); do "$@" && return 0; sleep 0.2; done
	return 1
}

# free_port prints a loopback port nothing listens on (and not yet taken
# by this script), below the kernel's ephemeral range (32768 and up by
# default), where an outgoing connection of another program could hold it
# between this check and the bind.
TAKEN=" "
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 12000))
		[[ $TAKEN == *" $p "* ]] && continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			TAKEN+="$p "
			echo "$p"
			return 0
		fi
	done
	die "found no free loopback port"
}

# http_get HOST:PORT PATH prints the body of an HTTP GET, with bash alone;
# HTTP_GOT is what came back when it was not a 200: the status line and
# the start of the body, so a failure can name its cause.
HTTP_GOT=
http_get() {
	local host=${1%:*} port=${1##*:}
	HTTP_GOT="no connection"
	{ exec 3<>"/dev/tcp/$host/$port"; } 2>/dev/null || return 1
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
	local resp
	resp=$(cat <&3)
	exec 3<&-
	local body=${resp#*$'\r\n\r\n'}
	HTTP_GOT="${resp%%$'\r'*} ${body:0:300}"
	[[ -n $resp ]] || HTTP_GOT="no answer"
	[[ $resp == "HTTP/1."[01]" 200"* ]] || return 1
	printf '%s\n' "$body"
}

section "Building queued, tt-device-queue and otelcol-tt"
if [[ ${DEMO_SKIP_BUILD:-0} != 1 ]]; then
	show scripts/build-queued.sh bin "$GO"
	show make --no-print-directory otelcol-tt
fi
for b in queued tt-device-queue otelcol-tt; do [[ -x $BIN/$b ]] || die "bin/$b is missing"; done
export PATH=$BIN:$PATH

section "Starting queued: two simulated cards, harmless reset and health commands"
mkdir -p "$WORK/state" "$WORK/controls" "$WORK/driver/0" "$WORK/driver/1" "$WORK/progs"
cat >"$WORK/controls/reset" <<'EOF'
#!/bin/sh
echo "simulated reset of card $1 (the real one runs tt-smi -r /dev/tenstorrent/$1 --no_reinit)"
EOF
cat >"$WORK/controls/health" <<'EOF'
#!/bin/sh
echo "card $1: simulated health check passed (the real one reads its clock telemetry through tt_umd)"
EOF
chmod +x "$WORK/controls/reset" "$WORK/controls/health"
# The long-running "workloads" are sleep under telling names, so the
# collector has something to name; queued's jobs find them on its PATH.
for name in train_model eval_model stuck_kernel rogue_benchmark; do ln -s "$(command -v sleep)" "$WORK/progs/$name"; done
export PATH=$WORK/progs:$PATH
: >"$WORK/driver/0/pids"
: >"$WORK/driver/1/pids"

export TT_DEVICE_LOG_DIR=$WORK/state
unset TT_DEVICE_URL TT_DEVICE_PORT TT_QUEUE_CLIENT_ID
PORT=$(free_port)
printf '%s$ TT_DEVICE_IDS=0,1 TT_DEVICE_RESET_CMD=... TT_DEVICE_HEALTH_CHECK_CMD=... queued --listen 127.0.0.1:%s &%s\n' "$B" "$PORT" "$N"
TT_DEVICE_IDS=0,1 \
	TT_DEVICE_RESET_CMD="$WORK/controls/reset {device}" \
	TT_DEVICE_HEALTH_CHECK_CMD="$WORK/controls/health {device}" \
	TT_DEVICE_DRIVER_PATH=$WORK/driver \
	TT_DEVICE_KILL_GRACE=2 TT_DEVICE_TERM_GRACE=2 \
	queued --listen "127.0.0.1:$PORT" >"$WORK/queued.log" 2>&1 &
QUEUED_PID=$!
until_ok tt-device-queue status >/dev/null 2>&1 || die "queued did not start"
echo "queued is listening on 127.0.0.1:$PORT, state in $WORK/state"

cd "$WORK"

section "run: the output streams as the job produces it; run exits with the job's status"
show tt-device-queue run --device 0 -- 'for i in 1 2 3; do echo "step $i on card $TT_QUEUE_DEVICE"; sleep 0.3; done'

section "queue returns the job id at once; result waits, prints the output and exits with the status"
cmdline tt-device-queue --client-id demo queue --device 1 --env ANSWER=42 -- 'echo computing; sleep 1; echo "the answer is $ANSWER"'
ID=$(tt-device-queue --client-id demo queue --device 1 --env ANSWER=42 -- 'echo computing; sleep 1; echo "the answer is $ANSWER"')
echo "$ID"
show tt-device-queue job "${ID:0:8}"
show tt-device-queue result "${ID:0:8}"

section "A job that fails: its exit status is tt-device-queue's"
rc=0
show tt-device-queue run --device 1 -- 'echo "loading weights"; echo "error: no such file: weights.bin" >&2; exit 3' || rc=$?
echo "(tt-device-queue exited $rc)"
[[ $rc == 3 ]] || die "want exit 3, got $rc"

section "A job runs as in the submitter's shell: its virtual environment, and modules beside the script"
PY=$(command -v python3) || die "python3 is needed for the venv part of the demo"
PY=$("$PY" -c 'import sys; print(sys.executable)')
"$PY" -m venv --without-pip "$WORK/venv" || die "python3 -m venv failed"
mkdir -p "$WORK/project"
printf 'VALUE = "helper.py, beside the script"\n' >"$WORK/project/helper.py"
printf 'import sys, helper\nprint("python:", sys.prefix)\nprint("imported:", helper.VALUE)\n' >"$WORK/project/train.py"
cmdline source "$WORK/venv/bin/activate"
cmdline cd "$WORK/project"
(
	# shellcheck disable=SC1091
	source "$WORK/venv/bin/activate"
	cd "$WORK/project"
	show tt-device-queue run -- 'python3 -c "import sys; print(sys.prefix)"'
	show tt-device-queue queue-python --wait train.py
	ID=$(tt-device-queue queue -- true 2>/dev/null)
	tt-device-queue result "$ID" >/dev/null 2>&1
	cmdline tt-device-queue job "${ID:0:8}"
	tt-device-queue job "${ID:0:8}" | grep -E '^(cmd|shell env)'
) 2>&1 | tee "$WORK/venv.out" || die "the venv jobs failed"
out=$(<"$WORK/venv.out")
[[ $(grep -c "^python: $WORK/venv\$\|^$WORK/venv\$" <<<"$out") == 2 ]] || die "the jobs did not run the submitter's venv"
grep -q "VIRTUAL_ENV=$WORK/venv" <<<"$out" || die "job does not show VIRTUAL_ENV from the shell"

section "A reset holds its card's queue and interrupts the card's running job; card 0 is untouched"
cmdline tt-device-queue queue --device 1 -- 'exec stuck_kernel 600'
STUCK=$(tt-device-queue queue --device 1 -- 'exec stuck_kernel 600')
until_ok sh -c "tt-device-queue --json job $STUCK | grep -q '\"state\":\"running\"'" || die "the stuck job did not start"
cmdline tt-device-queue reset --device 1
out=$(tt-device-queue reset --device 1 2>&1)
echo "$out"
RESET=$(grep -o 'reset [0-9a-f]\{32\}' <<<"$out" | cut -d' ' -f2)
[[ -n $RESET ]] || die "no reset job id in: $out"
show tt-device-queue result --wait-timeout 30 "$RESET"
rc=0
show tt-device-queue result --wait-timeout 30 "$STUCK" || rc=$?
echo "(the interrupted job's status: $rc)"

section "Jobs on both cards, one waiting, and a process that bypassed the queue"
cmdline tt-device-queue queue --device 0 -- 'exec train_model 600'
TRAIN=$(tt-device-queue queue --device 0 -- 'exec train_model 600')
cmdline tt-device-queue queue --device 1 -- 'exec eval_model 600'
EVAL=$(tt-device-queue queue --device 1 -- 'exec eval_model 600')
show tt-device-queue queue --device 0 -- 'echo next in line'
echo "(and a program started by hand, bypassing the queue, that opens card 0)"
printf '%s$ rogue_benchmark 600 &%s\n' "$B" "$N"
rogue_benchmark 600 &
ROGUE_PID=$!
job_pid() { tt-device-queue --json job "$1" | grep -o '"pid":[0-9]*' | cut -d: -f2; }
until_ok test -n "$(job_pid "$TRAIN")" || die "the training job did not start"
until_ok test -n "$(job_pid "$EVAL")" || die "the evaluation job did not start"
# What the KMD would list: every process with a card open, per card.
printf '%s\n' "$(job_pid "$TRAIN")" "$ROGUE_PID" >"$WORK/driver/0/pids"
printf '%s\n' "$(job_pid "$EVAL")" >"$WORK/driver/1/pids"
echo "simulated driver tree $WORK/driver:"
for n in 0 1; do echo "  $n/pids: $(paste -sd' ' "$WORK/driver/$n/pids")"; done
until_ok sh -c "tt-device-queue --json status | grep -q '\"foreign\":\[{\"pid\":$ROGUE_PID'" || true
show tt-device-queue status

section "The live status page: every card, its job with live output, the queue, holders outside the queue"
show tt-device-queue web
PAGE=$(tt-device-queue web)
[[ $PAGE == http://127.0.0.1:$PORT/#token=* ]] || die "web printed no page URL: $PAGE"
http_get "127.0.0.1:$PORT" / >"$WORK/page.html" || die "queued does not serve the page: GET / answered $HTTP_GOT"
grep -q '<script src="/app.js"' "$WORK/page.html" || die "queued's page does not load app.js: $(head -c 300 "$WORK/page.html")"
echo "(open it in a browser while the demo runs: DEMO_HOLD=300 make demo keeps it running; the token is after #)"

section "otelcol-tt: who holds each card, as Prometheus sees it"
METRICS=127.0.0.1:$(free_port)
HEALTH=127.0.0.1:$(free_port)
printf '%s$ OTELCOL_TT_DRIVER_PATH=%s OTELCOL_TT_PROMETHEUS_ENDPOINT=%s ... otelcol-tt --config=deploy/otelcol-tt/config.yaml --set=receivers::ttprocess::collection_interval=1s &%s\n' \
	"$B" "$WORK/driver" "$METRICS" "$N"
OTELCOL_TT_DRIVER_PATH=$WORK/driver \
	OTELCOL_TT_PROMETHEUS_ENDPOINT=$METRICS \
	OTELCOL_TT_HEALTH_ENDPOINT=$HEALTH \
	OTELCOL_TT_OTLP_GRPC_ENDPOINT=127.0.0.1:$(free_port) \
	OTELCOL_TT_OTLP_HTTP_ENDPOINT=127.0.0.1:$(free_port) \
	OTELCOL_TT_TELEMETRY_PORT=$(free_port) \
	otelcol-tt --config="$ROOT/deploy/otelcol-tt/config.yaml" \
	--set=receivers::ttprocess::collection_interval=1s \
	--set=receivers::ttprocess::initial_delay=0s >"$WORK/otelcol-tt.log" 2>&1 &
OTELCOL_PID=$!
until_ok http_get "$HEALTH" / >/dev/null || die "otelcol-tt did not become healthy"
has_series() { [[ $(http_get "$METRICS" /metrics | grep -c '^tt_process{') -ge 3 ]]; }
until_ok has_series || die "otelcol-tt did not report the three holders"
printf '%s$ curl -s http://%s/metrics | grep ^tt_process%s\n' "$B" "$METRICS" "$N"
http_get "$METRICS" /metrics | grep '^tt_process'

if [[ ${DEMO_HOLD:-0} =~ ^[0-9]+$ && ${DEMO_HOLD:-0} -gt 0 ]]; then
	section "Holding for $DEMO_HOLD s (Ctrl-C ends it): the status page is at"
	echo "$PAGE"
	sleep "$DEMO_HOLD"
fi

section "Done"
echo "Stopping otelcol-tt and queued (which ends the running jobs as interrupted) and removing $WORK."
