# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Host side of the VM harness: packages, accelerator choice, timing helpers.
# Sourced by tests/vm/run and tests/vm/ci; never executed on its own.

# Debian packages the host needs. Each entry is "command:package", so a machine that already has
# the command (from wherever) installs nothing.
EB_VM_HOST_TOOLS=(
	qemu-system-x86_64:qemu-system-x86
	qemu-img:qemu-utils
	mmdebstrap:mmdebstrap
	mke2fs:e2fsprogs
	socat:socat
	meson:meson
	ninja:ninja-build
	cc:gcc
	pkg-config:pkg-config
	sha256sum:coreutils
	timeout:coreutils
	setpriv:util-linux
	zstd:zstd
	cpio:cpio
	gzip:gzip
)
# Build dependencies of the project itself, so "meson setup" works on a fresh machine.
EB_VM_HOST_BUILD_PKGS=(libsystemd-dev libssl-dev libinih-dev libcmocka-dev libudev-dev libftdi1-dev)

eb_log() { printf '[vm] %s\n' "$*" >&2; }

eb_now() { date +%s.%N; }

# eb_elapsed START: seconds since START, one decimal.
eb_elapsed() { awk -v s="$1" -v e="$(eb_now)" 'BEGIN { printf "%.1f", e - s }'; }

# Installs whatever of EB_VM_HOST_TOOLS and EB_VM_HOST_BUILD_PKGS is missing. Returns non-zero
# when packages are missing and cannot be installed (not root, or apt fails): callers skip then.
eb_host_setup() {
	local want=() entry cmd pkg
	for entry in "${EB_VM_HOST_TOOLS[@]}"; do
		cmd=${entry%%:*}
		pkg=${entry#*:}
		command -v "$cmd" >/dev/null 2>&1 || want+=("$pkg")
	done
	for pkg in "${EB_VM_HOST_BUILD_PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
			want+=("$pkg")
	done
	((${#want[@]} == 0)) && return 0
	if [[ $(id -u) != 0 ]]; then
		eb_log "missing host packages and not root: ${want[*]}"
		return 1
	fi
	eb_log "installing host packages: ${want[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${want[@]}" >&2; then
		apt-get update >&2 || return 1
		apt-get install -y --no-install-recommends "${want[@]}" >&2 || return 1
	fi
}

# Picks the accelerator: KVM only when the CPU advertises vmx/svm, /dev/kvm is usable, and a
# short probe boot proves the guest kernel actually gets past early setup (a PVM-only KVM lets
# QEMU start and then spins forever in the guest, see the notes). Prints "kvm" or "tcg".
# EB_VM_ACCEL=kvm|tcg overrides. The probe result is cached per boot of the host.
eb_pick_accel() {
	local kernel=$1 initrd=$2 probe_dir=$3
	if [[ -n ${EB_VM_ACCEL:-} ]]; then
		printf '%s\n' "$EB_VM_ACCEL"
		return
	fi
	if ! grep -qwE 'vmx|svm' /proc/cpuinfo || [[ ! -r /dev/kvm || ! -w /dev/kvm ]]; then
		printf 'tcg\n'
		return
	fi
	local cache
	cache="$probe_dir/accel.$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo x)"
	if [[ -s $cache ]]; then
		cat "$cache"
		return
	fi
	# The busybox initrd prints EB_INITRD on the console as soon as it runs: seeing it within
	# 20 s means the kernel boots under KVM.
	local log="$probe_dir/kvm-probe.log"
	rm -f "$log"
	timeout 20 qemu-system-x86_64 -machine pc -accel kvm -cpu host -m 256 -nodefaults \
		-no-user-config -display none -no-reboot -kernel "$kernel" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 eb.probe" -serial "file:$log" >/dev/null 2>&1 || true
	if grep -q EB_INITRD "$log" 2>/dev/null; then
		printf 'kvm\n' | tee "$cache"
	else
		printf 'tcg\n' | tee "$cache"
	fi
}
