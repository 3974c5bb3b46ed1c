#!/bin/bash
# SPDX-License-Identifier: MIT
# ChaosKey and Alea appearing: two dummy_hcd + configfs gadgets with a SourceSink function (a
# bulk-in endpoint, which the kernel's chaoskey driver binds to) and the IDs 1d50:60c6 (ChaosKey)
# and 12d8:0001 (Araneus Alea I) each get a /dev/chaoskeyN from the driver, and each must start
# one eb-source-stream@chaoskeyN.service; unplugging one stops its instance only.
# What it proves: the driver's usbmisc device reaches the rule (hw_random exists already and
# gets no event), one instance per device, BindsTo= on unplug, and eb-source-stream reading the
# node with the right type. What it does not: the gadgets send zeros (SourceSink pattern 0), not
# noise, so the health tests are expected to quarantine them and nothing is credited: a real
# key is needed for credit.
# order: 56
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 9 (ChaosKey and Alea) not landed"
need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket -- "issue 'core slice' not landed"
need_program eb-source-stream "$landed"
need lib/systemd/system/eb-source-stream@.service -- "$landed"
[[ -n $(rules_mentioning 'chaoskey') ]] || skip "no udev rule names /dev/chaoskey*: $landed"
checks_done

diag 'systemctl list-units --all --no-pager "eb-source-stream@*"'
diag 'ls -l /dev/chaoskey* /sys/class/usbmisc; for d in /dev/chaoskey*; do udevadm info -q property "$d"; done'
diag 'journalctl -b --no-pager -n 60 -u "eb-source-stream@chaoskey*"; dmesg | grep -i -E "chaoskey|dummy|gadget" | tail -n 20'

ids=("1d50 60c6 Altus-Metrum ChaosKey chaoskey" "12d8 0001 Araneus Alea alea")
# dev N on|off: plugs (creates) or unplugs fake device N on dummy_udc.N.
dev() {
	local g=/sys/kernel/config/usb_gadget/ebchaos$1 vid pid maker product
	read -r vid pid maker product _ <<<"${ids[$1]}"
	if [[ $2 == on ]]; then
		guest "set -e
			modprobe dummy_hcd num=2; modprobe libcomposite; modprobe usb_f_ss_lb; modprobe chaoskey
			mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
			mkdir -p $g; cd $g
			echo 0x$vid >idVendor; echo 0x$pid >idProduct
			mkdir -p strings/0x409 configs/c.1 functions/SourceSink.0
			echo '$maker' >strings/0x409/manufacturer; echo '$product' >strings/0x409/product
			echo EBCHAOS0$1 >strings/0x409/serialnumber
			echo 0 >functions/SourceSink.0/pattern
			echo 512 >functions/SourceSink.0/bulk_buflen
			ln -sf $g/functions/SourceSink.0 configs/c.1/
			echo dummy_udc.$1 >UDC" >/dev/null
	else
		guest "g=$g; [ -d \$g ] || exit 0; echo '' >\$g/UDC 2>/dev/null || true
			rm -f \$g/configs/c.1/SourceSink.0; rmdir \$g/configs/c.1 \$g/functions/SourceSink.0 \$g/strings/0x409 \$g" >/dev/null
	fi
}
trap 'dev 0 off || true; dev 1 off || true; _eb_scenario_exit; _eb_host_exit' EXIT

# node_of N: /dev/chaoskeyX of fake device N, found by the serial number of the USB device above.
node_of() {
	vm_exec "udevadm settle --timeout=30; for d in /sys/class/usbmisc/chaoskey*; do
		grep -qx EBCHAOS0$1 \$d/device/../serial 2>/dev/null && echo \${d##*/}; done; true"
}
# A source whose reads the driver fails restarts (activating): started all the same.
units() { vm_exec "systemctl list-units --no-legend --plain --state=active,activating 'eb-source-stream@chaoskey*' | awk '{ print \$1 }'"; }
up() { printf "systemctl show -P ActiveState '%s' | grep -qxE 'active|activating'" "$1"; }

broker_up >/dev/null

step "plug a ChaosKey and an Alea look-alike"
dev 0 on
dev 1 on
wait_guest 60 '[ "$(ls /sys/class/usbmisc | grep -c chaoskey)" -ge 2 ]' || fail "the chaoskey driver did not make two /dev/chaoskey* within 60 s"
n0=$(node_of 0)
n1=$(node_of 1)
[[ -n $n0 && -n $n1 ]] || fail "could not tell the two chaoskey nodes apart (got '$n0' '$n1')"
guest "ls -l /dev/$n0 /dev/$n1; udevadm info -q property /dev/$n0 | grep -E '^(SUBSYSTEM|DEVNAME|SYSTEMD_WANTS|TAGS)='"

step "one stream source per device"
for n in "$n0" "$n1"; do
	wait_guest 60 "$(up "eb-source-stream@$n.service")" ||
		fail "eb-source-stream@$n.service not started within 60 s of plugging"
done
started=$(units)
(($(wc -l <<<"$started") == 2)) || fail "not exactly one instance per device: $started"
# The source named the kind right, from the USB IDs above the node.
wait_guest 30 "journalctl -b --no-pager -u 'eb-source-stream@$n0.service' | grep -q 'is a Altus Metrum ChaosKey (--type chaoskey)'" ||
	fail "eb-source-stream did not take /dev/$n0 for a ChaosKey"
wait_guest 30 "journalctl -b --no-pager -u 'eb-source-stream@$n1.service' | grep -q 'is a Araneus Alea (--type alea)'" ||
	fail "eb-source-stream did not take /dev/$n1 for an Alea"
# What the gadgets' zeros came to: read, or the driver's read failing. Reported, not judged.
guest "journalctl -b --no-pager -u 'eb-source-stream@chaoskey*' | grep -E 'Health test|Failed to read|hung up' | tail -n 4; true"
report "1d50:60c6 -> eb-source-stream@$n0.service, 12d8:0001 -> eb-source-stream@$n1.service"

step "unplugging one stops its instance only"
dev 0 off
wait_guest 60 "! $(up "eb-source-stream@$n0.service")" ||
	fail "eb-source-stream@$n0.service still active 60 s after its device was unplugged"
vm_exec "$(up "eb-source-stream@$n1.service")" >/dev/null ||
	fail "eb-source-stream@$n1.service stopped although its device is still plugged"
dev 1 off
wait_guest 60 "! $(up "eb-source-stream@$n1.service")" ||
	fail "eb-source-stream@$n1.service still active 60 s after its device was unplugged"
