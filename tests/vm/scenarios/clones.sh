#!/bin/bash
# SPDX-License-Identifier: MIT
# A fresh seed in every copy (issue 28): a running guest with a vmgenid device and the seeder set
# up as docs/vm-seeding.md says (eb-seed-fork.service, its key as a fw_cfg credential, the
# virtio-serial port to a host broker) is saved (migrate "exec:cat > state"), then two copies are
# started from that state, one after the other (-incoming, a qcow2 overlay each, -smp 1). In each:
# the kernel's "virtual machine fork" line, eb-seed-reseed.service's line with generation 1, one
# draw more in the host broker's log, the generation file at 1, the seed file rewritten, and 32
# bytes of getrandom() after the reseed that differ between the copies; the time from `cont` to
# the reseed line is printed.
# order: 86
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
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

step "the guest image: eb-seed-fork.service enabled, seed.env naming the port"
printf 'EB_BROKER=virtio:%s\n' "$port" >"$d/seed.env"
image_with "$d/seed.img" "$d/seed.env" /etc/entropy-broker/seed.env
debugfs -w -R "mkdir /etc/systemd/system/multi-user.target.wants" "$d/seed.img" >/dev/null 2>&1 || true
debugfs -w -R "symlink /etc/systemd/system/multi-user.target.wants/eb-seed-fork.service /usr/lib/systemd/system/eb-seed-fork.service" \
	"$d/seed.img" >/dev/null 2>&1 || fail "debugfs could not enable eb-seed-fork.service"
qemu-img create -q -f qcow2 -b "$d/seed.img" -F raw "$d/saved.qcow2" || fail "qemu-img create"

step "host: a broker with the guest's user (guest = yes), filled"
key=$(head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n')
mkdir -p "$d/host"
printf '%s\n' "$key" >"$d/host/vm1.key"
chmod 0600 "$d/host/vm1.key"
printf '\n[user vm1]\nrole = sink\nguest = yes\nkey-file = %s\n' "$d/host/vm1.key" >"$d/host/users.conf"
host_broker "$d/host" "unix+tls:$d/host/virtio.sock"
head -c 65536 /dev/urandom | "$(host_program eb-source-file)" -b "$HOST_BROKER" --credit-per-byte 8 - ||
	fail "could not fill the host broker"

# Every copy must have the devices the saved one had; its disk, sockets and logs are its own.
export EB_VM_SMP=1
devices=(-device "vmgenid,guid=auto"
	-chardev "socket,id=seed,path=$d/host/virtio.sock,reconnect=1"
	-device "virtserialport,chardev=seed,name=$port"
	-fw_cfg "name=opt/io.systemd.credentials/eb.key,file=$d/host/vm1.key"
	-smbios "type=11,value=io.systemd.credential:eb.user=vm1")
draws() { grep -c 'user vm1 connected as sink' "$d/host/broker.log" || true; }

step "the original: booted, the watcher running, then saved"
export EB_VM_DRIVE="file=$d/saved.qcow2,if=virtio,format=qcow2"
own_vm "$d/orig" -- "${devices[@]}"
diag 'systemctl status --no-pager eb-seed-fork.service eb-seed-reseed.service; journalctl -b --no-pager -o short-monotonic -t eb-sink-kernel'
wait_guest 60 'systemctl is-active --quiet eb-seed-fork.service' >/dev/null ||
	fail "eb-seed-fork.service is not running in the original"
seed0=$(guest 'sha256sum /var/lib/systemd/random-seed | cut -c1-64')
[[ $(guest 'cat /run/entropy-broker/generation 2>/dev/null || echo none') == none ]] ||
	fail "the original has a generation before any fork"
# A 9p export blocks migration while the guest has it mounted; the disk is flushed first.
guest 'sync; umount /mnt/host 2>/dev/null; true' >/dev/null
vm_mon stop >/dev/null || fail "stop"
vm_mon "migrate \"exec:cat > $d/state\"" >/dev/null || fail "QEMU refused to save the state"
for ((i = 0; i < 300; i++)); do
	st=$(vm_mon 'info migrate' | sed -n 's/^Migration status: *//p')
	[[ $st == completed ]] && break
	[[ $st == failed ]] && fail "saving the state failed: $(vm_mon 'info migrate' | tr '\n' ' ')"
	sleep 0.2
done
[[ $st == completed ]] || fail "saving the state did not complete ($st)"
vm_stop "$d/orig"
report "saved state: $(du -h "$d/state" | cut -f1)"

# copy NAME: starts a copy from the saved state, paused; `cont`; waits for its reseed.
copy() {
	local name=$1 t0 t1 line gen seed rnd n0
	cp --sparse=always "$d/saved.qcow2" "$d/$name.qcow2"
	export EB_VM_DRIVE="file=$d/$name.qcow2,if=virtio,format=qcow2"
	n0=$(draws)
	vm_start "$d/$name" -- "${devices[@]}" -S -incoming "exec:cat $d/state" ||
		fail "$name: QEMU did not start from the saved state"
	_EB_OWN_VMS+=("$d/$name")
	for ((i = 0; i < 600; i++)); do
		vm_mon 'info status' | grep -q 'inmigrate' || break
		sleep 0.2
	done
	vm_mon 'info status' | grep -q 'paused' || fail "$name: not paused after loading: $(vm_mon 'info status')"
	t0=$(eb_now)
	vm_mon cont >/dev/null || fail "$name: cont"
	wait_guest 120 'journalctl -o cat -t eb-sink-kernel | grep -q "^Reseeded with"' >/dev/null ||
		fail "$name: no reseed line within 120 s of cont"
	t1=$(eb_elapsed "$t0")
	guest 'journalctl -k -o cat | grep -q "crng reseeded due to virtual machine fork"' ||
		fail "$name: the kernel did not log the VM fork"
	line=$(guest 'journalctl -o json -t eb-sink-kernel | jq -r "select(.EB_GENERATION != null) | \"\(.EB_GENERATION) \(.MESSAGE)\"" | tail -n 1')
	[[ $line == "1 Reseeded with 256 bits from virtio:$port"* ]] ||
		fail "$name: the reseed line is not generation 1 from the port: $line"
	gen=$(guest 'cat /run/entropy-broker/generation')
	[[ $gen == 1 ]] || fail "$name: the generation file says '$gen', not 1"
	seed=$(guest 'sha256sum /var/lib/systemd/random-seed | cut -c1-64')
	[[ $seed != "$seed0" ]] || fail "$name: the seed file was not rewritten"
	rnd=$(guest 'head -c 32 /dev/urandom | od -An -tx1 -v | tr -d " \n"')
	[[ ${#rnd} == 64 ]] || fail "$name: no 32 bytes of getrandom()"
	(($(draws) == n0 + 1)) || fail "$name: the host broker saw $(($(draws) - n0)) sessions of vm1, not one"
	report "$name: reseeded ${t1} s after cont; generation $gen; broker lines for vm1: $n0 -> $(draws); getrandom ${rnd:0:16}..."
	printf '%s\n' "$rnd" >"$d/$name.rnd"
	vm_stop "$d/$name"
}

step "copy a"
copy a
step "copy b"
copy b
[[ $(cat "$d/a.rnd") != "$(cat "$d/b.rnd")" ]] || fail "the two copies' getrandom() output is the same"
report "the copies' 32 bytes of getrandom() differ"
