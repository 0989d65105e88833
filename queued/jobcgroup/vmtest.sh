#!/usr/bin/env bash
# vmtest.sh [TEST-REGEXP] — run queued's job-cgroup tests (default:
# 'JobCgroup|OOM' of ./queued/cmd/queued) inside a throwaway VM whose cgroup v2
# hierarchy has the memory controller.
#
# Why: TestQueued_OOMKilledJobLeavesQueuedAndOtherCard needs the memory
# controller in cgroup v2. On a host with a hybrid v1/v2 hierarchy (memory
# bound to v1) it skips, and the host's hierarchy is not ours to remount. The
# VM boots a stock Debian cloud kernel with an initramfs holding busybox, a
# static queued and the compiled test binary, mounts cgroup2 alone with
# +memory +pids, runs the tests as root and powers off. It uses qemu's TCG
# (software emulation), since nested KVM may not be usable; a run takes
# about a minute.
#
# Needs (Debian): qemu-system-x86, busybox-static, and apt-get download for
# the kernel package (no install: it is unpacked in a temporary directory).
# Exits with the test binary's status.
set -euo pipefail

run=${1:-'JobCgroup|OOM'}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
GO=${GO:-go}

for tool in qemu-system-x86_64 busybox apt-get dpkg-deb gzip; do
	command -v "$tool" >/dev/null || { echo "vmtest: $tool is missing (Debian: qemu-system-x86, busybox-static)" >&2; exit 1; }
done
# The initramfs has no libraries: busybox must be the static build.
dpkg -s busybox-static >/dev/null 2>&1 || { echo "vmtest: busybox-static is not installed" >&2; exit 1; }
busybox=/bin/busybox

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir=$tmp/initramfs
mkdir -p "$ir"/{bin,usr/local/bin,proc,sys,dev,tmp}

# A kernel: the one the cloud kernel metapackage currently points at.
kernel_pkg() { apt-cache depends linux-image-cloud-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1; }
pkg=$(kernel_pkg)
if [[ -z $pkg && $(id -u) == 0 ]]; then
	# A new machine may have no package lists yet.
	apt-get update >/dev/null 2>&1 || true
	pkg=$(kernel_pkg)
fi
[[ -n $pkg ]] || { echo "vmtest: cannot resolve linux-image-cloud-amd64 (run apt-get update)" >&2; exit 1; }
(cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1) || { echo "vmtest: apt-get download $pkg failed" >&2; exit 1; }
dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/kernel"
vmlinuz=$(ls "$tmp"/kernel/boot/vmlinuz-*)

(cd "$repo" && CGO_ENABLED=0 "$GO" build -o "$ir/queued" ./queued/cmd/queued &&
	CGO_ENABLED=0 "$GO" test -c -o "$ir/queued.test" ./queued/cmd/queued)
cp "$(readlink -f "$busybox")" "$ir/bin/busybox"
# The test's TestMain builds queued with `go build -o BIN .`; in the VM a
# stand-in copies the binary built above.
cat >"$ir/usr/local/bin/go" <<'EOF'
#!/bin/sh
[ "$1" = build ] && [ "$2" = -o ] && exec cp /queued "$3"
echo "go stand-in: unsupported: $*" >&2; exit 1
EOF
cat >"$ir/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo "+memory +pids" > /sys/fs/cgroup/cgroup.subtree_control
mount -t tmpfs tmp /tmp
ip link set lo up
export PATH=/usr/local/bin:/bin HOME=/tmp TMPDIR=/tmp
echo "vmtest: kernel $(uname -r), cgroup v2 controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
cd /tmp
/queued.test -test.v -test.count=1 -test.run "$(sed -n 's/.*testrun=\([^ ]*\).*/\1/p' /proc/cmdline)"
echo "vmtest: exit $?"
poweroff -f
EOF
chmod +x "$ir/usr/local/bin/go" "$ir/init"
(cd "$ir" && find . | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -1 >"$tmp/initrd.gz"

timeout 600 qemu-system-x86_64 -accel tcg -cpu max -m 1024 -smp 1 -nographic -no-reboot \
	-kernel "$vmlinuz" -initrd "$tmp/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1 testrun=$run" | tee "$tmp/console.log" |
	grep -v '^time=' || true
code=$(sed -n 's/^vmtest: exit \([0-9]*\).*/\1/p' "$tmp/console.log" | tr -d '\r' | tail -1)
[[ -n $code ]] || { echo "vmtest: the VM did not report the tests' status" >&2; exit 1; }
exit "$code"
