#!/bin/bash
# SPDX-License-Identifier: MIT
# The README's promise, on a fresh guest with the project installed and not one file edited:
# "systemctl enable --now eb-brokerd.socket", then hot-add a virtio-rng and plug in a USB serial
# TrueRNG. Each starts its source through udev, the source's connection activates the broker,
# the shipped drop-in maps the source units' group over the unix socket, and the pool level
# rises in the broker's journal.
# order: 45
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket -- "issue 'core slice' not landed"
need_program eb-source-stream "issue 'stream source and udev rules' not landed"
need lib/entropy-broker/eb-brokerd.conf.d/50-local-units.conf -- "the shipped drop-in is not installed"
checks_done

d=$EB_VM_SCENARIO_DIR
vid=04d8 pid=f5fe maker=ubld.it product=TrueRNG

diag 'systemctl list-units --all --no-pager "eb-*"'
diag 'journalctl -b --no-pager -n 60 -u eb-brokerd.service -u "eb-source-stream@*"'
diag 'ls -lR /etc/entropy-broker /usr/lib/entropy-broker 2>&1'

cleanup() {
	vm_exec -t 10 'pkill -f eb-test-feed || true' >/dev/null 2>&1 || true
	acm_gadget 0 off >/dev/null 2>&1 || true
}
trap 'cleanup; _eb_scenario_exit; _eb_host_exit' EXIT

step "a fresh guest: nothing configured"
own_vm "$d/vm"
guest '[ ! -e /etc/entropy-broker/eb-brokerd.conf ] && [ -z "$(ls -A /etc/entropy-broker/eb-brokerd.conf.d 2>/dev/null)" ]' ||
	fail "the fresh guest already has a broker configuration in /etc/entropy-broker"
guest 'getent group eb-source eb-sink' || fail "sysusers did not create the eb-source and eb-sink groups"

# poolmax: the largest EB_POOL_BITS the broker logged this boot, 0 if none.
poolmax() {
	vm_exec "journalctl -b -u eb-brokerd.service -o json --no-pager |
		jq -r 'select(.EB_POOL_BITS != null) | .EB_POOL_BITS' | sort -n | tail -n 1 | grep . || echo 0"
}

step "systemctl enable --now eb-brokerd.socket: all the set-up there is"
guest 'systemctl enable --now eb-brokerd.socket'
guest 'systemctl is-active eb-brokerd.socket' >/dev/null || fail "eb-brokerd.socket is not listening"

# The TrueRNG first: its trickle cannot fill the pool to high water (where sources rest), so
# the virtio-rng that follows still has room to show its own credit.
step "plug in a USB serial $product ($vid:$pid)"
acm_gadget 0 on "$vid" "$pid" "$maker" "$product"
acm_feed
tty=$(acm_tty_of 0)
[[ -n $tty ]] || fail "the fake $product did not appear as a ttyACM"
wait_guest 90 "systemctl is-active --quiet eb-source-stream@$tty.service" ||
	fail "eb-source-stream@$tty.service did not start within 90 s of the plug"
wait_guest 90 'systemctl is-active --quiet eb-brokerd.service' ||
	fail "the source's connection did not activate eb-brokerd.service within 90 s"
wait_guest 90 "journalctl -b -u eb-brokerd.service --no-pager | grep 'user local-sources connected as source' | grep -q '/dev/$tty'" ||
	fail "the broker did not take the $product source on /dev/$tty as user local-sources (the shipped drop-in) within 90 s"
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 120 '[ "$(journalctl -b -u eb-brokerd.service -o json --no-pager | jq -r "select(.EB_POOL_BITS != null) | .EB_POOL_BITS" | sort -n | tail -n 1)" -gt 0 ]' ||
	fail "EB_POOL_BITS in eb-brokerd's journal stayed at 0 for 120 s with the $product source running"
after_truerng=$(poolmax)
report "$product on $tty: donating as user local-sources, pool level $after_truerng bits"

step "hot-add a virtio-rng"
vm_mon 'device_add virtio-rng-pci,rng=rng0,id=ebvrng' || fail "QEMU refused device_add virtio-rng-pci"
wait_guest 90 'systemctl is-active --quiet eb-source-stream@hwrng.service' ||
	fail "eb-source-stream@hwrng.service did not start within 90 s of the hotplug"
wait_guest 90 'journalctl -b -u eb-brokerd.service --no-pager | grep "user local-sources connected as source" | grep -q hwrng' ||
	fail "the broker did not take the hwrng source as user local-sources within 90 s"
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 120 '[ "$(journalctl -b -u eb-brokerd.service -o json --no-pager | jq -r "select(.EB_POOL_BITS != null) | .EB_POOL_BITS" | sort -n | tail -n 1)" -gt '"$after_truerng"' ]' ||
	fail "EB_POOL_BITS stayed at or below $after_truerng for 120 s with the hwrng source running too"
guest "journalctl -b -u eb-brokerd.service --no-pager | grep 'connected as source'"
report "virtio-rng: eb-source-stream@hwrng donating too, pool level $(poolmax) bits"

step "no file was edited"
guest 'find /etc/entropy-broker -type f | grep . && exit 1; true' || fail "a file appeared in /etc/entropy-broker"
report "no file edited in /etc/entropy-broker"
