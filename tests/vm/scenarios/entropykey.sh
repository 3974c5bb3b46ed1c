#!/bin/bash
# SPDX-License-Identifier: MIT
# Simtec Entropy Keys appearing: two dummy_hcd + configfs ACM gadgets with the key's ID 20df:0001
# must each start Debian's ekeyd (eb-ekeyd@TTY.service) and an eb-source-egd@ on that ekeyd's EGD
# socket: one pair per key, with no configuration edited. Unplugging one key stops its pair only.
# What it proves: the udev rule, the two templates and their binding (BindsTo=, PropagatesStopTo=),
# and that ekeyd runs under the unit's sandbox and serves its EGD socket to the source (which
# connects and says hello with EGD 0x00). What it cannot: a gadget is not a key, so ekeyd never
# authenticates it and no entropy flows; that needs the hardware.
# order: 54
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

landed="issue 9 (EntropyKey via ekeyd) not landed"
need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket -- "issue 'core slice' not landed"
need_program eb-source-egd "$landed"
need lib/systemd/system/eb-ekeyd@.service lib/systemd/system/eb-source-egd@.service -- "$landed"
[[ -n $(rules_mentioning 'eb-ekeyd@') ]] || skip "no udev rule starts eb-ekeyd@: $landed"
[[ -x $(dirname "$EB_VM_KERNEL")/rootfs/usr/sbin/ekeyd ]] || skip "the guest image has no ekeyd (tests/vm/image/build-image.sh)"
checks_done

diag 'systemctl list-units --all --no-pager "eb-*" "ekeyd*"'
diag 'for t in /dev/ttyACM*; do udevadm info -q property "$t"; done'
diag 'journalctl -b --no-pager -n 60 -u "eb-ekeyd@*" -u "eb-source-egd@*" -u ekeyd.service'
diag 'ls -laR /run/ekey'

# key N on|off: plugs (creates) or unplugs fake key N on dummy_udc.N.
# key N on|off: plugs or unplugs fake key N, a USB serial gadget with the Entropy Key's ID.
key() {
	if [[ $2 == on ]]; then acm_gadget "$1" on 20df 0001 'Simtec Electronics' 'Entropy Key'; else acm_gadget "$1" off; fi
}
trap 'key 0 off || true; key 1 off || true; _eb_scenario_exit; _eb_host_exit' EXIT

# pair TTY: the two units udev starts for the key on TTY.
pair() { printf 'eb-ekeyd@%s.service eb-source-egd@-run-ekey-%s-egd.sock.service' "$1" "$1"; }
active_for() {
	vm_exec "systemctl list-units --no-legend --plain --state=active 'eb-*@*' | awk '{ print \$1 }' | grep -E '@$1\\.|-$1-' || true"
}

broker_up >/dev/null

step "plug two Entropy Key look-alikes"
key 0 on
key 1 on
t0=$(acm_tty_of 0)
t1=$(acm_tty_of 1)
[[ -n $t0 && -n $t1 ]] || fail "the fake keys did not both appear as ttyACM (got '$t0' '$t1')"
guest "udevadm info -q property /dev/$t0 | grep -E '^(ID_VENDOR_ID|ID_MODEL_ID|ID_MM_DEVICE_IGNORE|SYSTEMD_WANTS)='"

step "one ekeyd and one EGD source per key"
for t in "$t0" "$t1"; do
	for u in $(pair "$t"); do
		wait_guest 60 "systemctl is-active --quiet '$u'" || fail "$u not active within 60 s of plugging the key"
	done
	# The source reached ekeyd's socket: EGD 0x00 answered, so it is reading (not restarting).
	wait_guest 60 "journalctl -b --no-pager -u 'eb-source-egd@-run-ekey-$t-egd.sock.service' | grep -q 'Donating to'" ||
		fail "eb-source-egd on $t's ekeyd never got as far as donating"
	wait_guest 30 "test -S /run/ekey/$t/egd.sock" || fail "no EGD socket at /run/ekey/$t/egd.sock"
done
u0=$(active_for "$t0")
u1=$(active_for "$t1")
echo "units: $t0 -> $u0; $t1 -> $u1"
(($(wc -l <<<"$u0") == 2 && $(wc -l <<<"$u1") == 2)) || fail "not exactly one pair per key: $t0 -> $u0; $t1 -> $u1"
guest "stat -c '%U %a %n' /run/ekey/$t0/egd.sock; systemctl show -p NRestarts 'eb-source-egd@-run-ekey-$t0-egd.sock.service'"
report "20df:0001: $t0 -> $(tr '\n' ' ' <<<"$u0"); $t1 -> $(tr '\n' ' ' <<<"$u1")"

step "unplugging one key stops its pair only"
key 0 off
for u in $(pair "$t0"); do
	wait_guest 60 "! systemctl is-active --quiet '$u'" || fail "$u still active 60 s after its key was unplugged"
done
for u in $(pair "$t1"); do
	guest "systemctl is-active '$u'" >/dev/null || fail "$u stopped although its key is still plugged"
done
key 1 off
for u in $(pair "$t1"); do
	wait_guest 60 "! systemctl is-active --quiet '$u'" || fail "$u still active 60 s after its key was unplugged"
done
report "unplugging stops each key's ekeyd and its source"
