#!/bin/bash
# SPDX-License-Identifier: MIT
# A ComScire QNG plugged in: QEMU's usb-serial (an FTDI FT232 at 0403:6001) with serial=QWR2EB01,
# hotplugged through the monitor, its chardev on a host-side emulator of the QNG's protocol
# (tests/vm/lib/qng-emulator.py) that answers the commands and streams random bytes. udev must
# start eb-source-qng@ for it, which takes the chip from ftdi_sio and is credited; a second
# usb-serial with an ordinary serial number must stay with ftdi_sio and start nothing. Then the
# emulator's bad-statistics bit, and after it a stuck stream, must each raise one alarm with no
# credit while it lasts; unplugging the QNG ends the unit cleanly.
# order: 57
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 30 (ComScire QNG source) not landed"
need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket -- "issue 'core slice' not landed"
need_program eb-source-qng "$landed"
need_program eb-brokerctl "issue 'core slice' (eb-brokerctl) not landed"
need lib/systemd/system/eb-source-qng@.service -- "$landed"
[[ -n $(rules_mentioning 'QWR2') ]] || skip "no udev rule names a QNG's serial (QWR2...): $landed"
command -v python3 >/dev/null || skip "python3 (for the QNG emulator) missing on the host"
checks_done

dir=$EB_VM_SCENARIO_DIR
sock=$dir/qng.sock
serial=QWR2EB01
alarm=MESSAGE_ID=3c2022901111464f90e9aa4e20d64086
readmitted=MESSAGE_ID=b319abeea24c4c83b1fec169e0cea9af

diag 'systemctl list-units --all --no-pager "eb-source-qng@*"'
diag 'for d in /sys/bus/usb/devices/*; do [ -f $d/serial ] && echo "$d $(cat $d/idVendor):$(cat $d/idProduct) $(cat $d/serial)"; done; ls -l /sys/bus/usb/drivers/ftdi_sio/ 2>&1 | tail -n 5'
diag 'journalctl -b --no-pager -n 60 -u "eb-source-qng@*"'

python3 "$EB_VM_LIB/qng-emulator.py" "$sock" "$dir" 8192 >"$dir/emulator.log" 2>&1 &
_EB_HOST_PIDS+=($!)
for ((i = 0; i < 50; i++)); do
	[[ -S $sock ]] && break
	sleep 0.1
done
[[ -S $sock ]] || fail "the QNG emulator did not start: $(cat "$dir/emulator.log")"
mode() { printf '%s\n' "$1" >"$dir/mode"; }
state() { sed -n "s/^$1=//p" "$dir/state"; }
# wait_state KEY MIN SECONDS: until the emulator's counter KEY reaches MIN.
wait_state() {
	local end=$((SECONDS + $3))
	until (($(state "$1") >= $2)); do
		((SECONDS < end)) || return 1
		sleep 0.2
	done
}

unplug() {
	vm_mon 'device_del ebqng0' >/dev/null 2>&1 || true
	vm_mon 'device_del ebplain0' >/dev/null 2>&1 || true
	# The chardevs go once QEMU has let go of the devices.
	for ((i = 0; i < 50; i++)); do
		vm_mon 'chardev-remove qng0' >/dev/null 2>&1 && break
		sleep 0.2
	done
	vm_mon 'chardev-remove plain0' >/dev/null 2>&1 || true
}
trap 'unplug; _eb_scenario_exit; _eb_host_exit' EXIT

# The QNG source's session at the broker: its bits credited.
credited() {
	vm_exec "eb-brokerctl sources --json | jq '[.. | objects | select((.kind? // \"\") | startswith(\"qng \")) | .bits_credited] | add // 0'"
}
unit_alarms() { vm_exec "journalctl _SYSTEMD_INVOCATION_ID=\$(systemctl show -P InvocationID '$1') $alarm -o cat | wc -l"; }

step "broker up; the QNG emulator listening"
# The source's own session is what is measured, so a broker another scenario left running with
# broker_test_config's configuration serves as well as a fresh one, and saves a restart.
vm_exec "systemctl is-active --quiet eb-brokerd.service &&
	grep -q '^; written by tests/vm' /etc/entropy-broker/eb-brokerd.conf" >/dev/null || broker_up >/dev/null
mode good

step "plug a QNG: usb-serial with serial=$serial"
vm_mon "chardev-add socket,id=qng0,path=$sock" || fail "QEMU refused chardev-add for the emulator's socket"
vm_mon "device_add usb-serial,id=ebqng0,bus=xhci.0,chardev=qng0,serial=$serial" ||
	fail "QEMU refused device_add usb-serial"
wait_state connections 1 30 || fail "QEMU did not connect to the emulator within 30 s"
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 60 'grep -qx '"$serial"' /sys/bus/usb/devices/*/serial' ||
	fail "no USB device with serial number $serial within 60 s: usb-serial's serial= not honoured"
wait_guest 60 "systemctl list-units --no-legend --plain --state=active,activating 'eb-source-qng@*' | grep -q ." ||
	fail "no eb-source-qng@ unit started within 60 s of plugging the QNG"
unit=$(vm_exec "systemctl list-units --no-legend --plain --state=active,activating 'eb-source-qng@*' | awk '{ print \$1 }'")
(($(wc -l <<<"$unit") == 1)) || fail "not exactly one eb-source-qng@ unit: $unit"
node=$(vm_exec "systemctl show -P ExecStart '$unit' | grep -o '/dev/bus/usb/[0-9]*/[0-9]*' | head -n 1")
guest "ls -l $node; udevadm info -q property $node | grep -E '^(ID_SERIAL_SHORT|SYSTEMD_WANTS|TAGS)='"
report "usb-serial serial=$serial: sysfs serial $serial (QEMU's serial= sets the USB serial number), $unit"

step "the source takes it from ftdi_sio, and is credited"
wait_guest 60 "journalctl -b --no-pager -u '$unit' | grep -q 'is a ComScire QNG R2000KU, serial number $serial'" ||
	fail "$unit did not set the QNG up within 60 s"
wait_guest 90 "[ \$(eb-brokerctl sources --json | jq '[.. | objects | select((.kind? // \"\") | startswith(\"qng \")) | .bits_credited] | add // 0') -gt 0 ]" ||
	fail "the QNG's source was credited nothing within 90 s"
c1=$(credited)
report "credited $c1 bits from the emulated QNG"

step "a plain FT232 (serial EBPLAIN01) stays with ftdi_sio and starts nothing"
# A null chardev is never "connected": always-plugged attaches the device all the same.
vm_mon 'chardev-add null,id=plain0' || fail "QEMU refused chardev-add null"
vm_mon 'device_add usb-serial,id=ebplain0,bus=xhci.0,chardev=plain0,serial=EBPLAIN01,always-plugged=on' ||
	fail "QEMU refused the second usb-serial"
wait_guest 60 'for t in /sys/class/tty/ttyUSB*; do udevadm info -q property /dev/${t##*/}; done 2>/dev/null | grep -qx ID_SERIAL_SHORT=EBPLAIN01' ||
	fail "the plain FT232 did not appear as a ttyUSB (ftdi_sio) within 60 s"
# udev has handled its tty, so the USB device above it too: its properties say what it wants.
wants=$(vm_exec 'for d in /sys/bus/usb/devices/*; do grep -qx EBPLAIN01 $d/serial 2>/dev/null && udevadm info -q property $d; done | grep "^SYSTEMD_WANTS=" || true')
[[ $wants != *eb-source-qng* ]] || fail "the plain FT232 wants a QNG source: $wants"
units=$(vm_exec "systemctl list-units --all --no-legend --plain 'eb-source-qng@*' | awk '{ print \$1 }'")
[[ $units == "$unit" ]] || fail "the plain FT232 started something: $units"
[[ -z $(vm_exec "systemctl list-jobs --no-legend 'eb-source-qng@*'") ]] || fail "a job is queued for eb-source-qng@ after the plain FT232"
drv=$(vm_exec 'for t in /sys/class/tty/ttyUSB*; do udevadm info -q property /dev/${t##*/} | grep -qx ID_SERIAL_SHORT=EBPLAIN01 && basename $(readlink -f $t/device/../driver); done')
[[ $drv == ftdi_sio ]] || fail "the plain FT232's driver is '$drv', not ftdi_sio"
report "plain FT232 EBPLAIN01: driver $drv, no unit started"

step "the emulator raises the bad-statistics bit: one alarm, no credit"
before=$(state bad_statuses)
mode bad
wait_guest 60 "journalctl _SYSTEMD_INVOCATION_ID=\$(systemctl show -P InvocationID '$unit') $alarm EB_HEALTH_TEST=device -o cat | grep -q ." ||
	fail "$unit raised no device alarm within 60 s of the bad-statistics bit"
c2=$(credited)
# The source keeps checking and finding the bit: another status word with it, and no credit.
wait_state bad_statuses $((before + 2)) 90 || fail "the source stopped checking the status while the bit was set"
c3=$(credited)
((c3 == c2)) || fail "credited $((c3 - c2)) bits while the QNG reported bad statistics"
n=$(unit_alarms "$unit")
((n == 1)) || fail "$unit logged $n alarms for one bad-statistics episode"
report "bad statistics: one alarm ($(vm_exec "journalctl _SYSTEMD_INVOCATION_ID=\$(systemctl show -P InvocationID '$unit') $alarm -o cat")), credit stayed at $c3 bits over $(($(state bad_statuses) - before)) bad status words"

step "good again: re-admitted and credited"
mode good
wait_guest 90 "journalctl _SYSTEMD_INVOCATION_ID=\$(systemctl show -P InvocationID '$unit') $readmitted -o cat | grep -q ." ||
	fail "$unit was not re-admitted within 90 s of the bit clearing"
wait_guest 90 "[ \$(eb-brokerctl sources --json | jq '[.. | objects | select((.kind? // \"\") | startswith(\"qng \")) | .bits_credited] | add // 0') -gt $c3 ]" ||
	fail "no credit within 90 s of re-admission"

step "a stuck stream: one alarm, no credit"
mode stuck
wait_guest 60 "journalctl _SYSTEMD_INVOCATION_ID=\$(systemctl show -P InvocationID '$unit') $alarm EB_HEALTH_TEST=repetition-count -o cat | grep -q ." ||
	fail "$unit raised no repetition-count alarm within 60 s of the stream sticking"
c4=$(credited)
streamed=$(state streamed)
wait_state streamed $((streamed + 4096)) 60 || fail "the emulator streamed under 4 KiB in 60 s"
c5=$(credited)
((c5 == c4)) || fail "credited $((c5 - c4)) bits for a stuck stream"
n=$(unit_alarms "$unit")
((n == 2)) || fail "$unit logged $n alarms, not one for the bad statistics and one for the stuck stream"
report "stuck stream: one more alarm, credit stayed at $c5 bits over 4 KiB more"

step "unplug: the unit ends cleanly"
vm_mon 'device_del ebqng0' || fail "QEMU refused device_del"
wait_guest 60 "! systemctl is-active --quiet '$unit'" || fail "$unit still active 60 s after the QNG was unplugged"
res=$(vm_exec "systemctl show -P Result '$unit'; systemctl show -P ActiveState '$unit'" | tr '\n' ' ')
[[ $res == "success inactive " ]] || fail "$unit did not end cleanly: Result, ActiveState = $res"
guest "journalctl _SYSTEMD_INVOCATION_ID=\$(systemctl show -P InvocationID '$unit') -o cat | tail -n 4"
report "unplugged: $unit $res"
