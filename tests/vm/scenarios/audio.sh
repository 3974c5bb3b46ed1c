#!/bin/bash
# SPDX-License-Identifier: MIT
# A sound card input an admin tagged as a source donates: snd-aloop's capture side, fed with
# noise from its playback side, tagged ENV{EB_SOURCE}="audio" by a local rule, starts
# eb-source-audio@pcmCnD1c through udev and the pool level rises; untagged PCMs of the same card
# start nothing; unbinding the card's driver (the card going away) stops the source cleanly.
# order: 62
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 'audio and video sources' not landed"
need usr/sbin/eb-brokerd -- "issue 'core slice' not landed"
need_program eb-source-audio "$landed"
need lib/systemd/system/eb-source-audio@.service -- "$landed"
[[ -n $(rules_mentioning eb-source-audio) ]] || skip "no udev rule starts eb-source-audio@: $landed"
checks_done

diag 'systemctl list-units --all --no-pager "eb-source-audio@*"'
diag 'journalctl -b --no-pager -n 40 -u "eb-source-audio@*"'
diag 'cat /proc/asound/cards; ls -l /dev/snd'

units() { vm_exec "systemctl list-units --no-legend --plain --all --state=active,activating 'eb-source-audio@*' | awk '{ print \$1 }'"; }
cleanup() {
	vm_exec 'pkill -x aplay; systemctl stop "eb-source-audio@*"; rm -f /etc/udev/rules.d/65-eb-vm-audio.rules
		udevadm control --reload; modprobe -r snd-aloop' >/dev/null 2>&1 || true
}
trap cleanup EXIT

step "broker up; a local rule tags the loopback card's capture PCM 1"
guest 'systemctl stop "eb-source-*" 2>/dev/null; modprobe -r snd-aloop 2>/dev/null; true' >/dev/null
inv=$(broker_up)
before=$(pool_bits_max "$inv")
guest 'printf "%s\n" "SUBSYSTEM==\"sound\", KERNEL==\"pcmC*D1c\", ATTRS{id}==\"Loopback\", ENV{EB_SOURCE}=\"audio\"" >/etc/udev/rules.d/65-eb-vm-audio.rules
	udevadm control --reload'
[[ -z $(units) ]] || fail "an audio source runs before any card was tagged: $(units)"

step "modprobe snd-aloop: udev starts eb-source-audio@ for the tagged PCM only"
card=$(guest 'modprobe snd-aloop; udevadm settle; for c in /proc/asound/card*/id; do
	[ "$(cat $c)" = Loopback ] && n=${c#/proc/asound/card} && echo ${n%/id}; done')
[[ -n $card ]] || fail "snd-aloop gave no Loopback card"
want=eb-source-audio@pcmC${card}D1c.service
wait_guest 60 "systemctl is-active --quiet $want" || fail "$want did not start within 60 s of modprobe"
started=$(units)
echo "started: $started"
[[ $started == "$want" ]] || fail "expected only $want, got: $started"

step "noise into the loopback's playback side: the pool level rises"
# aplay at the same format, channels and rate as the source's defaults (s16le, 2, 48000): the
# loopback's two ends must agree.
guest "nohup sh -c 'aplay -q -D hw:$card,0,0 -f S16_LE -c 2 -r 48000 -t raw /dev/urandom' >/dev/null 2>&1 &"
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 90 '[ "$(journalctl _SYSTEMD_INVOCATION_ID='"$inv"' -o json --no-pager | jq -r "select(.EB_POOL_BITS != null) | .EB_POOL_BITS" | sort -n | tail -n 1)" -gt '"$before"' ]' ||
	fail "EB_POOL_BITS stayed at or below $before for 90 s with $want fed noise"
after=$(pool_bits_max "$inv")
guest "journalctl -b --no-pager -o cat -u '$want' | head -n 12"
report "$want: pool level $before -> $after bits from snd-aloop fed /dev/urandom"

step "the card goes (driver unbound): the source stops, not failed"
guest 'pkill -x aplay; true' >/dev/null
guest "echo snd_aloop.0 >/sys/bus/platform/drivers/snd_aloop/unbind"
wait_guest 60 "! systemctl is-active --quiet $want" || fail "$want still active 60 s after the card went"
res=$(vm_exec "systemctl show -P Result $want; systemctl show -P ExecMainStatus $want")
echo "$res"
[[ $(head -n 1 <<<"$res") == success ]] || fail "$want did not stop cleanly: $res"
report "$want stopped when the card went: Result=$(head -n 1 <<<"$res")"
