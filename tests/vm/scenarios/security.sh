#!/bin/bash
# SPDX-License-Identifier: MIT
# "systemd-analyze security" of every service the project installs, in the guest where the units
# are loaded for real, printed as a table. Fails when a service is worse than
# EB_VM_SECURITY_MAX (default 4.9: "OK" or better; 5.0 and up is systemd's "MEDIUM").
# Template units are analysed as an instance (NAME@vmtest.service).
# order: 30
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

unitdir=$EB_VM_DESTDIR/usr/lib/systemd/system
mapfile -t units < <(find "$unitdir" -maxdepth 1 -name '*.service' -printf '%f\n' 2>/dev/null | sort)
((${#units[@]})) || skip "no .service installed under /usr/lib/systemd/system: issue 'core slice' not landed"
checks_done
max=${EB_VM_SECURITY_MAX:-4.9}

guest 'systemctl daemon-reload' >/dev/null
rows=() worst=""
for u in "${units[@]}"; do
	name=$u
	[[ $u == *@.service ]] && name=${u%@.service}@vmtest.service
	out=$(vm_exec "systemd-analyze security --no-pager '$name'") ||
		fail "systemd-analyze security $name failed: $(tail -n 2 <<<"$out" | tr '\n' ' ')"
	echo "$out"
	# "→ Overall exposure level for eb-brokerd.service: 2.1 OK 🙂"
	line=$(grep -m1 'Overall exposure level' <<<"$out") || fail "no overall exposure for $name"
	read -r score level < <(sed -E 's/.*: ([0-9.]+) ([A-Z]+).*/\1 \2/' <<<"$line")
	rows+=("$(printf '%-36s %8s  %s' "$name" "$score" "$level")")
	if awk -v s="$score" -v m="$max" 'BEGIN { exit !(s > m) }'; then
		worst+="$name $score $level; "
	fi
done

report "$(printf '%-36s %8s  %s' unit exposure level)"
report "${rows[@]}"
[[ -z $worst ]] || fail "exposure above $max: ${worst%; }"
