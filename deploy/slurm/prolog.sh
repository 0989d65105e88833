#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=, with PrologFlags=Alloc): takes a hold
# in queued on the tt cards Slurm allocated to the job on this node, so
# queued starts nothing on them until the Epilog releases it. It does not
# wait for the hold to become active (a queued job may still be running on
# a card): the TaskProlog waits, per task, within a bound.
#
# Before the hold it gates the cards (tt-device-queue gate --wait): a card
# that is still unfit after TT_SLURM_FIT_WAIT (its recovery included), or
# dead, fails the Prolog, so Slurm drains the node and requeues the job on
# another: the one failure that is the node's. Otherwise it exits 0: a
# failing Prolog drains the node and requeues the job, which a busy queue,
# a stopped queued or a job's own text does not deserve. When it cannot
# take the hold it says why in the job's marker, and the TaskProlog fails
# the job with that message instead.
#
# slurmd runs it as root.
set -u
# Whatever goes wrong, even a bug that stops the script, it exits 0; only
# an unfit card sets tt_exit.
tt_exit=0
trap 'exit $tt_exit' EXIT
tt_script=prolog
# shellcheck source-path=SCRIPTDIR source=tt-slurm.sh
. "${BASH_SOURCE[0]%/*}/tt-slurm.sh" || exit 0

# record writes the job's marker atomically: KEY=VALUE lines.
record() {
	local tmp
	if [[ -L $TT_SLURM_STATE_DIR ]]; then
		tt_log "error: $TT_SLURM_STATE_DIR is a symbolic link; not writing there"
		return 1
	fi
	[[ -d $TT_SLURM_STATE_DIR ]] || mkdir -m 0755 "$TT_SLURM_STATE_DIR" || return 1
	tmp=$(mktemp "$TT_SLURM_STATE_DIR/.job-$SLURM_JOB_ID.XXXXXX") || return 1
	if ! { printf '%s\n' "$@" >"$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$(tt_marker)"; }; then
		rm -f "$tmp"
		return 1
	fi
}

# fail records why the job gets no hold; the TaskProlog shows it.
fail() {
	tt_log "error: $*"
	record "error=$*" || tt_log "error: cannot write $(tt_marker)"
	exit 0
}

# allocated_cards prints the card numbers (0,3) of the tt GRES Slurm
# allocated the job on this node, or fails saying why. Slurm 22.05 gives a
# Prolog no variable for a GRES other than gpu, and `scontrol show job -d`
# prints the job's name and comment as given, newlines and all, so a job
# named "x\n     Nodes=n1 ... GRES=tt:4(IDX:0-3)" would print a GRES line
# of its own. `tt-device-queue slurm cards` reads the allocation from
# squeue --json instead, where that text is a quoted string, and maps the
# GRES indexes to cards through slurmd -G, strictly: what it cannot read
# is an error and no card, so the job gets no hold (fails closed).
allocated_cards() {
	local rc=0
	tt_cli slurm cards --job "$SLURM_JOB_ID" --node "$SLURMD_NODENAME" || rc=$?
	if ((rc != 0)); then
		echo "${tt_err:-tt-device-queue slurm cards: exit $rc}" >&2
		return 1
	fi
	if [[ ! $tt_out =~ ^([0-9]+(,[0-9]+)*)?$ ]]; then
		echo "tt-device-queue slurm cards printed $tt_out, not a card list" >&2
		return 1
	fi
	printf '%s\n' "$tt_out"
}

# gate_cards gates the job's cards, waiting up to TT_SLURM_FIT_WAIT for an
# unfit or recovering one to pass. A card still unfit then, or dead (the
# gate's exit 3, and only that), fails the Prolog: the node is drained and
# the job requeued. A gate that could not be run (queued unreachable, no
# answer in time, an older queued) proves nothing about the cards: logged,
# and the hold is taken as before (holds pass queued's own gate anyway).
gate_cards() {
	local cards=$1 wait rc=0
	[[ $TT_SLURM_FIT_WAIT == off ]] && return 0
	wait=$(duration_seconds "$TT_SLURM_FIT_WAIT") || wait=600
	tt_timeout=$((wait + TT_SLURM_TIMEOUT))
	tt_cli gate --device "$cards" --wait "$wait" || rc=$?
	tt_timeout=
	((rc == 0)) && return 0
	if ((rc == 3)); then
		local why="tt card(s) $cards not fit for this job: ${tt_err:-exit 3}"
		tt_log "error: $why; failing the Prolog: Slurm drains the node and requeues the job"
		printf 'tt-device-queue (Prolog): %s\n' "$why" >&2
		record "error=$why" || true
		tt_exit=1
		exit 1
	fi
	tt_log "error: cannot gate card(s) $cards: ${tt_err:-exit $rc}; taking the hold all the same"
}

main() {
	local settings=ok
	tt_load || settings=bad
	tt_job || exit 0
	[[ $settings == ok ]] || fail "the settings in $tt_slurm_env are invalid (see $TT_SLURM_LOG)"
	[[ -n ${SLURMD_NODENAME:-} ]] || fail "SLURMD_NODENAME is not set: is this script slurmd's Prolog?"
	local cards errf args hold state
	errf=$(mktemp) || exit 0
	cards=$(allocated_cards 2>"$errf")
	local rc=$?
	local err
	err=$(tr '\n' ' ' <"$errf" | sed 's/[[:space:]]*$//')
	rm -f "$errf"
	((rc == 0)) || fail "cannot tell which tt cards Slurm gave this job on $SLURMD_NODENAME: $err"
	if [[ -z $cards ]]; then
		# Recorded, so the Epilog knows there is nothing to release.
		record "cards=" || true
		exit 0
	fi
	gate_cards "$cards"
	args=(hold --device "$cards" --slurm-job "$SLURM_JOB_ID" --json
		--reason "slurm job $SLURM_JOB_ID (${SLURM_JOB_USER:-uid ${SLURM_JOB_UID:-?}})")
	# The hold is the Slurm job's user's: under TT_DEVICE_ENFORCE=acl that
	# user alone may open the held cards for the job's life.
	[[ ${SLURM_JOB_UID:-} =~ ^[0-9]+$ ]] && args+=(--for-uid "$SLURM_JOB_UID")
	[[ -n $TT_SLURM_HOLD_EXPIRES ]] && args+=(--expires "$TT_SLURM_HOLD_EXPIRES")
	tt_cli "${args[@]}" ||
		fail "queued did not take a hold on card(s) $cards for this job: ${tt_err:-exit $?}"
	hold=$(tt_json hold_id "$tt_out")
	state=$(tt_json state "$tt_out")
	[[ $hold =~ ^[0-9a-f]{32}$ ]] || fail "queued's answer to the hold on card(s) $cards has no hold id: $tt_out"
	record "hold=$hold" "cards=$cards" || tt_log "error: cannot write $(tt_marker); the TaskProlog will not find hold $hold"
	tt_log "hold $hold on card(s) $cards: $state"
	exit 0
}

main "$@"
