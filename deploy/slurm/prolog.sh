#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=, with PrologFlags=Alloc): takes a hold
# in queued on the tt cards Slurm allocated to the job on this node, so
# queued starts nothing on them until the Epilog releases it. It does not
# wait for the hold to become active (a queued job may still be running on
# a card): the TaskProlog waits, per task, within a bound.
#
# slurmd runs it as root. It always exits 0: a failing Prolog drains the
# node and requeues the job, which a busy queue or a stopped queued does
# not deserve. When it cannot take the hold it says why in the job's
# marker, and the TaskProlog fails the job with that message instead.
set -u
# Whatever goes wrong, even a bug that stops the script, it exits 0.
trap 'exit 0' EXIT
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

# allocated_cards prints the card numbers (0,3) of the tt GRES the job has
# on this node. Slurm 22.05 gives a Prolog no variable for a GRES other
# than gpu, so they come from `scontrol show job -d` (a line per node
# group: "Nodes=n[1-2] CPU_IDs=0-3 Mem=0 GRES=tt:p150a:2(IDX:0-1)"). IDX
# counts the node's tt GRES in the order slurmd lists them, which
# `slurmd -G` prints with each one's device file, /dev/tenstorrent/N.
allocated_cards() {
	local detail line nodes gres list idx files i card out=()
	detail=$(timeout -k 2 "$TT_SLURM_TIMEOUT" scontrol show job -d "$SLURM_JOB_ID" 2>&1) ||
		{ echo "scontrol show job -d $SLURM_JOB_ID failed: $detail" >&2; return 1; }
	idx=()
	while IFS= read -r line; do
		[[ $line =~ [[:space:]]Nodes=([^[:space:]]+)[[:space:]].*GRES=([^[:space:]]*) ]] || continue
		nodes=${BASH_REMATCH[1]} gres=${BASH_REMATCH[2]}
		scontrol show hostnames "$nodes" 2>/dev/null | grep -qxF -- "$SLURMD_NODENAME" || continue
		while read -r i; do
			[[ -n $i ]] || continue
			list=$(tt_expand_list "$i") || { echo "cannot read the GRES index list $i in $gres" >&2; return 1; }
			mapfile -t -O "${#idx[@]}" idx <<<"$list"
		done < <(grep -oE '(^|[,=])tt(:[^,:()]+)?(:[0-9]+)?\(IDX:[0-9,-]+\)' <<<"$gres" | sed -E 's/.*\(IDX:([0-9,-]+)\)/\1/')
	done <<<"$detail"
	((${#idx[@]} > 0)) || return 0
	mapfile -t files < <(timeout -k 2 "$TT_SLURM_TIMEOUT" slurmd -G -N "$SLURMD_NODENAME" 2>&1 |
		sed -nE 's/.*Gres Name=tt .*File=([^[:space:]]+).*/\1/p')
	for i in "${idx[@]}"; do
		if ((i >= ${#files[@]})); then
			echo "GRES tt index $i, but slurmd -G lists ${#files[@]} tt device files on $SLURMD_NODENAME" >&2
			return 1
		fi
		card=${files[$i]##*/}
		if [[ ! $card =~ ^[0-9]+$ ]]; then
			echo "GRES tt index $i is ${files[$i]}, not a /dev/tenstorrent/N card" >&2
			return 1
		fi
		out+=("$card")
	done
	local IFS=,
	printf '%s\n' "${out[*]}"
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
	err=$(tr '\n' ' ' <"$errf")
	rm -f "$errf"
	((rc == 0)) || fail "cannot tell which tt cards Slurm gave this job on $SLURMD_NODENAME: $err"
	if [[ -z $cards ]]; then
		# Recorded, so the Epilog knows there is nothing to release.
		record "cards=" || true
		exit 0
	fi
	args=(hold --device "$cards" --slurm-job "$SLURM_JOB_ID" --json
		--reason "slurm job $SLURM_JOB_ID (${SLURM_JOB_USER:-uid ${SLURM_JOB_UID:-?}})")
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
