#!/bin/bash
# SPDX-License-Identifier: MIT
# Socket activation: "systemctl enable --now eb-brokerd.socket" leaves the service stopped until
# the first client connects; then it runs (Type=notify: READY=1 reached) with a STATUS= line in
# "systemctl status"; a restart loses none of the connections made while it happens.
# order: 10
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket lib/systemd/system/eb-brokerd.service \
	-- "issue 'core slice' (broker and its units) not landed"
checks_done
ctl=$(program eb-brokerctl || true)

diag 'systemctl status --no-pager eb-brokerd.socket eb-brokerd.service'
diag 'journalctl -b --no-pager -n 40 -u eb-brokerd.socket -u eb-brokerd.service'

step "enable --now the socket; the service stays down"
guest 'systemctl stop eb-brokerd.service eb-brokerd.socket; systemctl reset-failed eb-brokerd.service eb-brokerd.socket 2>/dev/null; true'
broker_test_config
guest 'systemctl enable --now eb-brokerd.socket'
guest 'systemctl is-active eb-brokerd.socket' >/dev/null
sleep 1
state=$(vm_exec 'systemctl is-active eb-brokerd.service') || true
[[ $state == inactive ]] || fail "eb-brokerd.service is '$state' before any client connected (want inactive)"

listen=$(guest 'systemctl show -P Listen eb-brokerd.socket')
echo "Listen: $listen"
path=$(tr ' ' '\n' <<<"$listen" | grep -m1 '^/') || fail "eb-brokerd.socket has no unix socket (Listen=$listen)"
guest "test -S '$path'" >/dev/null

step "the first client starts the service"
if [[ -n $ctl ]]; then
	out=$(vm_exec -t 60 "$ctl -b 'unix:$path' status") || fail "first client: $ctl status failed: $out"
	echo "$out"
else
	echo "eb-brokerctl not installed: connecting with socat"
	guest "socat -u OPEN:/dev/null 'UNIX-CONNECT:$path'"
fi
wait_guest 30 'systemctl is-active eb-brokerd.service' >/dev/null ||
	fail "eb-brokerd.service did not become active after a client connected"

step "READY and STATUS"
show=$(guest 'systemctl show -p Type -p ActiveState -p SubState -p StatusText -p MainPID -p InvocationID eb-brokerd.service')
echo "$show"
grep -qx 'Type=notify' <<<"$show" || fail "eb-brokerd.service is not Type=notify"
grep -qx 'SubState=running' <<<"$show" || fail "eb-brokerd.service is not running: $(grep SubState <<<"$show")"
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 15 '[ -n "$(systemctl show -P StatusText eb-brokerd.service)" ]' ||
	fail "no STATUS= line reached systemd"
status=$(vm_exec 'systemctl status --no-pager eb-brokerd.service') || true
echo "$status"
line=$(grep -m1 '^ *Status: "' <<<"$status") || fail "systemctl status shows no Status: line"
report "status line: ${line#"${line%%[! ]*}"}"
inv0=$(sed -n 's/^InvocationID=//p' <<<"$show")

step "a restart keeps connections queued on the socket"
if [[ -n $ctl ]]; then
	# Eight clients connect while the service restarts; the listening socket stays with systemd,
	# so each must be answered by one instance or the next.
	guest "systemctl restart --no-block eb-brokerd.service
		for i in 1 2 3 4 5 6 7 8; do
			( $ctl -b 'unix:$path' status >/run/eb-c\$i.out 2>&1; echo \$? >/run/eb-c\$i.rc ) &
			sleep 0.05
		done
		wait
		bad=0
		for i in 1 2 3 4 5 6 7 8; do
			rc=\$(cat /run/eb-c\$i.rc)
			echo \"client \$i: rc=\$rc \$(head -n 1 /run/eb-c\$i.out)\"
			[ \"\$rc\" = 0 ] || bad=1
		done
		exit \$bad" || fail "a client that connected during the restart was not served"
else
	guest "systemctl restart --no-block eb-brokerd.service
		for i in 1 2 3 4 5 6 7 8; do socat -u OPEN:/dev/null 'UNIX-CONNECT:$path' || exit 1; sleep 0.05; done"
fi
wait_guest 30 'systemctl is-active eb-brokerd.service' >/dev/null || fail "eb-brokerd.service not active after the restart"
guest 'systemctl is-active eb-brokerd.socket' >/dev/null
inv1=$(guest 'systemctl show -P InvocationID eb-brokerd.service')
[[ $inv1 != "$inv0" ]] || fail "the service was not restarted (same InvocationID)"
echo "restarted: invocation $inv0 -> $inv1"

step "systemctl reload rereads the configuration in place"
pid0=$(guest 'systemctl show -P MainPID eb-brokerd.service')
guest 'systemctl reload eb-brokerd.service' >/dev/null || fail "systemctl reload eb-brokerd failed"
wait_guest 30 "journalctl -b --no-pager -u eb-brokerd.service _PID=$pid0 | grep -q 'Reloaded '" ||
	fail "no 'Reloaded' line in the journal after systemctl reload"
pid1=$(guest 'systemctl show -P MainPID eb-brokerd.service')
[[ $pid1 == "$pid0" ]] || fail "the reload restarted the broker (MainPID $pid0 -> $pid1)"
guest 'systemctl is-active eb-brokerd.service' >/dev/null || fail "eb-brokerd.service not active after the reload"
report "reload: $(guest "journalctl -b --no-pager -o cat -u eb-brokerd.service _PID=$pid0 | grep -m1 'Reloaded '")"
