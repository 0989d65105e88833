#!/usr/bin/env bash
# Slurm TaskProlog (slurm.conf: TaskProlog=): before each task of the job
# starts, waits (at most TT_SLURM_HOLD_WAIT) until the job's hold on its tt
# cards is active in queued, then gives the task TT_QUEUE_DEVICE (the
# cards, as queued gives its own jobs) and, when queued hands cards out by
# PCI address (TT_DEVICE_VISIBLE=bdf), TT_VISIBLE_DEVICES.
#
# slurmstepd runs it as the job's user and reads its stdout: "export
# NAME=value" sets a variable of the task, "print TEXT" writes TEXT to the
# task's output. A non-zero exit cancels the task, which fails the job with
# the message printed here: better than a job that runs on a card someone
# else's job is using.
set -u
tt_script=taskprolog
# shellcheck source-path=SCRIPTDIR source=tt-slurm.sh
. "${BASH_SOURCE[0]%/*}/tt-slurm.sh" || exit 1

# refuse fails the task with a message in its output and on stderr.
refuse() {
	local line
	while IFS= read -r line; do
		printf 'print tt-device-queue (TaskProlog): %s\n' "$line"
	done <<<"$*"
	tt_log "error: $*"
	exit 1
}

# bdfs prints the PCI addresses of cards (0,1), comma-separated, from the
# class devices' device links in sysfs.
bdfs() {
	local card link out=()
	local IFS=,
	for card in $1; do
		link=$(readlink -f "$TT_SLURM_SYSFS/class/tenstorrent/tenstorrent!$card/device") || return 1
		[[ ${link##*/} =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]] || return 1
		out+=("${link##*/}")
	done
	printf '%s\n' "${out[*]}"
}

main() {
	tt_load || refuse "this node's tt-slurm.env is invalid: an administrator must fix $tt_slurm_env"
	tt_job || refuse "SLURM_JOB_ID is not set: run by Slurm only"
	local err hold cards rc state visible wait
	if [[ ! -f $(tt_marker) ]]; then
		# The Prolog leaves a marker for every job, tt cards or not; none
		# means it is not installed, or the job began before it was (a
		# running job's next step must not fail for that).
		tt_log "warning: no $(tt_marker): is prolog.sh the Prolog of this node?"
		exit 0
	fi
	err=$(tt_marker_get error)
	[[ -z $err ]] || refuse "this job got no hold on its tt cards, so it must not use them: $err"
	hold=$(tt_marker_get hold)
	cards=$(tt_marker_get cards)
	# The job has no tt card on this node.
	[[ -z $hold && -z $cards ]] && exit 0
	[[ $hold =~ ^[0-9a-f]{32}$ && -n $cards ]] || refuse "$(tt_marker) names no hold; the Prolog did not finish"
	wait=$(duration_seconds "$TT_SLURM_HOLD_WAIT") # tt_load checked it
	tt_timeout=$((wait + TT_SLURM_TIMEOUT))
	tt_cli hold-status "$hold" --wait="${wait}s" --json
	rc=$?
	tt_timeout=
	state=$(tt_json state "$tt_out")
	case $rc:$state in
	0:* | *:active) ;;
	124:*)
		refuse "card(s) $cards are still busy after $TT_SLURM_HOLD_WAIT: this job's hold $hold waits behind other work in queued" \
			"(tt-device-queue status shows it). The job is cancelled rather than run on a card in use."
		;;
	*:done)
		refuse "this job's hold $hold on card(s) $cards ended before the job started (released, or expired)."
		;;
	*)
		refuse "cannot learn whether this job's hold $hold on card(s) $cards is active: ${tt_err:-exit $rc} (is queued running on $TT_SLURM_SOCKET?)"
		;;
	esac
	printf 'export TT_QUEUE_DEVICE=%s\n' "$cards"
	if tt_cli --json status && [[ $(tt_json visible_devices "$tt_out") == bdf ]]; then
		visible=$(bdfs "$cards") || refuse "queued hands cards out by PCI address (TT_DEVICE_VISIBLE=bdf), but $TT_SLURM_SYSFS has none for card(s) $cards"
		printf 'export TT_VISIBLE_DEVICES=%s\n' "$visible"
	fi
	exit 0
}

main "$@"
