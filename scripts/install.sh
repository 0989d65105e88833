#!/usr/bin/env bash
# Installs queued and tt-device-queue for the current user and (re)starts the
# queued user service. Run from the repository root (make install does).
#
#   PREFIX=~/.local      where bin/ and share/ go
#   SKIP_TESTS=1         skip `make test` (it runs first by default)
#   FORCE=1              restart even while jobs are running, or when the
#                        running daemon cannot be asked (running jobs end as
#                        interrupted and are never run again)
#   NO_SERVICE=1         install the files only; leave the service alone
#
# A restart interrupts running jobs, so the script refuses to restart a
# queue that is running one unless FORCE=1, and also one it cannot ask
# (the new CLI gets no answer from /status): it fails closed. It asks with
# the settings the service runs with, not the installing shell's: the user
# manager's environment (systemctl --user show-environment) and then the
# unit's EnvironmentFile (~/.config/tt-device-queue/queued.env), so a
# TT_DEVICE_LOG_DIR or TT_DEVICE_PORT set only there is found. Queued
# (waiting) jobs are kept across the restart. Where `systemctl --user` is
# unavailable (containers, CI), the service step is skipped with a note.
set -euo pipefail

PREFIX=${PREFIX:-$HOME/.local}
GO=${GO:-go}
UNIT_DIR=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user
BIN_DIR=$PREFIX/bin
SHARE_DIR=$PREFIX/share/tt-device-queue

say() { printf '==> %s\n' "$*"; }
die() { printf 'install: %s\n' "$*" >&2; exit 1; }

[[ -f go.mod && -d queued ]] || die "run me from the repository root (make install does)"

if [[ ${SKIP_TESTS:-0} != 1 ]]; then
	say "Running the tests first (SKIP_TESTS=1 skips them)"
	make test
fi

say "Building queued and tt-device-queue"
mkdir -p bin
scripts/build-queued.sh bin "$GO"

say "Installing into $BIN_DIR"
install -d -m 0755 "$BIN_DIR"
# Write beside the target and rename, so a running queued keeps its old
# executable and a half-copied binary is never started.
for b in queued queued-exec tt-device-queue; do
	install -m 0755 "bin/$b" "$BIN_DIR/.$b.new"
	mv -f "$BIN_DIR/.$b.new" "$BIN_DIR/$b"
done
if [[ -f queued/health_check.py ]]; then
	install -D -m 0644 queued/health_check.py "$SHARE_DIR/health_check.py"
	say "Installed the health check as $SHARE_DIR/health_check.py"
else
	say "queued/health_check.py is not in this tree; skipping it"
fi

CLI=$BIN_DIR/tt-device-queue

if [[ ${NO_SERVICE:-0} == 1 ]]; then
	say "NO_SERVICE=1: leaving the service alone"
	exit 0
fi
if ! command -v systemctl >/dev/null 2>&1 || ! systemctl --user show-environment >/dev/null 2>&1; then
	say "systemctl --user is not available here (no user service manager, as in containers and CI):"
	say "skipping the service; start the daemon by hand with: $BIN_DIR/queued"
	exit 0
fi

say "Installing the user unit into $UNIT_DIR"
install -d -m 0755 "$UNIT_DIR"
# The unit starts %h/.local/bin/queued; point it at PREFIX when that differs.
sed "s|^ExecStart=%h/.local/bin/queued|ExecStart=$BIN_DIR/queued|" deploy/systemd/queued.service >"$UNIT_DIR/queued.service.new"
mv -f "$UNIT_DIR/queued.service.new" "$UNIT_DIR/queued.service"
systemctl --user daemon-reload

# The settings the CLI finds the daemon by (state directory, so its token
# and address; port; URL) are read as the service gets them, never from
# this shell: the user manager's environment, then each EnvironmentFile
# of the installed unit (%h is HOME; a leading - means it may be missing).
SERVICE_ENV=()
add_setting() { # one NAME=value line as systemd reads it
	local line=$1 name value
	line=${line#"${line%%[![:space:]]*}"}
	[[ -z $line || $line == '#'* || $line == ';'* ]] && return 0
	[[ $line =~ ^([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*=[[:space:]]*(.*)$ ]] || return 0
	name=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
	value=${value%"${value##*[![:space:]]}"}
	if [[ ${#value} -ge 2 && ( ($value == \"*\") || ($value == \'*\') ) ]]; then
		value=${value:1:${#value}-2}
	fi
	SERVICE_ENV+=("$name=$value")
}
while IFS= read -r line; do
	case $line in TT_DEVICE_*=* | XDG_STATE_HOME=*) add_setting "$line" ;; esac
done < <(systemctl --user show-environment 2>/dev/null || true)
while IFS= read -r file; do
	file=${file#-}
	file=${file//%h/$HOME}
	[[ -e $file ]] || continue
	[[ -r $file ]] || die "cannot read $file, the settings file of the queued unit; fix its permissions (the service reads it as you)"
	while IFS= read -r line || [[ -n $line ]]; do add_setting "$line"; done <"$file"
done < <(sed -n 's/^EnvironmentFile=//p' "$UNIT_DIR/queued.service")
cli() { env -u TT_DEVICE_LOG_DIR -u TT_DEVICE_PORT -u TT_DEVICE_URL -u XDG_STATE_HOME "${SERVICE_ENV[@]}" "$CLI" "$@"; }

if systemctl --user is-active --quiet queued; then
	# Ask the running daemon (through the new CLI) whether a job is running:
	# a restart would interrupt it. A daemon that cannot be asked may be
	# running one, so that refuses too.
	errs=$(mktemp)
	trap 'rm -f "$errs"' EXIT
	if status=$(cli --json status 2>"$errs"); then
		if [[ $status == *'"current":{'* ]]; then
			if [[ ${FORCE:-0} != 1 ]]; then
				cli status >&2 || true
				die "jobs are running (above); a restart would interrupt them. Wait until \`tt-device-queue status\` shows no current job, or run again with FORCE=1 to interrupt them."
			fi
			say "FORCE=1: restarting although jobs are running; they end as interrupted"
		fi
	else
		if [[ ${FORCE:-0} != 1 ]]; then
			cat "$errs" >&2
			die "queued is active, but the new tt-device-queue cannot ask it whether jobs are running (above), so it is not restarted: a restart would interrupt them. Put the settings queued runs with (TT_DEVICE_LOG_DIR, TT_DEVICE_PORT) in ~/.config/tt-device-queue/queued.env, check \`systemctl --user status queued\`, or run again with FORCE=1 to restart it anyway."
		fi
		say "FORCE=1: restarting although the new CLI cannot ask queued whether jobs are running; running jobs end as interrupted"
	fi
	say "Restarting queued"
	systemctl --user enable --quiet queued
	systemctl --user restart queued
else
	say "Starting queued"
	systemctl --user enable --quiet --now queued
fi

# Wait (bounded) until it answers.
for _ in $(seq 50); do
	if cli status >/dev/null 2>&1; then
		cli status
		say "queued is running; try: tt-device-queue run --device 0 -- 'echo hello'"
		case ":$PATH:" in *":$BIN_DIR:"*) ;; *) say "add $BIN_DIR to your PATH" ;; esac
		say "shell completion: source <(tt-device-queue completion bash)   (or zsh)"
		say "to keep queued running after you log out: loginctl enable-linger ${USER:-$(id -un)}"
		exit 0
	fi
	sleep 0.2
done
systemctl --user status --no-pager queued >&2 || true
die "queued did not answer within 10 s; see: journalctl --user -u queued (on a machine without /dev/tenstorrent, name the cards: echo TT_DEVICE_IDS=0,1 >> ~/.config/tt-device-queue/queued.env)"
