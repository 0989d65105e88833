#!/usr/bin/env bash
# Slurm Epilog (slurm.conf: Epilog=): when the job leaves this node, queues
# a reset of its tt cards by policy (TT_SLURM_RESET: never, on-failure,
# always) and releases its hold in queued, so the queue moves on: the reset
# first, then whatever waited behind the hold.
#
# slurmd runs it as root. It always exits 0: a failing Epilog drains the
# node. A hold it cannot release (queued stopped) ends all the same once
# queued sees the Slurm job gone (TT_DEVICE_SLURM_CHECK, docs/slurm.md).
set -u
# Whatever goes wrong, even a bug that stops the script, it exits 0.
trap 'exit 0' EXIT
tt_script=epilog
# shellcheck source-path=SCRIPTDIR source=tt-slurm.sh
. "${BASH_SOURCE[0]%/*}/tt-slurm.sh" || exit 0

# failed reports whether the job failed, from the exit code Slurm gives an
# Epilog: SLURM_JOB_EXIT_CODE2 is "exit:signal" of the batch script or
# salloc, SLURM_JOB_EXIT_CODE the wait(2) status; SLURM_JOB_DERIVED_EC is
# the highest exit code of the job's steps. A job with neither (an old
# Slurm) counts as failed: a spare reset is cheaper than a bad card.
failed() {
	if [[ -n ${SLURM_JOB_EXIT_CODE2:-} ]]; then
		[[ $SLURM_JOB_EXIT_CODE2 != 0:0 ]] && return 0
	elif [[ -n ${SLURM_JOB_EXIT_CODE:-} ]]; then
		[[ $SLURM_JOB_EXIT_CODE != 0 ]] && return 0
	else
		return 0
	fi
	[[ -n ${SLURM_JOB_DERIVED_EC:-} && ${SLURM_JOB_DERIVED_EC} != 0 && ${SLURM_JOB_DERIVED_EC} != 0:0 ]]
}

main() {
	local settings=ok
	tt_load || settings=bad
	tt_job || exit 0
	if [[ $settings == bad ]]; then
		tt_log "error: the settings in $tt_slurm_env are invalid: not resetting; releasing the hold with the defaults"
		TT_SLURM_RESET=never
	fi
	local hold cards state want=no card code err
	if [[ -f $(tt_marker) && -z $(tt_marker_get hold) && -z $(tt_marker_get cards) ]]; then
		err=$(tt_marker_get error)
		if [[ -z $err ]]; then
			# The Prolog found no tt card for the job on this node.
			rm -f -- "$(tt_marker)"
			exit 0
		fi
		# The Prolog took no hold (the marker says why), so nothing says
		# which cards the job had: no reset. A hold queued has for the job
		# all the same (its answer to the Prolog was lost) is released.
		if tt_cli release --slurm-job "$SLURM_JOB_ID"; then
			tt_log "no reset: the Prolog took no hold ($err); release: $tt_out"
		else
			tt_log "no reset: the Prolog took no hold ($err); error: release failed: ${tt_err:-exit $?}"
		fi
		rm -f -- "$(tt_marker)"
		exit 0
	fi
	hold=$(tt_marker_get hold)
	cards=$(tt_marker_get cards)
	# The hold's state decides whether the job ever had its cards: a hold
	# still queued (the job was cancelled while its TaskProlog waited)
	# means it never touched them, and a reset would only stop the job
	# that is running there now.
	if [[ -n $hold ]]; then
		tt_cli hold-status "$hold" --json && state=$(tt_json state "$tt_out")
	elif tt_cli hold-status --slurm-job "$SLURM_JOB_ID" --json; then
		state=$(tt_json state "$tt_out")
		cards=$(tt_json device_id "$tt_out")
		hold=$(tt_json hold_id "$tt_out")
	fi
	state=${state:-unknown}
	code=${SLURM_JOB_EXIT_CODE2:-${SLURM_JOB_EXIT_CODE:-none}}
	case $TT_SLURM_RESET in
	always) want=yes ;;
	on-failure) failed && want=yes ;;
	esac
	if [[ $TT_SLURM_FIT_WAIT != off && -n $cards && $state != queued ]] && failed; then
		# The failed job may have left a card wedged, and Slurm's jobs
		# pass no gate of queued's: gate the cards now, the site probe
		# included, while the hold still keeps queued's jobs off them.
		# An unfit card holds queued's jobs and queued recovers it; the
		# next Prolog on it fails if it does not recover.
		local wait
		wait=$(duration_seconds "$TT_SLURM_FIT_WAIT") || wait=600
		tt_timeout=$((wait + TT_SLURM_TIMEOUT))
		if tt_cli gate --device "$cards"; then
			tt_log "gate after the failed job (exit $code): card(s) $cards fit"
		elif (($? == 3)); then
			tt_log "gate after the failed job (exit $code): ${tt_err:-a card is unfit}; its queued jobs wait and queued recovers it"
		else
			tt_log "error: gate after the failed job (exit $code) not run: ${tt_err:-no answer}"
		fi
		tt_timeout=
	fi
	if [[ $want == yes && -n $cards && $state != queued ]]; then
		# Queued before the release, so the reset runs as soon as the
		# hold ends, ahead of the jobs that waited behind it; without
		# --force it waits for the release, and --no-interrupt keeps it
		# from stopping a job should one hold the card by then.
		local list
		IFS=, read -ra list <<<"$cards"
		for card in "${list[@]}"; do
			if tt_cli reset --device "$card" --no-interrupt; then
				tt_log "reset of card $card queued (policy $TT_SLURM_RESET, job exit $code): $tt_out"
			else
				tt_log "error: reset of card $card not queued: ${tt_err:-exit $?}"
			fi
		done
	elif [[ $want == yes ]]; then
		tt_log "no reset (policy $TT_SLURM_RESET, job exit $code): the job's hold was ${state} on card(s) ${cards:-none}"
	fi
	if tt_cli release --slurm-job "$SLURM_JOB_ID"; then
		tt_log "released hold(s) of the job (${hold:-none recorded}, card(s) ${cards:-none}): $tt_out"
	else
		tt_log "error: release of the job's hold(s) failed: ${tt_err:-exit $?}; queued's Slurm check ends them"
	fi
	rm -f -- "$(tt_marker)"
	exit 0
}

main "$@"
