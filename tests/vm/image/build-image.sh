#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds the base guest from Debian packages only: OUT/rootfs (a directory, later overlaid with the
# project's DESTDIR), OUT/vmlinuz and OUT/initrd.gz. Everything in tests/vm/image/ and
# tests/vm/guest/ is part of the recipe: tests/vm/run caches OUT by the hash of those files.
#
# usage: build-image.sh OUT
set -euo pipefail

out=${1:?usage: build-image.sh OUT}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mirror=${EB_VM_MIRROR:-http://deb.debian.org/debian}
security=${EB_VM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

# What the guest runs: systemd + udev + the distribution kernel, the tools the scenarios drive
# (socat, jq, alsa-utils, v4l-utils, usbutils), the peers they start (ekeyd), and the shared
# libraries the project links (listed even when pulled in anyway, so a new dependency shows up
# here as a recipe change).
packages=(
	systemd systemd-sysv udev kmod dbus
	linux-image-amd64 busybox-static
	procps iproute2 socat jq alsa-utils v4l-utils usbutils
	libsystemd0 libudev1 libssl3 libinih1 libasound2 libusb-1.0-0 libpcsclite1
	libjson-c5 libcairo2 libfontconfig1
	# eb-source-qng drives ComScire's QNG (an FTDI chip) through libftdi1.
	libftdi1-2
	# eb-assess: bzip2 for the compression estimator, a suffix array for LRS and t-tuple.
	libbz2-1.0 libdivsufsort3
	# The entropykey scenario: Debian's daemon for the Simtec Entropy Key, which udev starts.
	ekeyd
	# The deb scenario: "apt install ./*.deb", as the README says.
	apt
	# The autopkgtest scenario: autopkgtest's ssh runner logs in to the guest (sshd is started
	# only there: customize.sh leaves it disabled) and serves the packages to its APT from a
	# local repository it indexes with apt-ftparchive.
	openssh-server apt-utils
)

rm -rf "$out"
mkdir -p "$out"

# shellcheck disable=SC2016 # "$1" is expanded by mmdebstrap's hook shell, not here.
# update-initramfs would spend ~10 s building an initrd the harness does not use (mkinitrd.sh
# makes a 2 MB busybox one), so it is diverted to true before the kernel is installed.
mmdebstrap --variant=essential --mode=root --format=directory \
	--include="$(
		IFS=,
		echo "${packages[*]}"
	)" \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-include=/usr/share/locale/locale.alias' \
	--essential-hook='chroot "$1" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs && ln -sf /bin/true "$1/usr/sbin/update-initramfs"' \
	--customize-hook="$here/customize.sh \"\$1\"" \
	bookworm "$out/rootfs" \
	"deb $mirror bookworm main" \
	"deb $mirror bookworm-updates main" \
	"deb $security bookworm-security main"

kver=$(basename "$(ls -d "$out"/rootfs/lib/modules/*)")
cp "$out/rootfs/boot/vmlinuz-$kver" "$out/vmlinuz"
"$here/mkinitrd.sh" "$out/rootfs" "$kver" "$out/initrd.gz"
printf '%s\n' "$kver" >"$out/kernel-version"
