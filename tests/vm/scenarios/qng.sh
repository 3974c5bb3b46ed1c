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

# The QNG source's session at the broker: its bits credited (a guest-side expression).
credit_expr="eb-brokerctl sources --json | jq '[.. | objects | select((.kind? // \"\") | startswith(\"qng \")) | .bits_credited] | add // 0'"
credited() { vm_exec "$credit_expr"; }
# Under TCG every guest command costs a round trip: each step asks what it needs in one.

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
wait_guest 60 "systemctl list-units --no-legend --plain --state=active,activating 'eb-source-qng@*' | grep -q ." ||
	fail "no eb-source-qng@ unit started within 60 s of plugging the QNG"
# The unit, its invocation, its node, and the node's USB serial number as sysfs has it.
read -r unit inv node sysserial n < <(vm_exec "u=\$(systemctl list-units --no-legend --plain --state=active,activating 'eb-source-qng@*' | awk '{ print \$1 }')
	node=\$(systemctl show -P ExecStart \$u | grep -o '/dev/bus/usb/[0-9]*/[0-9]*' | head -n 1)
	echo \$u \$(systemctl show -P InvocationID \$u) \$node \$(cat /sys\$(udevadm info -q path \$node)/serial) \$(echo \"\$u\" | wc -l)") ||
	fail "could not read the QNG unit's state"
((n == 1)) || fail "not exactly one eb-source-qng@ unit"
[[ $sysserial == "$serial" ]] || fail "the device's USB serial number is '$sysserial', not $serial: usb-serial's serial= not honoured"
report "usb-serial serial=$serial: USB serial number $sysserial (QEMU's serial= sets it), $unit for $node"

step "the source takes it from ftdi_sio, and is credited"
wait_guest 90 "[ \$($credit_expr) -gt 0 ]" || fail "the QNG's source was credited nothing within 90 s"
read -r c1 setup < <(vm_exec "echo \$($credit_expr) \$(journalctl _SYSTEMD_INVOCATION_ID=$inv -o cat | grep -c 'is a ComScire QNG R2000KU, serial number $serial')")
((setup == 1)) || fail "$unit did not say it took a QNG R2000KU, serial number $serial"
report "credited $c1 bits from the emulated QNG"

step "a plain FT232 (serial EBPLAIN01) stays with ftdi_sio and starts nothing"
# A null chardev is never "connected": always-plugged attaches the device all the same.
vm_mon 'chardev-add null,id=plain0' || fail "QEMU refused chardev-add null"
vm_mon 'device_add usb-serial,id=ebplain0,bus=xhci.0,chardev=plain0,serial=EBPLAIN01,always-plugged=on' ||
	fail "QEMU refused the second usb-serial"
wait_guest 60 'for t in /sys/class/tty/ttyUSB*; do udevadm info -q property /dev/${t##*/}; done 2>/dev/null | grep -qx ID_SERIAL_SHORT=EBPLAIN01' ||
	fail "the plain FT232 did not appear as a ttyUSB (ftdi_sio) within 60 s"
# udev has handled its tty, so the USB device above it too: its properties say what it wants.
plain=$(vm_exec 'for t in /sys/class/tty/ttyUSB*; do
		udevadm info -q property /dev/${t##*/} | grep -qx ID_SERIAL_SHORT=EBPLAIN01 || continue
		echo "driver=$(basename $(readlink -f $t/device/../driver))"
		echo "wants=$(udevadm info -q property $(readlink -f $t/device/../..) | sed -n "s/^SYSTEMD_WANTS=//p")"
	done
	echo "units=$(systemctl list-units --all --no-legend --plain "eb-source-qng@*" | awk "{ print \$1 }" | tr "\n" " ")"
	echo "jobs=$(systemctl list-jobs --no-legend "eb-source-qng@*" | wc -l)"')
echo "$plain"
grep -qx 'driver=ftdi_sio' <<<"$plain" || fail "the plain FT232 is not with ftdi_sio: $plain"
! grep -q '^wants=.*eb-source-qng' <<<"$plain" || fail "the plain FT232 wants a QNG source: $plain"
grep -qx "units=$unit " <<<"$plain" || fail "the plain FT232 started something: $plain"
grep -qx 'jobs=0' <<<"$plain" || fail "a job is queued for eb-source-qng@ after the plain FT232: $plain"
report "plain FT232 EBPLAIN01: driver ftdi_sio, no unit started"

step "the emulator raises the bad-statistics bit: one alarm, no credit"
before=$(state bad_statuses)
mode bad
wait_guest 60 "journalctl _SYSTEMD_INVOCATION_ID=$inv $alarm EB_HEALTH_TEST=device -o cat | grep -q ." ||
	fail "$unit raised no device alarm within 60 s of the bad-statistics bit"
c2=$(credited)
# The source keeps checking and finding the bit: another status word with it, and no credit.
wait_state bad_statuses $((before + 2)) 90 || fail "the source stopped checking the status while the bit was set"
read -r c3 n < <(vm_exec "echo \$($credit_expr) \$(journalctl _SYSTEMD_INVOCATION_ID=$inv $alarm -o cat | wc -l)")
((c3 == c2)) || fail "credited $((c3 - c2)) bits while the QNG reported bad statistics"
((n == 1)) || fail "$unit logged $n alarms for one bad-statistics episode"
report "bad statistics: one alarm, credit stayed at $c3 bits over $(($(state bad_statuses) - before)) bad status words"

step "good again: re-admitted and credited"
mode good
wait_guest 90 "journalctl _SYSTEMD_INVOCATION_ID=$inv $readmitted -o cat | grep -q . && [ \$($credit_expr) -gt $c3 ]" ||
	fail "$unit was not re-admitted and credited within 90 s of the bit clearing"

step "a stuck stream: one alarm, no credit"
mode stuck
wait_guest 60 "journalctl _SYSTEMD_INVOCATION_ID=$inv $alarm EB_HEALTH_TEST=repetition-count -o cat | grep -q ." ||
	fail "$unit raised no repetition-count alarm within 60 s of the stream sticking"
c4=$(credited)
streamed=$(state streamed)
wait_state streamed $((streamed + 4096)) 60 || fail "the emulator streamed under 4 KiB in 60 s"
read -r c5 n < <(vm_exec "echo \$($credit_expr) \$(journalctl _SYSTEMD_INVOCATION_ID=$inv $alarm -o cat | wc -l)")
((c5 == c4)) || fail "credited $((c5 - c4)) bits for a stuck stream"
((n == 2)) || fail "$unit logged $n alarms, not one for the bad statistics and one for the stuck stream"
report "stuck stream: one more alarm, credit stayed at $c5 bits over 4 KiB more"

step "unplug: the unit ends cleanly"
vm_mon 'device_del ebqng0' || fail "QEMU refused device_del"
wait_guest 60 "! systemctl is-active --quiet '$unit'" || fail "$unit still active 60 s after the QNG was unplugged"
res=$(vm_exec "systemctl show -P Result '$unit'; systemctl show -P ActiveState '$unit'" | tr '\n' ' ')
[[ $res == "success inactive " ]] || fail "$unit did not end cleanly: Result, ActiveState = $res"
report "unplugged: $unit $res"
