#!/bin/bash
# SPDX-License-Identifier: MIT
# Hotplug of a hardware RNG: "device_add virtio-rng-pci" through the QEMU monitor makes the
# udev rule start the stream source for that device; the pool level rises in the journal
# (EB_POOL_BITS= of eb-brokerd); "device_del" stops the source again (BindsTo=).
# order: 40
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 'stream source and udev rules' not landed"
need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket -- "issue 'core slice' not landed"
need_program eb-source-stream "$landed"
need lib/systemd/system/eb-source-stream@.service -- "$landed"
[[ -n $(rules_mentioning eb-source-stream) ]] || skip "no udev rule starts eb-source-stream@: $landed"
checks_done

diag 'systemctl list-units --all --no-pager "eb-source-*"'
diag 'journalctl -b --no-pager -n 40 -u "eb-source-stream@*" -u eb-brokerd.service'
diag 'udevadm info --export-db | grep -B3 -A12 -i "virtio:d00000004" | head -n 60'

units() { vm_exec "systemctl list-units --no-legend --plain --state=active 'eb-source-stream@*' | awk '{ print \$1 }'"; }

step "broker up, no stream source yet"
inv=$(broker_up)
before=$(pool_bits_max "$inv")
guest 'cat /sys/class/misc/hw_random/rng_current'
[[ -z $(units) ]] || fail "a stream source runs before any RNG was plugged: $(units)"

step "device_add virtio-rng-pci"
vm_mon 'device_add virtio-rng-pci,rng=rng0,id=ebvrng' || fail "QEMU refused device_add virtio-rng-pci"
wait_guest 60 '[ -n "$(systemctl list-units --no-legend --state=active "eb-source-stream@*")" ]' ||
	fail "no eb-source-stream@ unit started within 60 s of the hotplug"
started=$(units)
echo "started: $started"
(($(wc -l <<<"$started") == 1)) || fail "more than one stream source for one RNG: $started"
guest 'cat /sys/class/misc/hw_random/rng_current'

step "the pool level rises in the journal"
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 60 '[ "$(journalctl _SYSTEMD_INVOCATION_ID='"$inv"' -o json --no-pager | jq -r "select(.EB_POOL_BITS != null) | .EB_POOL_BITS" | sort -n | tail -n 1)" -gt '"$before"' ]' ||
	fail "EB_POOL_BITS in eb-brokerd's journal stayed at or below $before for 60 s with $started running"
after=$(pool_bits_max "$inv")
guest "journalctl _SYSTEMD_INVOCATION_ID=$inv -o verbose --output-fields=MESSAGE,EB_POOL_BITS,EB_SOURCES --no-pager -n 2"
report "pool level $before -> $after bits with $started"

step "device_del stops the source"
vm_mon 'device_del ebvrng' || fail "QEMU refused device_del"
wait_guest 60 '[ -z "$(systemctl list-units --no-legend --state=active "eb-source-stream@*")" ]' ||
	fail "$started still active 60 s after device_del"
guest "systemctl show -p ActiveState -p Result '$started'"
