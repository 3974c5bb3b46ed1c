#!/bin/bash
# SPDX-License-Identifier: MIT
# QEMU itself as an EGD client: the guest's virtio-rng is backed by "-object rng-egd" on the
# host's eb-sink-egd socket, which draws from a host broker. Reading the guest's /dev/hwrng
# returns bytes, and the host broker's bits_out shows they passed through it.
# order: 70
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

need usr/sbin/eb-brokerd -- "issue 'core slice' not landed"
need_program eb-sink-egd "issue 'Sinks' (EGD sink) not landed"
need_program eb-source-file "issue 'core slice' (eb-source-file) not landed"
need_program eb-brokerctl "issue 'core slice' (eb-brokerctl) not landed"
checks_done

d=$EB_VM_SCENARIO_DIR
ctl=$(host_program eb-brokerctl)
step "host broker, filled from /dev/urandom"
host_broker "$d/host"
head -c 131072 /dev/urandom | "$(host_program eb-source-file)" -b "$HOST_BROKER" --credit-per-byte 8 - ||
	fail "could not fill the host broker"
"$ctl" -b "$HOST_BROKER" status
out0=$("$ctl" -b "$HOST_BROKER" status --json | jq -r .bits_out)

step "eb-sink-egd on the host"
"$(host_program eb-sink-egd)" -b "$HOST_BROKER" -l "unix:$d/egd.sock" >"$d/egd.log" 2>&1 &
_EB_HOST_PIDS+=($!)
for ((i = 0; i < 50; i++)); do
	[[ -S $d/egd.sock ]] && break
	sleep 0.1
done
[[ -S $d/egd.sock ]] || fail "eb-sink-egd did not listen: $(tail -n 3 "$d/egd.log" | tr '\n' ' ')"

step "a guest whose virtio-rng is QEMU's rng-egd on that socket"
own_vm "$d/vm" -- -chardev "socket,id=egdc,path=$d/egd.sock" -object rng-egd,id=egd0,chardev=egdc \
	-device virtio-rng-pci,rng=egd0,id=vrngegd
guest 'cat /sys/class/misc/hw_random/rng_current'
n=$(guest 'systemctl stop "eb-source-stream@*" 2>/dev/null; head -c 8192 /dev/hwrng | wc -c')
((n == 8192)) || fail "read $n of 8192 bytes from the guest's /dev/hwrng"
out1=$("$ctl" -b "$HOST_BROKER" status --json | jq -r .bits_out)
echo "host broker bits_out: $out0 -> $out1"
((out1 - out0 >= 8192 * 8)) || fail "the host broker handed out only $((out1 - out0)) bits while the guest read 8192 bytes"
report "guest read 8192 bytes of /dev/hwrng; host broker bits_out $out0 -> $out1"
