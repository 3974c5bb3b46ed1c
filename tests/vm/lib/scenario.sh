# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# What a scenario script sources: vm_* from vm.sh plus verdict and requirement helpers.
#
# A scenario is tests/vm/scenarios/NAME.sh, run by tests/vm/run twice:
#   EB_VM_PHASE=check  host-side requirement checks only (no VM yet); it must stop at
#                      checks_done, which exits 0 in this phase. skip exits 77.
#   EB_VM_PHASE=run    the same checks, then the test. Exit 0 = pass, 77 = skip, else fail.
# Headers read by the runner:
#   # order: NN         position in the default run (ascending)
#   # vm: shared|own|none   shared: runs in the suite's VM (EB_VM_DIR is set and ready);
#                       own: boots its own guests with vm_boot; none: host only.
# The reason for a skip or a failure goes to $EB_VM_RESULT and is printed on the scenario's line.

# shellcheck source=host.sh
source "${EB_VM_LIB:?run scenarios through tests/vm/run}/host.sh"
# shellcheck source=vm.sh
source "$EB_VM_LIB/vm.sh"

# Guests a scenario boots itself are stopped whatever happens.
_EB_OWN_VMS=()
_eb_scenario_exit() {
	local d
	_vm_agent_close
	for d in "${_EB_OWN_VMS[@]}"; do vm_stop "$d"; done
}
trap _eb_scenario_exit EXIT

# Guest commands whose output helps explain a failure; run (once) when the scenario fails.
_EB_DIAG=()
diag() { _EB_DIAG+=("$*"); }

# report LINE...: lines printed under the suite's results (tables, measurements).
report() { printf '%s\n' "$@" | tee -a "$EB_VM_REPORT"; }

skip() {
	printf '%s\n' "$*" >"$EB_VM_RESULT"
	echo "SKIP: $*"
	exit 77
}

fail() {
	local d diags=("${_EB_DIAG[@]}")
	printf '%s\n' "$*" >"$EB_VM_RESULT"
	echo "FAIL: $*"
	_EB_DIAG=()
	for d in "${diags[@]}"; do
		echo "## diagnostics: $d"
		vm_exec -t 30 "$d" || true
	done
	exit 1
}

step() { printf -- '-- %s\n' "$*"; }

# The end of the requirement checks: in the check phase the scenario stops here.
checks_done() {
	[[ $EB_VM_PHASE == check ]] && exit 0
	return 0
}

# installed PATH: is PATH (relative to /, e.g. usr/sbin/eb-brokerd or lib/systemd/system/x)
# in the project's install tree? /lib, /bin and /sbin are folded into /usr as in the guest.
installed() {
	local p=${1#/}
	case $p in
	lib/* | bin/* | sbin/*) p=usr/$p ;;
	esac
	[[ -e $EB_VM_DESTDIR/$p ]]
}

# need PATH... -- REASON: skip with "PATH not installed: REASON" for the first missing PATH.
need() {
	local paths=() p
	while (($#)) && [[ $1 != -- ]]; do
		paths+=("$1")
		shift
	done
	shift || true
	for p in "${paths[@]}"; do
		installed "$p" || skip "${p##*/} not installed: $*"
	done
}

# program NAME: prints the guest path of an installed program, or fails (returns 1).
program() {
	local d
	for d in usr/bin usr/sbin usr/libexec/entropy-broker usr/lib/entropy-broker; do
		[[ -x $EB_VM_DESTDIR/$d/$1 ]] && {
			printf '/%s/%s\n' "$d" "$1"
			return 0
		}
	done
	return 1
}

# need_program NAME REASON: skips unless program NAME is installed.
need_program() {
	program "$1" >/dev/null || skip "$1 not installed: $2"
}

# guest COMMAND...: vm_exec that fails the scenario (with the command's output) on non-zero.
guest() {
	local out rc=0
	out=$(vm_exec "$@") || rc=$?
	printf '%s\n' "$out"
	local what=$*
	what=${what%%$'\n'*}
	((rc == 0)) || fail "guest command failed (rc=$rc): $what :: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
}

# wait_guest SECONDS CONDITION: polls the guest-side shell CONDITION every 0.2 s; returns 1 on timeout.
wait_guest() {
	local secs=$1
	shift
	vm_exec -t "$((secs + 5))" "end=\$((SECONDS + $secs)); until { $*; } >/dev/null 2>&1; do
		((SECONDS < end)) || exit 1; sleep 0.2; done"
}

# broker_test_config: writes the guest broker's configuration for the scenarios (root over
# unix: may donate, draw and ask; status every 5 s so the journal fills quickly). It takes
# effect at the broker's next start.
broker_test_config() {
	guest "mkdir -p /etc/entropy-broker && cat >/etc/entropy-broker/eb-brokerd.conf <<'EOC'
; written by tests/vm (scenario $EB_VM_SCENARIO)
[broker]
status-interval-sec = 5

[user root]
role = source, sink, admin
unix-uid = 0
EOC" >/dev/null
}

# rules_mentioning WORD: the installed udev rules files that contain WORD (basenames).
rules_mentioning() {
	grep -l -- "$1" "$EB_VM_DESTDIR"/usr/lib/udev/rules.d/*.rules 2>/dev/null | xargs -r -n1 basename
}

# broker_up: the broker started fresh with the test configuration, socket enabled. Prints the
# new instance's invocation ID, which selects its journal entries (_SYSTEMD_INVOCATION_ID=).
broker_up() {
	broker_test_config
	guest 'systemctl stop eb-brokerd.service; systemctl reset-failed eb-brokerd.service 2>/dev/null
		systemctl enable --now eb-brokerd.socket && systemctl start eb-brokerd.service' >/dev/null
	wait_guest 30 'systemctl is-active eb-brokerd.service' >/dev/null || fail "eb-brokerd.service did not start"
	guest 'systemctl show -P InvocationID eb-brokerd.service'
}

# pool_bits_max INVOCATION_ID [FIELD]: the largest EB_POOL_BITS= (or FIELD) that broker instance
# logged, 0 if none.
pool_bits_max() {
	local f=${2:-EB_POOL_BITS}
	vm_exec "journalctl _SYSTEMD_INVOCATION_ID=$1 -o json --no-pager |
		jq -r 'select(.$f != null) | .$f' | sort -n | tail -n 1 | grep . || echo 0"
}
