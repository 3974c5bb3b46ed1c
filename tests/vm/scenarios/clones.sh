#!/bin/bash
# SPDX-License-Identifier: MIT
# A fresh seed in every copy (issue 28): a running guest with a vmgenid device and the seeder set
# up as docs/vm-seeding.md says (eb-seed-fork.service, its key as a fw_cfg credential, the
# virtio-serial port to a host broker) is saved (migrate "exec:cat > state"), then two copies are
# started from that state, one after the other (-incoming, a qcow2 overlay each, -smp 1). In each:
# the kernel's "virtual machine fork" line, eb-seed-reseed.service's line with generation 1, one
# draw more in the host broker's log, the generation file at 1, the seed file rewritten (marked
# creditable for systemd), and 32
# bytes of getrandom() after the reseed that differ between the copies; the time from `cont` to
# the reseed line is printed. A state with a vmgenid device does not load into a QEMU without one
# ("Unknown savevm section"), so a second guest, booted beside the first without the device and
# with a key of its own, is saved too, and a third copy started from its state: there the kernel
# logs no fork, and the watcher's clock trigger (the RTC ahead of the guest's clock) starts the
# reseed within its bound; the times from `cont` to its line and to the reseed are printed. That
# copy is then paused by the host for 6 s: its clock trigger fires once more, with at most one draw.
# order: 86
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh disable=SC2153 # EB_VM_LIB is tests/vm/run's
source "$EB_VM_LIB/scenario.sh"

need usr/sbin/eb-brokerd -- "issue 'core slice' not landed"
need_program eb-sink-kernel "issue 'Sinks' (kernel sink) not landed"
need_program eb-source-file "issue 'core slice' (eb-source-file) not landed"
need lib/systemd/system/eb-seed-fork.service -- "issue 28 (reseed in every copy) not landed"
need lib/systemd/system/eb-seed-reseed.service -- "issue 28 (reseed in every copy) not landed"
qemu-system-x86_64 -device help 2>/dev/null | grep -q '"vmgenid"' ||
	skip "this QEMU has no vmgenid device"
command -v qemu-img >/dev/null || skip "needs qemu-img (qemu-utils)"
checks_done

d=$EB_VM_SCENARIO_DIR
port=org.entropy-broker.seed.0
# The clock trigger reads the RTC every 5 s (eb-sink-kernel(8)); the test allows three times that.
clock_bound=15

step "the guest image: eb-seed-fork.service enabled, seed.env naming the port"
printf 'EB_BROKER=virtio:%s\n' "$port" >"$d/seed.env"
image_with "$d/seed.img" "$d/seed.env" /etc/entropy-broker/seed.env
debugfs -w -R "mkdir /etc/systemd/system/multi-user.target.wants" "$d/seed.img" >/dev/null 2>&1 || true
debugfs -w -R "symlink /etc/systemd/system/multi-user.target.wants/eb-seed-fork.service /usr/lib/systemd/system/eb-seed-fork.service" \
	"$d/seed.img" >/dev/null 2>&1 || fail "debugfs could not enable eb-seed-fork.service"
qemu-img create -q -f qcow2 -b "$d/seed.img" -F raw "$d/saved.qcow2" || fail "qemu-img create"
qemu-img create -q -f qcow2 -b "$d/seed.img" -F raw "$d/saved2.qcow2" || fail "qemu-img create"

step "host: a broker with the guests' users (guest = yes), filled"
mkdir -p "$d/host"
for u in vm1 vm2; do
	head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n' >"$d/host/$u.key"
	printf '\n' >>"$d/host/$u.key"
	chmod 0600 "$d/host/$u.key"
	printf '\n[user %s]\nrole = sink\nguest = yes\nkey-file = %s\n' "$u" "$d/host/$u.key" >>"$d/host/users.conf"
done
host_broker "$d/host" "unix+tls:$d/host/virtio.sock"
head -c 65536 /dev/urandom | "$(host_program eb-source-file)" -b "$HOST_BROKER" --credit-per-byte 8 - ||
	fail "could not fill the host broker"

# Every copy must have the devices the saved one had; its disk, sockets and logs are its own.
# devices_vm2: the second guest's, with no vmgenid device.
export EB_VM_SMP=1
guest_devices() { # guest_devices USER: the channel and the credentials
	printf '%s\n' -chardev "socket,id=seed,path=$d/host/virtio.sock,reconnect=1" \
		-device "virtserialport,chardev=seed,name=$port" \
		-fw_cfg "name=opt/io.systemd.credentials/eb.key,file=$d/host/$1.key" \
		-smbios "type=11,value=io.systemd.credential:eb.user=$1"
}
mapfile -t devices < <(printf '%s\n' -device "vmgenid,guid=auto"; guest_devices vm1)
mapfile -t devices_vm2 < <(guest_devices vm2)
draws() { grep -c "user $1 connected as sink" "$d/host/broker.log" || true; }

# save DIR STATE: the guest in DIR (the current EB_VM_DIR) stopped and its state saved.
save() {
	local st i
	# A 9p export blocks migration while the guest has it mounted; the disk is flushed first.
	guest 'sync; umount /mnt/host 2>/dev/null; true' >/dev/null
	vm_mon stop >/dev/null || fail "stop"
	vm_mon "migrate \"exec:cat > $2\"" >/dev/null || fail "QEMU refused to save the state"
	for ((i = 0; i < 300; i++)); do
		st=$(vm_mon 'info migrate' | sed -n 's/^Migration status: *//p')
		[[ $st == completed ]] && break
		[[ $st == failed ]] && fail "saving the state failed: $(vm_mon 'info migrate' | tr '\n' ' ')"
		sleep 0.2
	done
	[[ $st == completed ]] || fail "saving the state did not complete ($st)"
	vm_stop "$1"
	report "saved state $(basename "$2"): $(du -h "$2" | cut -f1)"
}

# original: the current guest booted, its watcher running, no generation yet; prints the seed
# file's hash.
original() {
	local name
	name=$(basename "$EB_VM_DIR")
	wait_guest 60 'systemctl is-active --quiet eb-seed-fork.service' >/dev/null ||
		fail "eb-seed-fork.service is not running in $name"
	[[ $(guest 'cat /run/entropy-broker/generation 2>/dev/null || echo none') == none ]] ||
		fail "$name has a generation before any fork"
	guest 'sha256sum /var/lib/systemd/random-seed | cut -c1-64'
}

step "the originals, booted side by side: vm1 with a vmgenid device, vm2 without; then saved"
export EB_VM_DRIVE="file=$d/saved2.qcow2,if=virtio,format=qcow2"
vm_start "$d/orig2" -- "${devices_vm2[@]}" || fail "QEMU did not start the second original"
_EB_OWN_VMS+=("$d/orig2")
export EB_VM_DRIVE="file=$d/saved.qcow2,if=virtio,format=qcow2"
own_vm "$d/orig" -- "${devices[@]}"
diag 'systemctl status --no-pager eb-seed-fork.service eb-seed-reseed.service; journalctl -b --no-pager -o short-monotonic -t eb-sink-kernel'
seed0=$(original)
save "$d/orig" "$d/state"
EB_VM_DIR=$d/orig2
vm_wait_ready || fail "the second original did not boot (see $d/orig2/serial.log)"
seed0_vm2=$(original)
save "$d/orig2" "$d/state2"

# copy NAME USER BASE STATE DEVICES...: starts a copy from the saved state, paused; `cont`; waits
# for its reseed and checks it. Prints its getrandom() bytes.
copy() {
	local name=$1 user=$2 base=$3 state=$4 t0 t1 tc="" line gen seed rnd n0 jump mark
	shift 4
	cp --sparse=always "$base" "$d/$name.qcow2"
	export EB_VM_DRIVE="file=$d/$name.qcow2,if=virtio,format=qcow2"
	n0=$(draws "$user")
	vm_start "$d/$name" -- "$@" -S -incoming "exec:cat $state" ||
		fail "$name: QEMU did not start from the saved state"
	_EB_OWN_VMS+=("$d/$name")
	for ((i = 0; i < 600; i++)); do
		vm_mon 'info status' | grep -q 'inmigrate' || break
		sleep 0.2
	done
	vm_mon 'info status' | grep -q 'paused' || fail "$name: not paused after loading: $(vm_mon 'info status')"
	t0=$(eb_now)
	vm_mon cont >/dev/null || fail "$name: cont"
	if [[ $user == vm2 ]]; then
		wait_guest 60 'journalctl -o cat -t eb-sink-kernel MESSAGE_ID=efe5014b814841a2b427a9e0ecb8200a | grep -q .' >/dev/null ||
			fail "$name: the clock trigger did not start the reseed within 60 s of cont"
		tc=$(eb_elapsed "$t0")
	fi
	wait_guest 120 'journalctl -o cat -t eb-sink-kernel | grep -q "^Reseeded with"' >/dev/null ||
		fail "$name: no reseed line within 120 s of cont"
	t1=$(eb_elapsed "$t0")
	if [[ $user == vm2 ]]; then
		[[ $(guest 'journalctl -k -o cat | grep -c "crng reseeded due to virtual machine fork" || true') == 0 ]] ||
			fail "$name: the kernel logged a VM fork without a vmgenid device"
		jump=$(guest 'journalctl -o json -t eb-sink-kernel MESSAGE_ID=efe5014b814841a2b427a9e0ecb8200a | jq -r .EB_CLOCK_JUMP_MS')
		if ! [[ $jump =~ ^[0-9]+$ ]] || ((jump <= 3000)); then
			fail "$name: the clock line's jump is '$jump'"
		fi
		awk -v t="$tc" -v b="$clock_bound" 'BEGIN { exit !(t <= b) }' ||
			fail "$name: the clock trigger took ${tc} s from cont, over ${clock_bound} s"
	else
		guest 'journalctl -k -o cat | grep -q "crng reseeded due to virtual machine fork"' ||
			fail "$name: the kernel did not log the VM fork"
		jump=$(guest 'journalctl -o cat -t eb-sink-kernel | sed -n "s/^The kernel.s fork line answers the RTC.s jump of \(.*\) s$/\1/p" | tail -n 1')
	fi
	line=$(guest 'journalctl -o json -t eb-sink-kernel | jq -r "select(.EB_GENERATION != null) | \"\(.EB_GENERATION) \(.MESSAGE)\"" | tail -n 1')
	[[ $line == "1 Reseeded with 256 bits from virtio:$port"* ]] ||
		fail "$name: the reseed line is not generation 1 from the port: $line"
	gen=$(guest 'cat /run/entropy-broker/generation')
	[[ $gen == 1 ]] || fail "$name: the generation file says '$gen', not 1"
	seed=$(guest 'sha256sum /var/lib/systemd/random-seed | cut -c1-64')
	[[ $seed != "$seed0" && $seed != "$seed0_vm2" ]] || fail "$name: the seed file was not rewritten"
	# systemd's mark, read with getxattr(2) (x86_64's 191) from perl-base: the image has no attr.
	mark=$(guest "perl -e '\$p = \"/var/lib/systemd/random-seed\"; \$x = \"user.random-seed-creditable\"; \$b = \"\\0\" x 8; \$n = syscall(191, \$p, \$x, \$b, 8); print \$n < 0 ? \"none\" : substr(\$b, 0, \$n)'")
	[[ $mark == 1 ]] || fail "$name: the rewritten seed file's user.random-seed-creditable is '$mark', not 1"
	rnd=$(guest 'head -c 32 /dev/urandom | od -An -tx1 -v | tr -d " \n"')
	[[ ${#rnd} == 64 ]] || fail "$name: no 32 bytes of getrandom()"
	(($(draws "$user") == n0 + 1)) || fail "$name: the host broker saw $(($(draws "$user") - n0)) sessions of $user, not one"
	if [[ $user == vm2 ]]; then
		report "$name (no vmgenid): the clock trigger ${tc} s after cont (RTC ${jump} ms ahead), reseeded ${t1} s after cont; generation $gen; broker lines for $user: $n0 -> $(draws "$user")"
	else
		report "$name: reseeded ${t1} s after cont; generation $gen; broker lines for $user: $n0 -> $(draws "$user"); the fork line answered the RTC's jump of ${jump:-?} s; getrandom ${rnd:0:16}..."
	fi
	printf '%s\n' "$rnd" >"$d/$name.rnd"
	[[ $user == vm2 ]] && pause "$name" "$user" "$((n0 + 1))"
	vm_stop "$d/$name"
}

# pause NAME USER DRAWS: the host stops the running copy for 6 s (QEMU's stop, then cont in the
# same process, as a loadvm resumes): the guest's clocks stood still while the RTC did not, so the
# clock trigger fires once more and costs one draw. What is judged is the trigger (once) and the
# draws (at most one); the draw itself can fail in this pause, and is reported, not judged: once
# in six runs it met QEMU's chardev connection to the broker at the broker's hello timeout (the
# connection QEMU made while the guest stood still), and the handshake failed as a refusal,
# which the reseed does not retry (docs/vm-seeding.md, "Snapshots and clones").
pause() {
	local gen mark
	mark=efe5014b814841a2b427a9e0ecb8200a
	vm_mon stop >/dev/null || fail "$1: stop"
	sleep 6
	vm_mon cont >/dev/null || fail "$1: cont after the pause"
	wait_guest 60 "[[ \$(journalctl -o cat -t eb-sink-kernel MESSAGE_ID=$mark | wc -l) -ge 2 ]]" >/dev/null ||
		fail "$1: the clock trigger did not fire within 60 s of a 6 s pause"
	wait_guest 60 '[[ $(cat /run/entropy-broker/generation) == 2 || $(systemctl show -P ActiveState eb-seed-reseed.service) == failed ]]' >/dev/null ||
		fail "$1: the reseed after the pause neither succeeded nor failed within 60 s"
	gen=$(guest "journalctl -o cat -t eb-sink-kernel MESSAGE_ID=$mark | wc -l")
	[[ $gen == 2 ]] || fail "$1: $gen lines of the clock trigger after the pause, not 2"
	if [[ $(guest 'cat /run/entropy-broker/generation') == 2 ]]; then
		(($(draws "$2") == $3 + 1)) || fail "$1: the host broker saw $(($(draws "$2") - $3)) sessions of $2 for the pause, not one"
		report "$1: paused 6 s by the host: reseeded again (generation 2), one session more"
	else
		(($(draws "$2") <= $3 + 1)) || fail "$1: the host broker saw $(($(draws "$2") - $3)) sessions of $2 for the pause, more than one"
		report "$1: paused 6 s by the host: the clock trigger fired once, but its reseed failed (known, docs/vm-seeding.md): $(guest 'journalctl -o cat -t eb-sink-kernel -p err | tail -n 2 | tr "\n" " "')"
	fi
}

step "copy a"
copy a vm1 "$d/saved.qcow2" "$d/state" "${devices[@]}"
step "copy b"
copy b vm1 "$d/saved.qcow2" "$d/state" "${devices[@]}"
[[ $(cat "$d/a.rnd") != "$(cat "$d/b.rnd")" ]] || fail "the two copies' getrandom() output is the same"
report "the copies' 32 bytes of getrandom() differ"
step "copy c, of the guest without a vmgenid device"
copy c vm2 "$d/saved2.qcow2" "$d/state2" "${devices_vm2[@]}"
