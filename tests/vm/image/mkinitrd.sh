#!/bin/bash
# SPDX-License-Identifier: MIT
# Makes a ~2 MB busybox initramfs: loads the virtio and ext4 modules (Debian builds them as
# modules), mounts /dev/vda and switches to systemd. Debian's own initrd boots too, ~5 s slower.
# With "eb.probe" on the command line it only prints EB_INITRD and powers off (the KVM probe).
#
# usage: mkinitrd.sh ROOTFS KERNEL-VERSION OUT.gz
set -euo pipefail

root=${1:?} kver=${2:?} out=${3:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp"/{bin,dev,proc,sys,root,mods}
cp "$root/bin/busybox" "$tmp/bin/busybox"

# Dependencies first, in modprobe's order, each once.
n=0
declare -A seen=()
while read -r kind path _; do
	[[ $kind == insmod && -z ${seen[$path]:-} ]] || continue
	seen[$path]=1
	n=$((n + 1))
	name=$(printf '%02d-%s' "$n" "$(basename "$path")")
	case $path in
	*.xz) xz -dc "$root$path" >"$tmp/mods/${name%.xz}" ;;
	*.zst) zstd -qdc "$root$path" >"$tmp/mods/${name%.zst}" ;;
	*) cp "$root$path" "$tmp/mods/$name" ;;
	esac
done < <(for m in virtio_pci virtio_blk crc32c_generic ext4; do
	# One name per call: modprobe takes the words after the first as module parameters.
	chroot "$root" modprobe -S "$kver" --show-depends "$m"
done)

cat >"$tmp/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "EB_INITRD" >/dev/console
case " $(cat /proc/cmdline) " in *" eb.probe "*) poweroff -f ;; esac
for m in /mods/*.ko; do insmod "$m" 2>/dev/null; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if ! mount -t ext4 -o rw /dev/vda /root; then
	echo "EB_INITRD: cannot mount /dev/vda" >/dev/console
	poweroff -f
fi
umount /proc /sys
mount --move /dev /root/dev
exec switch_root /root /sbin/init
EOF
chmod 0755 "$tmp/init"
(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -9) >"$out"
