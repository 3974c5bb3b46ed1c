#!/bin/bash
# SPDX-License-Identifier: MIT
# Early-boot seeding. On a CPU without RDRAND (qemu64) the kernel really waits for entropy:
#   A  a boot without any seeder: time to "random: crng init done";
#   B  the network variant: eb-seed.service, its key and user passed as systemd credentials by
#      QEMU (SMBIOS type 11), the broker on the host reached through user-mode networking
#      (guestfwd runs "socat - TCP:127.0.0.1:PORT" per connection; a plain chardev target
#      would be one connection made at QEMU start), no real network: eb-sink-kernel credits
#      the kernel (after network-online.target, so the crng times are only reported);
#   C  vsock inside one guest (vsock_loopback): eb-sink-kernel --oneshot against a broker
#      listening on vsock in the same guest;
#   D  host-to-guest vsock (eb-seed-vsock.service, credited before sysinit.target) is the
#      boot-vsock scenario, and virtio-serial (eb-seed-virtio.service) is boot-virtio.
# order: 80
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 'Sinks' (kernel sink and seeder units) not landed"
need usr/sbin/eb-brokerd -- "issue 'core slice' not landed"
need_program eb-sink-kernel "$landed"
need lib/systemd/system/eb-seed.service lib/systemd/system/eb-seed-vsock.service -- "$landed"
checks_done

d=$EB_VM_SCENARIO_DIR
sink=$(program eb-sink-kernel)
# crng_time: seconds from kernel start to "crng init done" in the current guest.
crng_time() { guest "dmesg | sed -n 's/^\[ *\([0-9.]*\)\] random: crng init done.*/\1/p' | head -n 1"; }

step "A: no seeder"
own_vm "$d/a" --cpu qemu64 --append "systemd.mask=eb-seed.service systemd.mask=eb-seed-vsock.service"
ta=$(crng_time)
[[ -n $ta ]] || fail "boot A: no 'crng init done' in dmesg"
guest 'grep -o "rdrand" /proc/cpuinfo | head -n 1 | grep -q . && echo "CPU has RDRAND!" || echo "no RDRAND"'
vm_stop "$d/a"

step "B: eb-seed.service over user-mode networking, key as an SMBIOS credential"
port=$((20000 + RANDOM % 20000))
key=$(head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n')
mkdir -p "$d/host"
printf '%s\n' "$key" >"$d/host/vm1.key"
chmod 0600 "$d/host/vm1.key"
printf '\n[user vm1]\nrole = sink\nkey-file = %s\n' "$d/host/vm1.key" >"$d/host/users.conf"
host_broker "$d/host" "tcp://127.0.0.1:$port"
head -c 65536 /dev/urandom | "$(host_program eb-source-file)" -b "$HOST_BROKER" --credit-per-byte 8 - ||
	fail "could not fill the host broker"
printf 'EB_BROKER=tcp://10.0.2.100:55225\nEB_USER=vm1\n' >"$d/eb-seed.env"
image_with "$d/seed.img" "$d/eb-seed.env" /etc/entropy-broker/eb-seed.env
EB_VM_ROOTIMG=$d/seed.img own_vm "$d/b" --cpu qemu64 \
	--append "systemd.wants=systemd-networkd.service systemd.wants=systemd-networkd-wait-online.service systemd.wants=eb-seed.service systemd.mask=eb-seed-vsock.service" \
	-- -netdev "user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:55225-cmd:socat - TCP:127.0.0.1:$port" \
	-device virtio-net-pci,netdev=n0 \
	-smbios "type=11,value=io.systemd.credential:eb.key=$key" \
	-smbios "type=11,value=io.systemd.credential:eb.user=vm1"
diag 'systemctl status --no-pager eb-seed.service; journalctl -b --no-pager -u eb-seed.service -u systemd-networkd.service | tail -n 30'
wait_guest 60 '[ "$(systemctl show -P Result eb-seed.service)" = success ] && [ "$(systemctl show -P ActiveState eb-seed.service)" != activating ]' ||
	fail "eb-seed.service did not succeed"
tb=$(crng_time)
log=$(guest 'journalctl -b --no-pager -o short-monotonic -u eb-seed.service')
echo "$log"
credited=$(grep -m1 -o 'Credited [0-9]* bits from [^ ]*' <<<"$log") ||
	fail "eb-seed.service succeeded but logged no 'Credited N bits from ...'"
vm_stop "$d/b"
_EB_DIAG=()
# The network variant runs after network-online.target, normally after crng init: its boot
# times are reported, not compared. Crediting before sysinit.target is the vsock variant's (D).
report "crng init done: ${ta} s without a seeder (A), ${tb:-never} s in B, where eb-seed.service: $credited"

step "C: vsock inside the guest (vsock_loopback)"
own_vm "$d/c" --cpu qemu64 --append "systemd.mask=eb-seed.service systemd.mask=eb-seed-vsock.service"
broker_test_config
if installed lib/systemd/system/eb-brokerd-vsock.socket; then
	diag 'systemctl status --no-pager eb-brokerd.service eb-brokerd-vsock.socket; journalctl -b --no-pager -u eb-brokerd.service | tail -n 20'
	# vsock carries TLS: the sink needs a user and its key, as a guest would get from its host.
	guest "mkdir -p /etc/entropy-broker/keys
		head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n' >/etc/entropy-broker/keys/vm1.key
		chmod 0600 /etc/entropy-broker/keys/vm1.key; chown entropy-broker /etc/entropy-broker/keys/vm1.key
		printf '\n[user vm1]\nrole = sink\nkey-file = /etc/entropy-broker/keys/vm1.key\n' >>/etc/entropy-broker/eb-brokerd.conf"
	guest 'modprobe vsock_loopback && systemctl restart eb-brokerd.socket eb-brokerd-vsock.socket && systemctl is-active eb-brokerd-vsock.socket'
	guest -t 60 "head -c 4096 /dev/urandom | $(program eb-source-file) -b unix:/run/entropy-broker/broker.sock --credit-per-byte 8 -" >/dev/null
	out=$(vm_exec "$sink --oneshot --timeout=30 --broker=vsock://1:55225 --user vm1 --key-file /etc/entropy-broker/keys/vm1.key") ||
		fail "eb-sink-kernel over vsock loopback failed: $out"
	echo "$out"
	report "vsock loopback: eb-sink-kernel --oneshot --broker=vsock://1:55225 succeeded"
else
	report "vsock loopback: eb-brokerd-vsock.socket not installed, left out"
fi
vm_stop "$d/c"
_EB_DIAG=()

# D, host-to-guest vsock (eb-seed-vsock.service), is the boot-vsock scenario: it runs where
# /dev/vhost-vsock exists and skips with that reason elsewhere.
report "host vsock: see the boot-vsock scenario"
