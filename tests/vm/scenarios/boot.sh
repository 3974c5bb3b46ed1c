#!/bin/bash
# SPDX-License-Identifier: MIT
# The harness itself: the guest runs systemd as PID 1 with udevd and journald, the agent returns
# output and exit status, the monitor answers, and the install tree is in the guest's /.
# order: 00
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"
checks_done

step "PID 1 is systemd, udevd and journald run"
[[ $(guest 'readlink /proc/1/exe') == */systemd ]] || fail "PID 1 is not systemd"
guest 'systemctl is-active systemd-udevd.service systemd-journald.service dbus.service'

step "the agent returns output and exit status"
[[ $(guest 'echo hello; echo err >&2') == $'hello\nerr' ]] || fail "agent output garbled"
rc=0
vm_exec 'exit 7' || rc=$?
((rc == 7)) || fail "agent returned rc=$rc for 'exit 7'"
rc=0
vm_exec -t 1 'sleep 10' || rc=$?
((rc == 124)) || fail "guest-side timeout gave rc=$rc, not 124"
[[ $(guest 'echo after-timeout') == after-timeout ]] || fail "agent out of step after a timeout"

step "the monitor answers"
vm_mon 'info status' | grep -q running || fail "monitor: 'info status' does not say running"

step "the project's install tree is in the guest"
n=0
while IFS= read -r -d '' f; do
	rel=${f#"$EB_VM_DESTDIR"/}
	guest "test -e '/$rel'" >/dev/null
	n=$((n + 1))
done < <(find "$EB_VM_DESTDIR" \( -type f -o -type l \) -print0)
echo "$n installed files found in the guest"

guest 'systemd-analyze time || true; systemd-analyze blame --no-pager | head -n 8'
