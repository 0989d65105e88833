#!/usr/bin/env bash
# Installs queued in system mode: one root daemon for every user of this
# host, each job run as its submitter (docs/system-mode.md). Run as root
# from the repository root (make install-system does).
#
#   PREFIX=/usr/local    where bin/ and share/ go (the unit's ExecStart
#                        follows); refused when a directory on the way is
#                        writable by others than root, who runs what is there
#   DESTDIR=             install under this root instead of / (packaging,
#                        tests); the service and the host's groups are then
#                        left alone
#   SOCKET_GROUP=name    only this group's members may connect: creates the
#                        group when missing and sets TT_DEVICE_SOCKET_GROUP
#                        in a new /etc/default/tt-device-queue
#   ENFORCE=1            installs the udev rule that makes every card node
#                        0600 root:root (deploy/udev) and sets
#                        TT_DEVICE_ENFORCE=acl in a new settings file:
#                        while a job runs, only its user opens its cards
#   SKIP_TESTS=1         skip `make test` (it runs first by default)
#   NO_BUILD=1           install bin/queued and bin/tt-device-queue as they
#                        are (built as yourself with `make build`)
#
# /etc/default/tt-device-queue (the operator's settings) is written only
# when absent, as a commented template. The unit is (re)installed and
# enabled; a running queued-system is not restarted, since a restart
# interrupts every user's running jobs: the script says how to restart it.
set -euo pipefail

PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
GO=${GO:-go}
SOCKET_GROUP=${SOCKET_GROUP:-}
ENFORCE=${ENFORCE:-}

say() { printf '==> %s\n' "$*"; }
die() { printf 'install-system: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "must run as root (it installs into $PREFIX and /etc and manages a system service): sudo make install-system"
[[ -f go.mod && -d queued ]] || die "run me from the repository root (make install-system does)"
[[ $PREFIX == /* ]] || die "PREFIX=\"$PREFIX\": want an absolute path"
[[ -z $DESTDIR || $DESTDIR == /* ]] || die "DESTDIR=\"$DESTDIR\": want an absolute path"
while [[ $DESTDIR == */ ]]; do DESTDIR=${DESTDIR%/}; done # "/" and "/x/" as "" and "/x"
if [[ -n $SOCKET_GROUP && ! $SOCKET_GROUP =~ ^[a-z_][a-z0-9_-]{0,31}$ ]]; then
	die "SOCKET_GROUP=\"$SOCKET_GROUP\": want a group name (lower case letters, digits, _ and -, starting with a letter or _, at most 32)"
fi

[[ -z $ENFORCE || $ENFORCE == 0 || $ENFORCE == 1 ]] || die "ENFORCE=\"$ENFORCE\": want 1 (fence the cards) or 0"

BIN_DIR=$PREFIX/bin
SHARE_DIR=$PREFIX/share/tt-device-queue
UNIT=/etc/systemd/system/queued-system.service
UDEV_RULE=/etc/udev/rules.d/60-tenstorrent-queued.rules
DEFAULTS=/etc/default/tt-device-queue

# Root runs what is installed (the unit's queued, the default health
# check) and the commands of the settings file: no one else may be able to
# replace them. Every existing directory on the way to them (below
# DESTDIR, when set), and the settings file, must be root's and writable by
# root alone.
root_only() { # path: fails when it exists and others than root may write it
	local owner mode
	[[ -e $1 ]] || return 0
	read -r owner mode < <(stat -L -c '%u %a' -- "$1")
	[[ $owner == 0 ]] && ! ((8#$mode & 8#022)) && return 0
	printf 'owner uid %s, mode %s' "$owner" "$mode"
	return 1
}
check_root_only() { # dir what-to-change
	local d=$1 why
	while [[ $d != "${DESTDIR:-/}" && $d != / ]]; do
		why=$(root_only "$d") || die "$d is writable by others than root ($why), and root runs what is installed below it: $2"
		d=$(dirname -- "$d")
	done
}
check_root_only "$DESTDIR$BIN_DIR" "choose another PREFIX"
check_root_only "$DESTDIR$SHARE_DIR" "choose another PREFIX"
check_root_only "$DESTDIR/etc/systemd/system" "make it root's alone"
check_root_only "$DESTDIR/etc/default" "make it root's alone"
[[ $ENFORCE == 1 ]] && check_root_only "$DESTDIR/etc/udev/rules.d" "make it root's alone"
why=$(root_only "$DESTDIR$DEFAULTS") ||
	die "$DESTDIR$DEFAULTS is writable by others than root ($why), and root runs the reset commands it sets: chown root:root and chmod 0644 it"

if [[ ${SKIP_TESTS:-0} != 1 ]]; then
	say "Running the tests first (SKIP_TESTS=1 skips them)"
	make test
fi

if [[ ${NO_BUILD:-0} == 1 ]]; then
	for b in queued queued-exec tt-device-queue; do
		[[ -x bin/$b ]] || die "NO_BUILD=1, but bin/$b is missing: run make build first"
	done
	say "NO_BUILD=1: installing bin/queued, bin/queued-exec and bin/tt-device-queue as they are"
else
	say "Building queued and tt-device-queue"
	mkdir -p bin
	scripts/build-queued.sh bin "$GO"
fi

say "Installing into $DESTDIR$BIN_DIR"
install -d -m 0755 "$DESTDIR$BIN_DIR"
# Write beside the target and rename, so a running queued keeps its old
# executable and a half-copied binary is never started.
for b in queued queued-exec tt-device-queue; do
	install -m 0755 -o root -g root "bin/$b" "$DESTDIR$BIN_DIR/.$b.new"
	mv -f "$DESTDIR$BIN_DIR/.$b.new" "$DESTDIR$BIN_DIR/$b"
done
install -d -m 0755 "$DESTDIR$SHARE_DIR"
install -m 0644 -o root -g root queued/health_check.py "$DESTDIR$SHARE_DIR/health_check.py"
say "Installed the health check as $DESTDIR$SHARE_DIR/health_check.py"

say "Installing the system unit as $DESTDIR$UNIT"
install -d -m 0755 "$DESTDIR/etc/systemd/system"
# The unit starts /usr/local/bin/queued; point it at PREFIX when that differs.
sed "s|^ExecStart=/usr/local/bin/queued\$|ExecStart=$BIN_DIR/queued|" deploy/systemd/queued-system.service >"$DESTDIR$UNIT.new"
chown root:root "$DESTDIR$UNIT.new"
chmod 0644 "$DESTDIR$UNIT.new"
mv -f "$DESTDIR$UNIT.new" "$DESTDIR$UNIT"

if [[ $ENFORCE == 1 ]]; then
	install -d -m 0755 "$DESTDIR/etc/udev/rules.d"
	install -m 0644 -o root -g root deploy/udev/60-tenstorrent-queued.rules "$DESTDIR$UDEV_RULE.new"
	mv -f "$DESTDIR$UDEV_RULE.new" "$DESTDIR$UDEV_RULE"
	say "Installed the udev rule $DESTDIR$UDEV_RULE: card nodes 0600 root:root"
	if [[ -z $DESTDIR ]] && command -v udevadm >/dev/null 2>&1; then
		if ! { udevadm control --reload && udevadm trigger --subsystem-match=tenstorrent --action=change; }; then
			say "NOTE: udevadm could not apply the rule now; it applies at the next boot or driver load"
		fi
	else
		say "Apply it on the target host: udevadm control --reload && udevadm trigger --subsystem-match=tenstorrent --action=change"
	fi
fi

# The operator's settings: a template when absent, never overwritten.
if [[ -e $DESTDIR$DEFAULTS || -L $DESTDIR$DEFAULTS ]]; then
	say "Keeping $DESTDIR$DEFAULTS (the settings are yours)"
	if [[ -n $SOCKET_GROUP ]] && ! grep -Eq "^[[:space:]]*TT_DEVICE_SOCKET_GROUP[[:space:]]*=[[:space:]]*[\"']?$SOCKET_GROUP[\"']?[[:space:]]*\$" "$DESTDIR$DEFAULTS"; then
		say "NOTE: $DESTDIR$DEFAULTS does not set TT_DEVICE_SOCKET_GROUP=$SOCKET_GROUP: add that line and restart queued-system (while idle) to restrict the socket to the group"
	fi
	if [[ $ENFORCE == 1 ]] && ! grep -Eq '^[[:space:]]*TT_DEVICE_ENFORCE[[:space:]]*=[[:space:]]*acl' "$DESTDIR$DEFAULTS"; then
		say "NOTE: $DESTDIR$DEFAULTS does not set TT_DEVICE_ENFORCE=acl: add that line and restart queued-system (while idle) to fence the cards"
	fi
else
	install -d -m 0755 "$DESTDIR/etc/default"
	group_line="#TT_DEVICE_SOCKET_GROUP=ttqueue"
	enforce_line="#TT_DEVICE_ENFORCE=acl"
	[[ $ENFORCE == 1 ]] && enforce_line="TT_DEVICE_ENFORCE=acl"
	[[ -n $SOCKET_GROUP ]] && group_line="TT_DEVICE_SOCKET_GROUP=$SOCKET_GROUP"
	cat >"$DESTDIR$DEFAULTS.new" <<EOF
# Settings of queued in system mode (queued-system.service), as NAME=value
# lines; \`queued --help\` lists every setting, docs/system-mode.md explains
# these. A line here overrides the unit's Environment= lines. Restart to
# apply, while the queue is idle: systemctl restart queued-system

# The cards (default: the numeric nodes under /dev/tenstorrent).
#TT_DEVICE_IDS=0,1

# Who may connect, and so submit jobs: only this group's members (the
# socket is then mode 0660). Unset: every local user, system accounts
# included (mode 0666). Members log in again to use a new membership.
$group_line

# Admins (besides root): may read, kill and reset every user's jobs; their
# resets interrupt a running job. Others' resets wait for it to end.
#TT_DEVICE_ADMIN_GROUP=ttadmin

# Resets and health checks run as root, or as this user with its HOME (the
# default commands use ~/tenstorrent/.venv). A command run as root must be
# writable by root alone: a tt-smi in a user's virtualenv, run as root,
# hands that user root. Put the commands in root's own venv, or name the
# venv's owner here.
#TT_DEVICE_RESET_USER=
#TT_DEVICE_RESET_CMD=~/tenstorrent/.venv/bin/tt-smi -r /dev/tenstorrent/{device} --no_reinit
#TT_DEVICE_HEALTH_CHECK_CMD=~/tenstorrent/.venv/bin/python3 $SHARE_DIR/health_check.py {device}
#TT_DEVICE_DEEP_RESET_CMD=

# Fence the cards (make install-system ENFORCE=1 installs the udev rule it
# needs): while a job or hold runs, only its user may open its cards.
$enforce_line

# Jobs queued at once, all users together: one user can fill it.
#TT_DEVICE_MAX_QUEUED_JOBS=1000

# Processes and threads one job may have, so one job's fork bomb cannot
# take what queued and the other users' jobs need. Leave room for your
# largest job's data loaders and thread pools.
#TT_DEVICE_JOB_TASKS_MAX=4096

# TCP is off in system mode. A port turns it on (127.0.0.1); requests over
# it need the token in the root-only state directory, and a token holder
# acts as root.
#TT_DEVICE_PORT=5741
EOF
	chown root:root "$DESTDIR$DEFAULTS.new"
	chmod 0644 "$DESTDIR$DEFAULTS.new"
	mv -f "$DESTDIR$DEFAULTS.new" "$DESTDIR$DEFAULTS"
	say "Wrote the settings template $DESTDIR$DEFAULTS"
fi

# The socket group. Under DESTDIR only a group file there is changed,
# never the host's.
if [[ -n $SOCKET_GROUP ]]; then
	if [[ -n $DESTDIR ]]; then
		if [[ ! -f $DESTDIR/etc/group ]]; then
			say "DESTDIR is set and has no etc/group: create the group $SOCKET_GROUP on the target host (groupadd --system $SOCKET_GROUP)"
		elif grep -q "^$SOCKET_GROUP:" "$DESTDIR/etc/group"; then
			say "Group $SOCKET_GROUP exists in $DESTDIR/etc/group"
		else
			groupadd --system --prefix "$DESTDIR" "$SOCKET_GROUP" || die "could not create the group $SOCKET_GROUP in $DESTDIR/etc/group"
			say "Created the group $SOCKET_GROUP in $DESTDIR/etc/group"
		fi
	elif getent group "$SOCKET_GROUP" >/dev/null; then
		say "Group $SOCKET_GROUP exists"
	else
		groupadd --system "$SOCKET_GROUP" || die "could not create the group $SOCKET_GROUP"
		say "Created the group $SOCKET_GROUP"
	fi
	say "Let a user submit jobs: usermod -aG $SOCKET_GROUP NAME (it applies from their next login)"
fi

if [[ -n $DESTDIR ]]; then
	say "DESTDIR is set: leaving the service alone"
	exit 0
fi
if [[ ! -d /run/systemd/system ]] || ! command -v systemctl >/dev/null 2>&1; then
	say "systemd is not running here (containers, CI): skipping the service; start queued by hand, as root, with:"
	say "  TT_DEVICE_SOCKET=/run/tt-device-queue/queued.sock TT_DEVICE_LOG_DIR=/var/lib/tt-device-queue $BIN_DIR/queued"
	exit 0
fi

# Where the socket is: the unit's, unless the settings file moves it.
SOCKET=/run/tt-device-queue/queued.sock
if line=$(grep -E '^[[:space:]]*TT_DEVICE_SOCKET[[:space:]]*=' "$DEFAULTS" 2>/dev/null | tail -n 1); then
	line=${line#*=}
	line=${line#"${line%%[![:space:]\"\']*}"}
	line=${line%"${line##*[![:space:]\"\']}"}
	[[ -n $line ]] && SOCKET=$line
fi

systemctl daemon-reload
if systemctl is-active --quiet queued-system; then
	systemctl enable --quiet queued-system
	say "queued-system is running, still with the binary it started with. A restart interrupts every user's running jobs:"
	say "restart it while no job runs (tt-device-queue status shows none): systemctl restart queued-system"
	exit 0
fi
say "Starting queued-system"
systemctl enable --quiet --now queued-system

# Wait (bounded) until it answers on its socket.
for _ in $(seq 50); do
	if TT_DEVICE_URL=unix://$SOCKET "$BIN_DIR/tt-device-queue" status >/dev/null 2>&1; then
		TT_DEVICE_URL=unix://$SOCKET "$BIN_DIR/tt-device-queue" status
		say "queued-system is running on $SOCKET; users submit with: tt-device-queue run --device 0 -- 'echo hello'"
		say "users who ran their own queued (make install) stop it, or their CLI keeps using it: systemctl --user disable --now queued"
		exit 0
	fi
	sleep 0.2
done
systemctl status --no-pager queued-system >&2 || true
die "queued-system did not answer on $SOCKET within 10 s; see: journalctl -u queued-system (on a machine without /dev/tenstorrent, name the cards: TT_DEVICE_IDS=0,1 in $DEFAULTS)"
