#!/bin/bash
# SPDX-License-Identifier: MIT
# mmdebstrap --customize-hook for the test guest: prune kernel modules to what the scenarios load,
# make boot quick and deterministic, and add the harness's command agent.
#
# usage: customize.sh ROOTFS
set -euo pipefail

root=${1:?usage: customize.sh ROOTFS}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
guest=$here/../guest

kver=$(basename "$(ls -d "$root"/lib/modules/*)")
kmod=$root/lib/modules/$kver/kernel

# Modules: the full set is ~400 MB and costs seconds in every per-run mke2fs. Keep the subtrees
# the scenarios need (virtio, USB host/gadget/serial, ALSA dummy/loopback, vivid, 9p, vsock,
# virtio-net for the user-mode-network variant, qemu_fw_cfg for credentials), then prove below
# that each needed module and its dependencies survived.
keep='^(arch|crypto|lib|sound/(core|drivers|usb|soundcore)|drivers/(virtio|char|firmware/qemu_fw_cfg|block/virtio_blk|usb|tty|hid|input|media/(v4l2-core|common|mc|cec|rc/rc-core|test-drivers)|net/(virtio_net|net_failover))|fs/(ext4|jbd2|mbcache|9p|netfs|fscache|fuse|configfs)|net/(9p|vmw_vsock|core))(/|\.ko)'
needed=(virtio_pci virtio_blk virtio_rng virtio_console ext4 crc32c_generic 9p 9pnet_virtio
	vsock vsock_loopback vmw_vsock_virtio_transport virtio_net snd-dummy snd-aloop vivid
	dummy_hcd libcomposite usb_f_acm cdc_acm ftdi_sio xhci_pci)
# The chaoskey scenario: the kernel's ChaosKey/Alea driver, and the SourceSink gadget function
# whose bulk-in endpoint it binds to.
needed+=(chaoskey usb_f_ss_lb)
# boot-virtio: credentials by fw_cfg (PID 1 loads the module itself in a VM to read them).
needed+=(qemu_fw_cfg)
# Each needed module's dependencies, read from the full set's modules.dep before anything is
# pruned: afterwards depmod no longer lists a dependency whose file is gone (it cannot know what
# would have provided the symbol), so the check below would not see the loss (snd needs
# soundcore.ko and vivid cec.ko, which once fell outside the trees kept).
declare -A deps
for m in "${needed[@]}"; do
	deps[$m]=$(chroot "$root" modprobe -S "$kver" --show-depends "$m") || deps[$m]="insmod /missing/$m"
done
while IFS= read -r -d '' f; do
	rel=${f#"$kmod"/}
	[[ $rel =~ $keep ]] || rm -f "$f"
done < <(find "$kmod" -name '*.ko*' -print0)
find "$kmod" -depth -type d -empty -delete
chroot "$root" depmod -a "$kver"

for m in "${needed[@]}"; do
	while read -r kind path _; do
		[[ $kind != insmod || -e $root$path ]] || {
			echo "customize.sh: $path (needed by $m) was pruned" >&2
			exit 1
		}
	done <<<"${deps[$m]}"
done

# Identity: a fixed machine-id, so no boot is a "first boot" (ConditionFirstBoot, presets).
echo eb-vm >"$root/etc/hostname"
echo 4242c0ffee4242c0ffee4242c0ffee42 >"$root/etc/machine-id"
printf '127.0.0.1 localhost\n127.0.1.1 eb-vm\n' >"$root/etc/hosts"

# Root is /dev/vda mounted rw by the initrd (no fsck: the image is a fresh snapshot each boot);
# the host share is optional.
cat >"$root/etc/fstab" <<'EOF'
/dev/vda   /          ext4  rw,errors=remount-ro  0 0
hostshare  /mnt/host  9p    trans=virtio,version=9p2000.L,msize=262144,nofail,x-systemd.device-timeout=10s  0 0
EOF
mkdir -p "$root/mnt/host"

# Journal in memory only; keep everything so scenarios can read it back.
mkdir -p "$root/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nRateLimitBurst=0\n' >"$root/etc/systemd/journald.conf.d/eb-vm.conf"

# Passwordless root on the serial console (debugging with EB_VM_KEEP=1 only).
chroot "$root" passwd -d root >/dev/null
mkdir -p "$root/etc/systemd/system/serial-getty@ttyS0.service.d"
install -m 0644 "$guest/autologin.conf" "$root/etc/systemd/system/serial-getty@ttyS0.service.d/"

# Nothing that waits for a network or a timer the tests do not need.
for u in getty-static.service apt-daily.timer \
	apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer; do
	ln -sf /dev/null "$root/etc/systemd/system/$u"
done

# A network only for scenarios that ask for one (boot-seed's user-mode-network variant passes
# systemd.wants=systemd-networkd.service): networkd stays disabled otherwise.
mkdir -p "$root/etc/systemd/network"
printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n' >"$root/etc/systemd/network/20-eb-vm.network"

# sshd only for the autopkgtest scenario, which starts it: no other guest listens on port 22.
rm -f "$root/etc/systemd/system/multi-user.target.wants/ssh.service" "$root/etc/systemd/system/sshd.service"

# The command agent.
install -m 0755 "$guest/eb-agent" "$root/usr/local/sbin/eb-agent"
install -m 0644 "$guest/eb-agent.service" "$root/etc/systemd/system/eb-agent.service"
install -m 0644 "$guest/60-eb-agent.rules" "$root/etc/udev/rules.d/60-eb-agent.rules"

echo "eb-vm image, kernel $kver" >"$root/etc/eb-vm-release"
