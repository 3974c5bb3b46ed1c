#!/bin/bash
# SPDX-License-Identifier: MIT
# eb-seed-vsock.service from host to guest: a guest on a CPU without RDRAND or RDSEED, with a
# vhost-vsock device and its key and user as SMBIOS credentials, seeds its kernel from a broker on
# the host (vsock port 55225) before sysinit.target, and the seeder logs that it credited the
# kernel before it was initialised. Needs /dev/vhost-vsock on the host, and skips saying so
# without it (boot-virtio shows the same over virtio-serial, which every QEMU has).
# order: 83
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

need usr/sbin/eb-brokerd -- "issue 'core slice' not landed"
need_program eb-sink-kernel "issue 'Sinks' (kernel sink) not landed"
need_program eb-source-file "issue 'core slice' (eb-source-file) not landed"
need lib/systemd/system/eb-seed-vsock.service -- "issue 'Sinks' (seeder units) not landed"
[[ -c /dev/vhost-vsock && -w /dev/vhost-vsock ]] ||
	skip "this host has no usable /dev/vhost-vsock (module vhost_vsock), so a guest cannot reach it over vsock"
checks_done

d=$EB_VM_SCENARIO_DIR
cid=$((1000 + RANDOM % 60000))

step "the guest image: eb-seed-vsock.service enabled"
cp --sparse=always "$EB_VM_ROOTIMG" "$d/seed.img"
for p in /etc/systemd/system /etc/systemd/system/sysinit.target.wants; do
	debugfs -w -R "mkdir $p" "$d/seed.img" >/dev/null 2>&1 || true
done
debugfs -w -R "symlink /etc/systemd/system/sysinit.target.wants/eb-seed-vsock.service /usr/lib/systemd/system/eb-seed-vsock.service" \
	"$d/seed.img" >/dev/null 2>&1 || fail "debugfs could not enable eb-seed-vsock.service"
export EB_VM_ROOTIMG=$d/seed.img

step "host: a broker on vsock port 55225 with the guest's user, filled"
key=$(head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n')
mkdir -p "$d/host"
printf '%s\n' "$key" >"$d/host/vm1.key"
chmod 0600 "$d/host/vm1.key"
printf '\n[user vm1]\nrole = sink\nkey-file = %s\n' "$d/host/vm1.key" >"$d/host/users.conf"
host_broker "$d/host" "vsock://any:55225"
head -c 65536 /dev/urandom | "$(host_program eb-source-file)" -b "$HOST_BROKER" --credit-per-byte 8 - ||
	fail "could not fill the host broker"

step "the guest, CID $cid"
own_vm "$d/vm" --cpu qemu64,-rdrand,-rdseed -- -device "vhost-vsock-pci,guest-cid=$cid" \
	-smbios "type=11,value=io.systemd.credential:eb.key=$key" \
	-smbios "type=11,value=io.systemd.credential:eb.user=vm1"
diag 'systemctl status --no-pager eb-seed-vsock.service; journalctl -b --no-pager -o short-monotonic -t eb-sink-kernel -u eb-seed-vsock.service'
crng=$(guest "dmesg | sed -n 's/^\[ *\([0-9.]*\)\] random: crng init done.*/\1/p' | head -n 1")
log=$(guest 'journalctl -b --no-pager -o short-monotonic -t eb-sink-kernel')
echo "$log"
line=$(grep -m1 'Credited [0-9]* bits from vsock://2' <<<"$log") ||
	fail "eb-seed-vsock.service logged no 'Credited N bits from vsock://2...'"
grep -q 'was not initialised before them and is now' <<<"$line" ||
	fail "the seeder did not credit the kernel before it was initialised: $line"
report "crng init done at ${crng:-?} s; ${line#*eb-sink-kernel*: }"
