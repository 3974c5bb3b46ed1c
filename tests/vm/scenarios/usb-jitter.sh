#!/bin/bash
# SPDX-License-Identifier: MIT
# USB timing jitter: QEMU's emulated USB keyboard and tablet on the guest's xHCI controller give
# eb-source-usb GET_STATUS round trips to time. A capture (--dump-raw, kept as usb-jitter.raw in
# the scenario's work folder for tests/tools/min-entropy) is credited by the broker, and the
# installed eb-source-usb.service (root's uid with no capabilities, group eb-source) runs and raises
# the pool level. What it proves: the program and its unit work against real usbfs and libusb in
# a guest with systemd; the timings are an emulated bus's, not hardware's, so the H claimed for
# hardware is not judged here.
# order: 52
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 9 (eb-source-usb) not landed"
need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket -- "issue 'core slice' not landed"
need_program eb-source-usb "$landed"
need lib/systemd/system/eb-source-usb.service -- "$landed"
checks_done

diag 'lsusb; lsusb -t'
diag 'systemctl status --no-pager eb-source-usb.service'
diag 'journalctl -b --no-pager -n 40 -u eb-source-usb.service'

unplug() {
	vm_mon 'device_del ebkbd' >/dev/null 2>&1 || true
	vm_mon 'device_del ebtablet' >/dev/null 2>&1 || true
	vm_exec -t 30 'systemctl stop eb-source-usb.service' >/dev/null 2>&1 || true
}
trap 'unplug; _eb_scenario_exit; _eb_host_exit' EXIT

inv=$(broker_up)

step "plug an emulated keyboard and tablet into the xHCI controller"
vm_mon 'device_add usb-kbd,bus=xhci.0,id=ebkbd' || fail "QEMU refused device_add usb-kbd"
vm_mon 'device_add usb-tablet,bus=xhci.0,id=ebtablet' || fail "QEMU refused device_add usb-tablet"
# Devices other than root hubs (ID 1d6b:*).
wait_guest 60 '[ "$(lsusb | grep -vc " 1d6b:")" -ge 2 ]' || fail "the guest did not see two USB devices within 60 s"
guest 'lsusb'

step "a capture of 20000 samples, credited"
samples=20000
out=$(guest -t 600 "start=\$(date +%s%N)
	eb-source-usb -b unix:/run/entropy-broker/broker.sock --samples $samples --dump-raw /mnt/host/usb-jitter.raw 2>&1
	echo \"elapsed_ms \$(( (\$(date +%s%N) - start) / 1000000 ))\"
	stat -c 'size %s' /mnt/host/usb-jitter.raw")
printf '%s\n' "$out"
grep -q "Timing USB device" <<<"$out" || fail "eb-source-usb timed no device"
m=$(grep -oE 'Took [0-9]+ samples \([0-9]+ admitted, [0-9]+ health-test alarm\(s\)\), donated [0-9]+ bytes, [0-9]+ bits credited' <<<"$out") ||
	fail "eb-source-usb did not report a donation: $(tail -n 3 <<<"$out")"
credited=$(grep -oE '[0-9]+ bits credited' <<<"$m" | grep -oE '^[0-9]+')
alarms=$(grep -oE '[0-9]+ health-test alarm' <<<"$m" | grep -oE '^[0-9]+')
((credited > 0)) || fail "the capture was credited nothing: $m"
grep -qx "size $samples" <<<"$out" || fail "--dump-raw does not hold $samples samples"
mkdir -p "$EB_VM_SCENARIO_DIR"
cp "$EB_VM_DIR/share/usb-jitter.raw" "$EB_VM_SCENARIO_DIR/usb-jitter.raw"
ms=$(grep -oE '^elapsed_ms [0-9]+' <<<"$out" | grep -oE '[0-9]+$')
report "capture: $m in $ms ms ($((samples * 1000 / (ms + 1))) samples/s)"
[[ $alarms == 0 ]] || report "($alarms health-test alarm(s) in the capture)"

step "eb-source-usb.service raises the pool level"
before=$(pool_bits_max "$inv")
guest 'systemctl start eb-source-usb.service'
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 120 '[ "$(journalctl _SYSTEMD_INVOCATION_ID='"$inv"' -o json --no-pager | jq -r "select(.EB_POOL_BITS != null) | .EB_POOL_BITS" | sort -n | tail -n 1)" -gt '"$before"' ]' ||
	fail "EB_POOL_BITS stayed at or below $before for 120 s with eb-source-usb.service running"
after=$(pool_bits_max "$inv")
guest 'systemctl is-active eb-source-usb.service; journalctl -b --no-pager -u eb-source-usb.service | grep -E "Timing USB|health" | tail -n 5'
report "eb-source-usb.service: pool level $before -> $after bits"

step "unplugged devices are dropped"
vm_mon 'device_del ebkbd' || fail "QEMU refused device_del"
wait_guest 60 'journalctl -b --no-pager -u eb-source-usb.service | grep -q "No longer timing USB device.*unplugged"' ||
	fail "eb-source-usb.service did not notice the keyboard going within 60 s"
guest 'systemctl is-active eb-source-usb.service' >/dev/null || fail "eb-source-usb.service stopped when one device went"
