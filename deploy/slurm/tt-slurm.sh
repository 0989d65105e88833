# shellcheck shell=bash
# tt-slurm.sh: what prolog.sh, taskprolog.sh and epilog.sh share. Sourced,
# never run. Slurm runs those scripts with almost no environment (no PATH,
# no HOME), so everything they need is set here from tt-slurm.env, the
# settings file that sits beside them (docs/slurm.md).

# The settings and their defaults. tt-slurm.env beside the scripts may set
# each; nothing else does (the TaskProlog runs with the job's environment,
# which must not steer it). The scripts that source this file use them.
# shellcheck disable=SC2034
TT_SLURM_CLI=/usr/local/bin/tt-device-queue
TT_SLURM_SOCKET=/run/tt-device-queue/queued.sock
TT_SLURM_STATE_DIR=/run/tt-device-queue-slurm
TT_SLURM_LOG=/var/log/tt-device-queue-slurm.log
TT_SLURM_RESET=never
TT_SLURM_HOLD_WAIT=10m
TT_SLURM_HOLD_EXPIRES=
TT_SLURM_FIT_WAIT=10m
TT_SLURM_TIMEOUT=10
TT_SLURM_SYSFS=/sys
TT_SLURM_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

tt_slurm_dir=${BASH_SOURCE[0]%/*}
[[ $tt_slurm_dir == "${BASH_SOURCE[0]}" ]] && tt_slurm_dir=.
tt_slurm_env=$tt_slurm_dir/tt-slurm.env

# tt_load reads tt-slurm.env: NAME=VALUE lines of the settings above,
# comments and blank lines. Anything else, or a bad value, is logged and
# makes it return 1, so a typo is never silently a default; the rest of
# the file applies all the same, and the environment the CLI needs is set
# either way. It never runs the file as shell code.
tt_load() {
	local line name value n=0 ok=0
	if [[ -r $tt_slurm_env ]]; then
		while IFS= read -r line || [[ -n $line ]]; do
			n=$((n + 1))
			line=${line#"${line%%[![:space:]]*}"}
			[[ -z $line || $line == \#* ]] && continue
			name=${line%%=*}
			value=${line#*=}
			if [[ $line != *=* || ! $name =~ ^TT_SLURM_[A-Z_]+$ ]] || ! declare -p "$name" >/dev/null 2>&1; then
				tt_log "error: $tt_slurm_env line $n is not a setting: $line"
				ok=1
				continue
			fi
			value=${value%"${value##*[![:space:]]}"}
			if [[ ${#value} -ge 2 && ($value == \"*\" || $value == \'*\') ]]; then
				value=${value:1:${#value}-2}
			fi
			printf -v "$name" '%s' "$value"
		done <"$tt_slurm_env"
	fi
	case $TT_SLURM_RESET in
	never | on-failure | always) ;;
	*)
		tt_log "error: TT_SLURM_RESET=$TT_SLURM_RESET in $tt_slurm_env: want never, on-failure or always"
		ok=1
		;;
	esac
	if ! duration_seconds "$TT_SLURM_HOLD_WAIT" >/dev/null; then
		tt_log "error: TT_SLURM_HOLD_WAIT=$TT_SLURM_HOLD_WAIT in $tt_slurm_env: want a duration such as 600, 10m or 1h30m"
		ok=1
	fi
	if [[ -n $TT_SLURM_HOLD_EXPIRES ]] && ! duration_seconds "$TT_SLURM_HOLD_EXPIRES" >/dev/null; then
		tt_log "error: TT_SLURM_HOLD_EXPIRES=$TT_SLURM_HOLD_EXPIRES in $tt_slurm_env: want empty (the job's end releases it) or a duration such as 7200, 2h or 1h30m"
		ok=1
	fi
	if [[ $TT_SLURM_FIT_WAIT != off ]] && ! duration_seconds "$TT_SLURM_FIT_WAIT" >/dev/null; then
		tt_log "error: TT_SLURM_FIT_WAIT=$TT_SLURM_FIT_WAIT in $tt_slurm_env: want off, or a duration such as 600, 10m or 1h30m"
		TT_SLURM_FIT_WAIT=10m
		ok=1
	fi
	if [[ ! $TT_SLURM_TIMEOUT =~ ^[1-9][0-9]*$ ]]; then
		tt_log "error: TT_SLURM_TIMEOUT=$TT_SLURM_TIMEOUT in $tt_slurm_env: want whole seconds, 1 or more"
		TT_SLURM_TIMEOUT=10
		ok=1
	fi
	export PATH=$TT_SLURM_PATH
	# No HOME is needed: given a socket, the CLI reads no state directory.
	export TT_DEVICE_URL=unix://$TT_SLURM_SOCKET
	unset TT_DEVICE_PORT
	return "$ok"
}

# duration_seconds turns a duration (600, 90s, 10m, 2h, 1h30m) into whole
# seconds (the TaskProlog's --wait and the bound on the CLI itself); it
# fails for anything else, so tt_load can refuse it.
duration_seconds() {
	local d=$1 total=0 n unit
	[[ $d =~ ^[0-9]+$ ]] && d=${d}s
	while [[ $d =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
		n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]}
		case $unit in
		h) total=$((total + n * 3600)) ;;
		m) total=$((total + n * 60)) ;;
		s) total=$((total + n)) ;;
		esac
	done
	[[ -z $d && $1 =~ [0-9] ]] || return 1
	printf '%s\n' "$total"
}

# tt_log appends one line to TT_SLURM_LOG (root's scripts) or writes it to
# stderr when the log cannot be written (the TaskProlog, as the job's user).
tt_log() {
	local line
	line="$(date '+%Y-%m-%dT%H:%M:%S%z') ${tt_script:-tt-slurm}[$$] job ${SLURM_JOB_ID:-?}: $*"
	if [[ ${EUID} -eq 0 && -n ${TT_SLURM_LOG} ]] && { printf '%s\n' "$line" >>"$TT_SLURM_LOG"; } 2>/dev/null; then
		return 0
	fi
	printf '%s\n' "$line" >&2
}

# tt_job checks SLURM_JOB_ID, which names files here: digits only.
tt_job() {
	if [[ ! ${SLURM_JOB_ID:-} =~ ^[0-9]+$ ]]; then
		tt_log "error: SLURM_JOB_ID=${SLURM_JOB_ID:-} is not a job id (is this script run by Slurm?)"
		return 1
	fi
}

# tt_cli runs tt-device-queue within TT_SLURM_TIMEOUT seconds (tt_timeout
# when set), SIGKILL two seconds later. It leaves the command's stdout in
# tt_out and its stderr, on one line, in tt_err (call it directly, not in
# $(...), or they are lost with the subshell), and returns its status.
tt_out=
tt_err=
tt_timeout=
tt_cli() {
	local errf rc
	errf=$(mktemp) || return 1
	tt_out=$(timeout -k 2 "${tt_timeout:-$TT_SLURM_TIMEOUT}" "$TT_SLURM_CLI" "$@" 2>"$errf")
	rc=$?
	tt_err=$(tr '\n' ' ' <"$errf" | sed 's/[[:space:]]*$//')
	rm -f "$errf"
	if ((rc == 124 || rc == 137)) && [[ -z $tt_err ]]; then
		tt_err="no answer within ${tt_timeout:-$TT_SLURM_TIMEOUT}s"
	fi
	return "$rc"
}

# tt_json KEY JSON prints the string value of "KEY" in a flat JSON object
# such as the CLI's --json answers ({"hold_id":"...","state":"active"}).
# Only for values without quotes or backslashes: ids, card lists, states.
tt_json() {
	printf '%s\n' "$2" | sed -n 's/.*"'"$1"'"[[:space:]]*:[[:space:]]*"\([^"\\]*\)".*/\1/p' | head -n 1
}

# tt_marker is the file in which the Prolog leaves, for the TaskProlog and
# the Epilog of the same job, the hold it took (or why it took none).
tt_marker() { printf '%s/job-%s\n' "$TT_SLURM_STATE_DIR" "$SLURM_JOB_ID"; }

# tt_marker_get KEY prints KEY's value from the job's marker (KEY=VALUE
# lines); nothing when there is no marker or no such key.
tt_marker_get() {
	local m
	m=$(tt_marker)
	[[ -f $m ]] || return 0
	sed -n "s/^$1=//p" "$m" | head -n 1
}

# tt_expand_list turns a Slurm index list (0-1,3) into one number a line.
tt_expand_list() {
	local part lo hi
	local IFS=,
	for part in $1; do
		if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
			lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[2]}
			while ((lo <= hi)); do
				printf '%s\n' "$lo"
				lo=$((lo + 1))
			done
		elif [[ $part =~ ^[0-9]+$ ]]; then
			printf '%s\n' "$part"
		else
			return 1
		fi
	done
}
