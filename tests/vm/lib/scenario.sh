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
trap _eb_scenario_exit EXIT # replaced below once host helpers exist

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
	# To stderr: fail may run inside "guest ... >/dev/null".
	{
		echo "FAIL: $*"
		_EB_DIAG=()
		for d in "${diags[@]}"; do
			echo "## diagnostics: $d"
			vm_exec -t 30 "$d" || true
		done
	} >&2
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

# guest [-t SECONDS] COMMAND...: vm_exec that fails the scenario (with the command's output) on non-zero.
guest() {
	local out rc=0 timeout=()
	if [[ ${1:-} == -t ]]; then
		timeout=(-t "$2")
		shift 2
	fi
	out=$(vm_exec "${timeout[@]}" "$@") || rc=$?
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

# broker_test_config: writes the guest broker's configuration for the scenarios: root over unix:
# may donate, draw and ask, and so may the project's own system users (eb-source*, entropy-egd
# ...: whatever sysusers.d created), each in the role its name says. Status every 5 s so the
# journal fills quickly. It takes effect at the broker's next start.
broker_test_config() {
	guest "mkdir -p /etc/entropy-broker
		{ printf '; written by tests/vm (scenario %s)\\n[broker]\\nstatus-interval-sec = 5\\n' '$EB_VM_SCENARIO'
		  printf '\\n[user root]\\nrole = source, sink, admin\\nunix-uid = 0\\n'
		  getent passwd | cut -d: -f1 | grep -E '^(eb-|entropy-)' | grep -vx entropy-broker |
		  while read -r u; do
			case \$u in *source*) r=source ;; *sink*|*egd*|*seed*) r=sink ;; *) r='source, sink' ;; esac
			printf '\\n[user %s]\\nrole = %s\\nunix-uid = %s\\n' \"\$u\" \"\$r\" \"\$u\"
		  done
		} >/etc/entropy-broker/eb-brokerd.conf
		cat /etc/entropy-broker/eb-brokerd.conf" >/dev/null
}

# acm_gadget N on|off [VID PID MAKER PRODUCT]: plugs (creates) or unplugs a fake USB serial device
# N on dummy_udc.N: a configfs ACM gadget with that vendor:product and serial number EBTEST000N, so
# the guest sees a /dev/ttyACMx exactly as for the hardware, and /dev/ttyGSx is its other end.
acm_gadget() {
	local g=/sys/kernel/config/usb_gadget/ebtest$1
	if [[ $2 == on ]]; then
		guest "set -e
			modprobe dummy_hcd num=2; modprobe libcomposite; modprobe usb_f_acm
			mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
			mkdir -p $g; cd $g
			echo 0x$3 >idVendor; echo 0x$4 >idProduct
			mkdir -p strings/0x409 configs/c.1 functions/acm.usb0
			echo '$5' >strings/0x409/manufacturer; echo '$6' >strings/0x409/product
			echo EBTEST000$1 >strings/0x409/serialnumber
			ln -sf $g/functions/acm.usb0 configs/c.1/
			echo dummy_udc.$1 >UDC" >/dev/null
		# The host side enumerates it through dummy_hcd in its own time (seconds under TCG):
		# wait for its ttyACM, found by the serial number, rather than for udev's queue.
		wait_guest 90 "for t in /sys/class/tty/ttyACM*; do udevadm info -q property /dev/\${t##*/}; done 2>/dev/null | grep -qx ID_SERIAL_SHORT=EBTEST000$1" ||
			fail "fake USB device $1 ($3:$4) did not appear as a ttyACM within 90 s"
	else
		guest "g=$g; [ -d \$g ] || exit 0; echo '' >\$g/UDC 2>/dev/null || true
			rm -f \$g/configs/c.1/acm.usb0; rmdir \$g/configs/c.1 \$g/functions/acm.usb0 \$g/strings/0x409 \$g" >/dev/null
	fi
}

# acm_feed: feeds every gadget tty (/dev/ttyGS*) random bytes, a trickle of 2.5 KB/s each: an
# unbounded cat from /dev/urandom starves a 2-core TCG guest. "pkill -f eb-test-feed" stops it.
# The feeder opens its tty before stty touches it and holds it from then on: the last close of a
# gadget tty drops DCD, which hangs up whoever has the host side (ttyACMx) open at that moment
# without CLOCAL set yet, such as a source that has just opened it.
acm_feed() {
	guest 'udevadm settle --timeout=60
	for g in /dev/ttyGS*; do
		setsid bash -c "exec -a eb-test-feed bash -c '\''exec >$g 2>/dev/null; stty -F $g raw -echo; while head -c 512 /dev/urandom; do sleep 0.2; done'\''" </dev/null >/dev/null 2>&1 &
	done
	ls -l /dev/ttyACM* /dev/ttyGS* || true'
}

# acm_tty_of N: the guest-side tty (ttyACMx) of fake device N, found by its serial number.
acm_tty_of() {
	vm_exec "udevadm settle --timeout=30; for t in /sys/class/tty/ttyACM*; do
		udevadm info -q property \"/dev/\${t##*/}\" | grep -qx 'ID_SERIAL_SHORT=EBTEST000$1' && echo \${t##*/}; done; true"
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

# host_broker DIR [LISTEN-URI]: runs the installed eb-brokerd on the host (same Debian 12 as the
# guest, so the binary runs here) with its config, socket and log in DIR; root over unix: may do
# everything, plus whatever "[user]" sections DIR/users.conf holds. Stopped when the scenario
# exits. Sets HOST_BROKER=unix:DIR/broker.sock.
_EB_HOST_PIDS=()
host_broker() {
	local dir=$1 listen=${2:-}
	mkdir -p "$dir"
	{
		printf '[broker]\nstatus-interval-sec = 5\nseed-file =\n\n[user root]\nrole = source, sink, admin\nunix-uid = 0\n'
		[[ -f $dir/users.conf ]] && cat "$dir/users.conf"
	} >"$dir/eb-brokerd.conf"
	local args=(-c "$dir/eb-brokerd.conf" -l "unix:$dir/broker.sock")
	[[ -n $listen ]] && args+=(-l "$listen")
	EB_LOG_TARGET=stderr "$EB_VM_DESTDIR/usr/sbin/eb-brokerd" "${args[@]}" >"$dir/broker.log" 2>&1 &
	_EB_HOST_PIDS+=($!)
	# shellcheck disable=SC2034 # used by the scenarios
	HOST_BROKER=unix:$dir/broker.sock
	local i
	for ((i = 0; i < 50; i++)); do
		[[ -S $dir/broker.sock ]] && return 0
		sleep 0.1
	done
	fail "the host broker did not start: $(tail -n 3 "$dir/broker.log" | tr '\n' ' ')"
}

# host_program NAME: the installed program's path on the host (inside the install tree).
host_program() { printf '%s%s\n' "$EB_VM_DESTDIR" "$(program "$1")"; }

_eb_host_exit() {
	local p
	for p in "${_EB_HOST_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${_EB_HOST_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap '_eb_scenario_exit; _eb_host_exit' EXIT

# own_vm DIR [vm_boot options]: boots a guest of the scenario's own, stopped when it exits.
own_vm() {
	_EB_OWN_VMS+=("$1")
	vm_boot "$@" || fail "the guest in $1 did not boot (see $1/serial.log)"
}

# image_with IMAGE FILE GUESTPATH...: copies the per-run root image to IMAGE and writes each
# host FILE to GUESTPATH in it (debugfs; makes the last directory level when missing).
image_with() {
	local img=$1
	shift
	cp --sparse=always "$EB_VM_ROOTIMG" "$img"
	while (($# >= 2)); do
		debugfs -w -R "mkdir ${2%/*}" "$img" >/dev/null 2>&1 || true
		debugfs -w -R "write $1 $2" "$img" >/dev/null 2>&1 || fail "debugfs could not write $2"
		shift 2
	done
}
