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

step "broker up, nothing else donating"
guest 'systemctl stop "eb-source-*" 2>/dev/null; true' >/dev/null
inv=$(broker_up)
sleep 6
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
	guest "systemctl start '$u'; sleep 1; systemctl status --no-pager '$u' | head -n 5" || true
	units+=("$u")
done

step "the health tests give them no credit"
sleep 15
after=$(pool_bits_max "$inv")
in=$(pool_bits_max "$inv" EB_BITS_IN)
echo "pool bits $before -> $after, bits in: $in"
((after <= before)) || fail "the pool rose from $before to $after bits while only ${units[*]} donated"
for u in "${units[@]}"; do
	log=$(vm_exec "journalctl -b --no-pager -u '$u' -o cat")
	echo "$log"
	grep -qiE 'health|repetition|proportion|stuck|no credit|not credited' <<<"$log" ||
		fail "$u says nothing about failing its health tests"
	report "$u: no credit; $(grep -iE -m1 'health|repetition|proportion|stuck|credit' <<<"$log")"
done
guest "systemctl stop ${units[*]}" >/dev/null
