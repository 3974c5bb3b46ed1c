# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Driving one QEMU guest: start, wait until ready, run commands through the virtio-serial agent,
# talk to the HMP monitor, stop. Sourced by tests/vm/run and by every scenario.
#
# Environment (set by tests/vm/run, exported to scenarios):
#   EB_VM_KERNEL, EB_VM_INITRD, EB_VM_ROOTIMG   the boot files (root image is used with snapshot=on)
#   EB_VM_ACCEL   kvm or tcg          EB_VM_CPU   CPU model (default qemu64: no RDRAND, fast TCG)
#   EB_VM_MEM     MiB (default 512)   EB_VM_DIR   the current VM's directory (sockets, logs)
#   EB_VM_SMP     CPUs (default 2)    EB_VM_DRIVE the root drive's -drive options (default: the
#                                     root image, raw, snapshot=on; a saved state needs a disk
#                                     of its own, such as a qcow2 overlay)

VM_READY_TIMEOUT=${EB_VM_READY_TIMEOUT:-240}
VM_SILENT_TIMEOUT=${EB_VM_SILENT_TIMEOUT:-90}

# vm_start DIR [--append "KERNEL ARGS"] [--cpu MODEL] [-- QEMU ARGS...]
# Boots a guest whose sockets, pidfile and serial log live in DIR and sets EB_VM_DIR=DIR.
# Returns once QEMU runs; use vm_wait_ready before vm_exec.
vm_start() {
	local dir=$1 append="" cpu=${EB_VM_CPU:-qemu64}
	shift
	while (($#)); do
		case $1 in
		--append)
			append=$2
			shift 2
			;;
		--cpu)
			cpu=$2
			shift 2
			;;
		--)
			shift
			break
			;;
		*) break ;;
		esac
	done
	mkdir -p "$dir/share"
	rm -f "$dir"/{mon.sock,agent.sock,agent.lost,qemu.pid,serial.log}
	local accel=(-accel "tcg,tb-size=128")
	[[ ${EB_VM_ACCEL:-tcg} == kvm ]] && accel=(-accel kvm)
	qemu-system-x86_64 -machine pc "${accel[@]}" -cpu "$cpu" -m "${EB_VM_MEM:-512}" -smp "${EB_VM_SMP:-2}" \
		-nodefaults -no-user-config -display none -no-reboot \
		-kernel "$EB_VM_KERNEL" -initrd "$EB_VM_INITRD" \
		-append "console=ttyS0 root=/dev/vda rw panic=-1 quiet $append" \
		-drive "${EB_VM_DRIVE:-file=$EB_VM_ROOTIMG,if=virtio,format=raw,snapshot=on}" \
		-virtfs "local,path=$dir/share,mount_tag=hostshare,security_model=none,id=hs" \
		-chardev "file,id=ser0,path=$dir/serial.log" -serial chardev:ser0 \
		-device virtio-serial-pci,id=vser \
		-chardev "socket,id=agent,path=$dir/agent.sock,server=on,wait=off" \
		-device virtserialport,chardev=agent,name=eb.agent \
		-monitor "unix:$dir/mon.sock,server=on,wait=off" \
		-device qemu-xhci,id=xhci \
		-object rng-random,id=rng0,filename=/dev/urandom \
		-pidfile "$dir/qemu.pid" -daemonize "$@" >"$dir/qemu.log" 2>&1 || {
		cat "$dir/qemu.log" >&2
		return 1
	}
	EB_VM_DIR=$dir
	export EB_VM_DIR
}

# vm_running [DIR]: is that guest's QEMU still alive?
vm_running() {
	local pid
	pid=$(cat "${1:-$EB_VM_DIR}/qemu.pid" 2>/dev/null) || return 1
	kill -0 "$pid" 2>/dev/null
}

# One connection per command: a socat child between two FIFOs (bash cannot talk to a unix socket
# itself). QEMU serves one client at a time, so a connection held open by one process would block
# every other (scenarios, subshells, the runner); per-command connections just queue instead.
_vm_agent_open() {
	local f=$EB_VM_DIR/agent.$BASHPID
	rm -f "$f.in" "$f.out"
	mkfifo "$f.in" "$f.out"
	exec {_VM_AGENT_W}<>"$f.in" {_VM_AGENT_R}<>"$f.out"
	socat -b 262144 STDIO "UNIX-CONNECT:$EB_VM_DIR/agent.sock" <"$f.in" >"$f.out" 2>/dev/null &
	_VM_AGENT_PID=$!
	_VM_AGENT_FIFO=$f
}

_vm_agent_close() {
	[[ -n ${_VM_AGENT_PID:-} ]] || return 0
	exec {_VM_AGENT_W}>&- {_VM_AGENT_R}<&-
	# SIGKILL: socat has nothing left to deliver, and CI once saw it outlive a SIGTERM (the
	# wait below then hung the suite for good).
	kill -KILL "$_VM_AGENT_PID" 2>/dev/null || true
	wait "$_VM_AGENT_PID" 2>/dev/null || true
	rm -f "$_VM_AGENT_FIFO.in" "$_VM_AGENT_FIFO.out"
	_VM_AGENT_PID=
}

# vm_exec [-t SECONDS] COMMAND...: runs COMMAND with bash in the guest as root; prints its
# stdout and stderr (merged) and returns its exit status. 124 means the guest-side timeout
# (default 120 s) killed it; 255 means the host gave up (QEMU died or the agent is silent).
vm_exec() {
	local limit=120
	if [[ ${1:-} == -t ]]; then
		limit=$2
		shift 2
	fi
	# Once the agent has stopped answering, the guest is lost: fail fast instead of waiting
	# out every later command (tests/vm/run reboots the shared guest after such a scenario).
	[[ -e $EB_VM_DIR/agent.lost ]] && return 255
	_vm_agent_open || return 255
	local id="$BASHPID.$RANDOM.$SECONDS" line buf="" rest rc req acked=0
	local deadline=$((SECONDS + limit + 15)) sent=$SECONDS
	req="$id $limit $(printf '%s' "$*" | base64 -w0)"
	printf '%s\n' "$req" >&"$_VM_AGENT_W"
	while :; do
		if IFS= read -r -t 1 -u "$_VM_AGENT_R" line; then
			line=$buf$line
			buf=
			[[ $line == "__ACK__ $id" ]] && acked=1
			[[ $line == "__EB__ $id "* ]] || continue
			_vm_agent_close
			rest=${line#"__EB__ $id "}
			rc=${rest%% *}
			printf '%s' "${rest#* }" | base64 -d
			return "$rc"
		fi
		buf+=$line
		# A request the guest never acknowledged was lost (see guest/eb-agent): send it again;
		# the agent runs an ID only once.
		if ((!acked && SECONDS - sent >= 10)); then
			printf '%s\n' "$req" >&"$_VM_AGENT_W"
			sent=$SECONDS
		fi
		if ((SECONDS > deadline)) || ! vm_running "$EB_VM_DIR"; then
			_vm_agent_close
			: >"$EB_VM_DIR/agent.lost"
			echo "vm_exec: no answer from the guest agent for: $*" >&2
			if vm_running "$EB_VM_DIR"; then
				echo "vm_exec: QEMU is running; request acknowledged: $((acked)); last lines of the serial console:" >&2
			else
				echo "vm_exec: QEMU has exited; last lines of the serial console:" >&2
			fi
			tail -n 30 "$EB_VM_DIR/serial.log" 2>/dev/null | sed 's/^/  | /' >&2
			return 255
		fi
	done
}

# vm_wait_ready [SECONDS]: waits until the guest's agent answers and systemd has finished
# booting (running or degraded). Prints the boot time; fails if QEMU exits first.
vm_wait_ready() {
	local limit=${1:-$VM_READY_TIMEOUT} state
	state=$(vm_exec -t "$limit" 'systemctl is-system-running --wait') || true
	case $state in
	running | degraded) return 0 ;;
	*)
		echo "vm_wait_ready: guest not ready (state '${state:-none}'); serial log: $EB_VM_DIR/serial.log" >&2
		return 1
		;;
	esac
}

# vm_mon COMMAND: one HMP monitor command; prints its reply (without banner and echo), fails
# when QEMU answers with an error.
vm_mon() {
	local out
	out=$(printf '%s\n' "$*" | socat -t 2 - "UNIX-CONNECT:$EB_VM_DIR/mon.sock" | tr -d '\r' |
		sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e '/^QEMU .* monitor/d' -e '/^(qemu)/d') || return 1
	[[ -n $out ]] && printf '%s\n' "$out"
	! grep -qiE '^(error|.*: error)|Error:' <<<"$out"
}

# vm_stop [DIR]: stops the guest at once (the disk is a snapshot, nothing to flush) and makes
# sure its QEMU is gone.
vm_stop() {
	local dir=${1:-${EB_VM_DIR:-}} pid i
	[[ -n $dir ]] || return 0
	_vm_agent_close
	pid=$(cat "$dir/qemu.pid" 2>/dev/null) || return 0
	if kill -0 "$pid" 2>/dev/null; then
		printf 'quit\n' | socat -t 1 - "UNIX-CONNECT:$dir/mon.sock" >/dev/null 2>&1 || true
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/qemu.pid"
}

# vm_boot DIR [vm_start options]: vm_start + vm_wait_ready; stops the guest if it does not come up.
# A guest whose console stays empty for VM_SILENT_TIMEOUT s is started once more: CI once saw a
# TCG guest hang before systemd's first line (which comes at about 3 s, booting in 12-20 s), with
# QEMU alive and no request reaching its devices. A guest that fails twice fails.
vm_boot() {
	local dir=$1 i
	vm_start "$@" || return 1
	for ((i = 0; i < VM_SILENT_TIMEOUT * 2; i++)); do
		[[ -s $dir/serial.log ]] && break
		vm_running "$dir" || break
		sleep 0.5
	done
	if [[ ! -s $dir/serial.log ]] && vm_running "$dir"; then
		echo "vm_boot: no console output from the guest in $dir within ${VM_SILENT_TIMEOUT} s; starting it once more" >&2
		vm_stop "$dir"
		vm_start "$@" || return 1
	fi
	if ! vm_wait_ready "$VM_READY_TIMEOUT"; then
		vm_stop "$dir"
		return 1
	fi
}
