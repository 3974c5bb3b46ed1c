#!/bin/bash
# SPDX-License-Identifier: MIT
# USB serial RNGs appearing: two fake devices with a real RNG's vendor:product (dummy_hcd plus a
# configfs ACM gadget each, so the guest sees /dev/ttyACM0 and /dev/ttyACM1 exactly as for the
# hardware) must each start one instance of the right per-device unit, and unplugging one
# must stop its instance only. The gadget side (/dev/ttyGS*) is fed random bytes meanwhile.
# order: 50
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

# Known USB serial RNGs, "vid:pid:manufacturer:product"; the first whose vendor:product the
# installed udev rules name is faked. The stream sources first: an Entropy Key starts a pair of
# units of its own (ekeyd and an EGD source), which the entropykey scenario covers.
known=(
	"04d8:f5fe:ubld.it:TrueRNG"
	"1d50:6086:Moonbase Otago:OneRNG"
	"20df:0001:Simtec Electronics:Entropy Key"
)
landed="issue 'USB serial RNG sources and udev rules' not landed"
need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket -- "issue 'core slice' not landed"
pick=""
for k in "${known[@]}"; do
	IFS=: read -r vid pid _ <<<"$k"
	for f in $(rules_mentioning "$vid"); do
		grep -qi -- "$pid" "$EB_VM_DESTDIR/usr/lib/udev/rules.d/$f" && pick=$k && break 2
	done
done
[[ -n $pick ]] || skip "no udev rule names a USB RNG (EntropyKey 20df:0001, TrueRNG 04d8:f5fe, OneRNG 1d50:6086): $landed"
checks_done
IFS=: read -r vid pid maker product <<<"$pick"
echo "faking $maker $product ($vid:$pid)"

diag 'systemctl list-units --all --no-pager "eb-*"'
diag 'for t in /dev/ttyACM*; do udevadm info -q property "$t"; done'
diag 'journalctl -b --no-pager -n 40 -u "eb-source-*"'

broker_up >/dev/null

gadget() {
	if [[ $2 == on ]]; then acm_gadget "$1" on "$vid" "$pid" "$maker" "$product"; else acm_gadget "$1" off; fi
}
cleanup_gadgets() {
	vm_exec -t 10 'pkill -f eb-test-feed || true' >/dev/null || true
	gadget 0 off || true
	gadget 1 off || true
}
trap 'cleanup_gadgets; _eb_scenario_exit; _eb_host_exit' EXIT

# units_for TTY: active eb-* units whose instance names TTY.
units_for() {
	vm_exec "systemctl list-units --no-legend --plain --state=active 'eb-*@*' | awk '{ print \$1 }' | grep -F '@$1' || true"
}

step "plug two $product look-alikes"
gadget 0 on
gadget 1 on
acm_feed
tty0=$(acm_tty_of 0)
tty1=$(acm_tty_of 1)
[[ -n $tty0 && -n $tty1 ]] || fail "the fake devices did not both appear as ttyACM (got '$tty0' '$tty1')"
guest "udevadm info -q property /dev/$tty0 | grep -E '^(ID_VENDOR_ID|ID_MODEL_ID|ID_SERIAL|DEVLINKS|SYSTEMD_WANTS|TAGS)='"

step "one unit instance per device"
for t in "$tty0" "$tty1"; do
	# shellcheck disable=SC2016
	wait_guest 60 "systemctl list-units --no-legend --state=active 'eb-*@*' | grep -qF '@$t'" ||
		fail "no eb-*@ unit started for $t ($vid:$pid) within 60 s"
done
u0=$(units_for "$tty0")
u1=$(units_for "$tty1")
echo "units: $tty0 -> $u0; $tty1 -> $u1"
(($(wc -l <<<"$u0") == 1 && $(wc -l <<<"$u1") == 1)) || fail "not exactly one unit per device: $tty0 -> $u0; $tty1 -> $u1"
[[ ${u0%%@*} == "${u1%%@*}" ]] || fail "the two devices got different templates: $u0, $u1"
report "$vid:$pid ($product): $tty0 -> $u0, $tty1 -> $u1"

step "unplugging one stops only its instance"
gadget 0 off
wait_guest 60 "! systemctl is-active --quiet '$u0'" || fail "$u0 still active 60 s after its device was unplugged"
guest "systemctl is-active '$u1'" >/dev/null || fail "$u1 stopped although its device is still plugged"
gadget 1 off
wait_guest 60 "! systemctl is-active --quiet '$u1'" || fail "$u1 still active 60 s after its device was unplugged"
