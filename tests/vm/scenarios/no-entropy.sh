#!/bin/bash
# SPDX-License-Identifier: MIT
# Devices without entropy get no credit: vivid's webcam frames are a fixed test pattern and
# snd-dummy captures zeros. Tagged as sources (their template units started for the device, as
# an admin's tag would), the health tests must refuse them: the pool level does not rise and
# the source says so in the journal.
# order: 60
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 'audio and video sources' not landed"
need usr/sbin/eb-brokerd -- "issue 'core slice' not landed"
have=()
if program eb-source-audio >/dev/null && installed lib/systemd/system/eb-source-audio@.service; then
	have+=(audio)
fi
if program eb-source-v4l >/dev/null && installed lib/systemd/system/eb-source-v4l@.service; then
	have+=(v4l)
fi
((${#have[@]})) || skip "eb-source-audio and eb-source-v4l (with their @.service units) not installed: $landed"
checks_done

diag 'systemctl list-units --all --no-pager "eb-source-*"'
diag 'journalctl -b --no-pager -n 40 -u "eb-source-audio@*" -u "eb-source-v4l@*"'
rule=/etc/udev/rules.d/65-eb-vm-no-entropy.rules
cleanup() {
	vm_exec "systemctl stop 'eb-source-audio@*' 'eb-source-v4l@*'; rm -f $rule; udevadm control --reload
		modprobe -r snd-dummy vivid" >/dev/null 2>&1 || true
}
trap cleanup EXIT

step "broker up, nothing else donating; local rules tag the Dummy card and vivid as sources"
guest 'systemctl stop "eb-source-*" 2>/dev/null; modprobe -r snd-dummy vivid 2>/dev/null; true' >/dev/null
inv=$(broker_up)
guest "printf '%s\n' 'SUBSYSTEM==\"sound\", KERNEL==\"pcmC*D0c\", ATTRS{id}==\"Dummy\", ENV{EB_SOURCE}=\"audio\"' \
	'SUBSYSTEM==\"video4linux\", ENV{ID_V4L_PRODUCT}==\"vivid\", ENV{EB_SOURCE}=\"v4l\"' >$rule
	udevadm control --reload"
# The pool level the broker reports while nobody donates: its first status entries.
wait_guest 30 "journalctl _SYSTEMD_INVOCATION_ID=$inv -o json --no-pager | jq -e 'select(.EB_POOL_BITS != null)' >/dev/null" ||
	fail "eb-brokerd logged no pool level within 30 s"
before=$(pool_bits_max "$inv")

units=()
for kind in "${have[@]}"; do
	case $kind in
	audio)
		step "snd-dummy: a capture device that records zeros"
		dev=$(guest 'modprobe snd-dummy; udevadm settle; for c in /proc/asound/card*/id; do
			[ "$(cat $c)" = Dummy ] && n=${c#/proc/asound/card} && echo pcmC${n%/id}D0c; done')
		[[ -n $dev ]] || fail "snd-dummy gave no capture device"
		;;
	v4l)
		step "vivid: a webcam showing a fixed test pattern"
		dev=$(guest 'modprobe vivid n_devs=1 node_types=0x1; udevadm settle
			for v in /sys/class/video4linux/video*; do grep -q vivid $v/name && echo ${v##*/}; done | head -n 1')
		[[ -n $dev ]] || fail "vivid gave no video device"
		;;
	esac
	u=eb-source-$kind@$dev.service
	wait_guest 60 "systemctl is-active --quiet '$u'" || fail "$u was not started by its tag within 60 s"
	units+=("$u")
done

step "the health tests give them no credit, and each says so once"
# Each source has run its start-up test and raised its alarm: wait for both alarms, then for
# more of the broker's status entries (every 5 s), long enough for credit to show if any came.
alarm=MESSAGE_ID=3c2022901111464f90e9aa4e20d64086
for u in "${units[@]}"; do
	wait_guest 90 "journalctl _SYSTEMD_INVOCATION_ID=\$(systemctl show -P InvocationID '$u') $alarm -o cat | grep -q ." ||
		fail "$u raised no health-test alarm within 90 s"
done
status_count() { vm_exec "journalctl _SYSTEMD_INVOCATION_ID=$inv -o json --no-pager | jq -r 'select(.EB_POOL_BITS != null) | .EB_POOL_BITS' | wc -l"; }
n0=$(status_count)
wait_guest 60 "[ \$(journalctl _SYSTEMD_INVOCATION_ID=$inv -o json --no-pager | jq -r 'select(.EB_POOL_BITS != null) | .EB_POOL_BITS' | wc -l) -ge $((n0 + 3)) ]" ||
	fail "eb-brokerd logged fewer than 3 status entries in 60 s"
after=$(pool_bits_max "$inv")
in=$(pool_bits_max "$inv" EB_BITS_IN)
echo "pool bits $before -> $after, bits in: $in"
((after <= before)) || fail "the pool rose from $before to $after bits while only ${units[*]} donated"
for u in "${units[@]}"; do
	log=$(vm_exec "journalctl -b --no-pager -u '$u' -o cat")
	echo "$log"
	# This run of the unit only: another scenario may have run the same instance earlier.
	id=$(vm_exec "systemctl show -P InvocationID '$u'")
	n=$(vm_exec "journalctl _SYSTEMD_INVOCATION_ID=$id $alarm -o cat | wc -l")
	((n == 1)) || fail "$u logged $n health-test alarms, not one"
	vm_exec "systemctl is-active --quiet '$u'" || fail "$u did not keep running in quarantine"
	report "$u: no credit, one alarm: $(vm_exec "journalctl _SYSTEMD_INVOCATION_ID=$id $alarm -o cat")"
done
