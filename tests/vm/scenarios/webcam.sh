#!/bin/bash
# SPDX-License-Identifier: MIT
# Cameras are opt-in: a vivid device tagged ENV{EB_SOURCE}="v4l" by a local rule starts
# eb-source-v4l@videoN through udev; with the rule removed and the device plugged again, nothing
# starts. (vivid's picture is a test pattern: no-entropy shows it earns no credit.)
# order: 64
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 'audio and video sources' not landed"
need usr/sbin/eb-brokerd -- "issue 'core slice' not landed"
need_program eb-source-v4l "$landed"
need lib/systemd/system/eb-source-v4l@.service -- "$landed"
[[ -n $(rules_mentioning eb-source-v4l) ]] || skip "no udev rule starts eb-source-v4l@: $landed"
checks_done

diag 'systemctl list-units --all --no-pager "eb-source-v4l@*"'
diag 'journalctl -b --no-pager -n 40 -u "eb-source-v4l@*"'
diag 'for v in /sys/class/video4linux/*; do echo "$v: $(cat $v/name)"; done; udevadm info /dev/video0'

units() { vm_exec "systemctl list-units --no-legend --plain --all --state=active,activating 'eb-source-v4l@*' | awk '{ print \$1 }'"; }
rule=/etc/udev/rules.d/65-eb-vm-webcam.rules
cleanup() {
	vm_exec "systemctl stop 'eb-source-v4l@*'; rm -f $rule; udevadm control --reload; modprobe -r vivid" >/dev/null 2>&1 || true
}
trap cleanup EXIT
vivid_node() {
	guest 'modprobe vivid n_devs=1 node_types=0x1; udevadm settle
		for v in /sys/class/video4linux/video*; do grep -q vivid $v/name && echo ${v##*/}; done | head -n 1'
}

step "broker up; a local rule tags vivid's capture node"
guest 'systemctl stop "eb-source-*" 2>/dev/null; modprobe -r vivid 2>/dev/null; true' >/dev/null
broker_up >/dev/null
guest "printf '%s\n' 'SUBSYSTEM==\"video4linux\", ENV{ID_V4L_PRODUCT}==\"vivid\", ENV{EB_SOURCE}=\"v4l\"' >$rule; udevadm control --reload"

step "modprobe vivid: udev starts eb-source-v4l@ for it"
dev=$(vivid_node)
[[ -n $dev ]] || fail "vivid gave no video device"
want=eb-source-v4l@$dev.service
wait_guest 60 "systemctl is-active --quiet $want" || fail "$want did not start within 60 s of modprobe"
[[ $(units) == "$want" ]] || fail "expected only $want, got: $(units)"
# It opened the device and read frames: its own log says what it found.
wait_guest 60 "journalctl -b -o cat -u $want | grep -q 'samples a frame'" ||
	fail "$want never described the camera"
guest "journalctl -b --no-pager -o cat -u $want | head -n 8"
report "tagged vivid $dev: $want started: $(vm_exec "journalctl -b -o cat -u $want | grep -m1 'samples a frame'")"

step "the rule removed, vivid plugged again: nothing starts"
guest "systemctl stop $want; rm -f $rule; udevadm control --reload; modprobe -r vivid"
guest "systemctl reset-failed 'eb-source-v4l@*' 2>/dev/null; true" >/dev/null
dev=$(vivid_node)
[[ -n $dev ]] || fail "vivid gave no video device the second time"
# The device is there and udev has finished with it (settled in vivid_node); systemd had its
# chance: a started unit would be active or activating by now, or have left a job.
wait_guest 30 "systemctl is-active --quiet dev-$dev.device || [ -e /dev/$dev ]" || fail "/dev/$dev did not appear"
guest 'udevadm settle; systemctl list-jobs --no-legend' >/dev/null
[[ -z $(units) ]] || fail "an untagged camera started $(units)"
guest "udevadm info /dev/$dev | grep -E 'ID_V4L_CAPABILITIES|EB_SOURCE|SYSTEMD_WANTS' || true"
report "untagged vivid $dev: no eb-source-v4l@ unit"
