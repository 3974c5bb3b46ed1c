#!/bin/bash
# SPDX-License-Identifier: MIT
# Early-boot seeding that arrives first, in numbers. The same guest image (eb-seed-virtio.service
# enabled: sysinit.target and the port's device unit want it) boots on a CPU without RDRAND or RDSEED
# (qemu64,-rdrand,-rdseed) in four ways, and the scenario prints when the kernel said
# "crng init done" and what the seeder logged:
#   a  no seeding: no port, no virtio-rng;
#   b  virtio-rng backed by QEMU's rng-egd on the host's eb-sink-egd, which draws from a host
#      broker (the documented first choice);
#   c  eb-seed-virtio.service: the port org.entropy-broker.seed.0, QEMU's chardev connected to the
#      host broker's unix+tls listener, the guest's key as a fw_cfg credential (from a file, as
#      docs/vm-seeding.md advises) and its user as an SMBIOS one;
#   d  as c with the host side absent (nothing listens behind the chardev), key and user as SMBIOS
#      credentials.
#   e  the seeder in a real initramfs-tools image: the guest's own mkinitramfs (chrooted into the
#      image with the project installed and EB_INITRAMFS=yes) runs the package's hook; c's port, host
#      broker and fw_cfg key, which the init-premount script reads itself (no systemd in the
#      initramfs to import it);
#   f  e's image with the host side absent.
# It fails unless b and c initialise the CRNG earlier than a, c's seeder logs that it credited
# the kernel before it was initialised (which it can only do with the key fw_cfg brought), and in
# d boot goes on before the seeder gives up (it says READY=1 at its --ready-timeout=2 and goes on in
# the background), boot waits for it (systemd's "Starting" to "Started" of its unit, in the same
# boot) no longer than its start (systemd's set-up to its first line), its 2 s and D_SLACK (1 s),
# and the seeder gives up in one line within its 15 s. d's CRNG time against a's, counted from
# the start of modprobe@virtio_console.service, is printed, not checked: two boots of a TCG guest
# on a loaded 2-core host differ by seconds (a's alone came 2.6 to 8.8 s after it in six runs),
# so a check across boots failed with nothing changed, while the wait is measured in one boot. "Earlier" is counted from a milestone of the same
# boot, not on the kernel's clock: the kernel and initramfs before PID 1 took 3.6 to 25 s in runs
# on a loaded 2-core host, which has nothing to do with seeding. For b it is PID 1's start. For c
# it is the start of systemd-random-seed.service, which waits for the CRNG when nothing seeded it
# (a: init comes some seconds after it starts) and which the seeder is ordered before, up to its
# --ready-timeout (c: init comes before it starts, or soon after, if the seeder's start-up under
# TCG outlasted the bound); from PID 1's start, c beat a by only 1.1 s in an unloaded run, a margin
# that the boot's own jitter could eat.
# e must credit the kernel before "crng init done" and before switch_root (systemd's first line in
# the same boot's kernel log), the key by fw_cfg, with its CRNG initialised no later after PID 1's
# start than b's, and eb-seed-virtio.service must skip itself (ConditionPathExists=! on the
# script's /run/entropy-broker/initramfs); in f boot may wait for the seeder no longer than in d
# (plus D_SLACK) and than its stated bound, EB_TIMEOUT (2) + 5 s, and the unit must skip too.
# order: 82
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

need usr/sbin/eb-brokerd -- "issue 'core slice' not landed"
need_program eb-sink-kernel "issue 'Sinks' (kernel sink) not landed"
need_program eb-sink-egd "issue 'Sinks' (EGD sink) not landed"
need_program eb-source-file "issue 'core slice' (eb-source-file) not landed"
need lib/systemd/system/eb-seed-virtio.service -- "issue 10 (virtio-serial seeder) not landed"
need usr/share/initramfs-tools/hooks/entropy-broker -- "issue 28 (seeding from the initramfs) not landed"
checks_done

d=$EB_VM_SCENARIO_DIR
cpu=qemu64,-rdrand,-rdseed
port=org.entropy-broker.seed.0
wants='/etc/systemd/system/dev-virtio\x2dports-org.entropy\x2dbroker.seed.0.device.wants'

# crng_time: seconds from kernel start to "crng init done" in the current guest, to 0.01 s.
crng_time() {
	guest "dmesg | sed -n 's/^\[ *\([0-9.]*\)\] random: crng init done.*/\1/p' | head -n 1" |
		awk 'NF { printf "%.2f\n", $1 }'
}
# since_pid1 T: T (kernel clock) less the moment PID 1 started, to 0.01 s.
since_pid1() {
	local u
	u=$(guest 'systemctl show -P UserspaceTimestampMonotonic')
	awk -v t="$1" -v u="$u" 'BEGIN { printf "%.2f\n", t - u / 1e6 }'
}
# since_modprobe T: T (kernel clock) less the first start of modprobe@virtio_console.service this
# boot (later ones are udev's, at coldplug).
since_modprobe() {
	local u
	u=$(guest 'journalctl -b --no-pager -o short-monotonic | grep "systemd\[1\]: Starting modprobe@virtio_console"' |
		sed -n 's/^\[ *\([0-9.]*\)\].*Starting modprobe@virtio_console.*/\1/p' | head -n 1)
	[[ -n $u ]] || fail "no 'Starting modprobe@virtio_console.service' in the journal"
	awk -v t="$1" -v u="$u" 'BEGIN { printf "%.2f\n", t - u }'
}
# seeder_log: what eb-sink-kernel logged this boot (an early-boot process's entries may lack
# _SYSTEMD_UNIT, so by its identifier), with kernel-clock times.
seeder_log() { guest 'journalctl -b --no-pager -o short-monotonic -t eb-sink-kernel'; }
earlier() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x + 0 < y + 0) }'; }
# since_random_seed T: T (kernel clock) less the moment systemd-random-seed.service started.
since_random_seed() {
	local u
	u=$(guest 'systemctl show -P ExecMainStartTimestampMonotonic systemd-random-seed.service')
	awk -v t="$1" -v u="$u" 'BEGIN { printf "%+.2f\n", t - u / 1e6 }'
}
# timeline: the boot's milestones for seeding, into the scenario's log (not the report).
timeline() {
	guest 'journalctl -b --no-pager -o short-monotonic |
		grep -E "crng|random|hwrng|virtio|vport|eb-seed|eb-sink|sysinit.target|udev-trigger|Startup finished" |
		head -n 60' || true
}

step "the guest image: eb-seed-virtio.service enabled, as systemctl enable does"
cp --sparse=always "$EB_VM_ROOTIMG" "$d/seed.img"
for w in /etc/systemd/system/sysinit.target.wants "$wants"; do
	debugfs -w -R "mkdir $w" "$d/seed.img" >/dev/null 2>&1 || true
	debugfs -w -R "symlink $w/eb-seed-virtio.service /usr/lib/systemd/system/eb-seed-virtio.service" \
		"$d/seed.img" >/dev/null 2>&1 || fail "debugfs could not enable eb-seed-virtio.service in $w"
done
export EB_VM_ROOTIMG=$d/seed.img

step "host: a broker with the guest's user, filled; eb-sink-egd on it"
key=$(head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n')
mkdir -p "$d/host"
printf '%s\n' "$key" >"$d/host/vm1.key"
chmod 0600 "$d/host/vm1.key"
printf '\n[user vm1]\nrole = sink\nkey-file = %s\n' "$d/host/vm1.key" >"$d/host/users.conf"
host_broker "$d/host" "unix+tls:$d/host/virtio.sock"
head -c 65536 /dev/urandom | "$(host_program eb-source-file)" -b "$HOST_BROKER" --credit-per-byte 8 - ||
	fail "could not fill the host broker"
"$(host_program eb-sink-egd)" -b "$HOST_BROKER" -l "unix:$d/egd.sock" >"$d/egd.log" 2>&1 &
_EB_HOST_PIDS+=($!)
for ((i = 0; i < 100; i++)); do
	[[ -S $d/egd.sock ]] && break
	sleep 0.1
done
[[ -S $d/egd.sock ]] || fail "eb-sink-egd did not listen: $(tail -n 3 "$d/egd.log" | tr '\n' ' ')"

creds=(-smbios "type=11,value=io.systemd.credential:eb.key=$key"
	-smbios "type=11,value=io.systemd.credential:eb.user=vm1")
fwcfg=(-fw_cfg "name=opt/io.systemd.credentials/eb.key,file=$d/host/vm1.key"
	-smbios "type=11,value=io.systemd.credential:eb.user=vm1")
# How much later than a's the CRNG may initialise in d, beyond the seeder's start and its 2 s
# bound: boots vary by a second or so on an idle host.
D_SLACK=${EB_VM_D_SLACK:-1}
row() { printf '%-2s %-28s %-10s %-12s %s\n' "$@"; }
table=("$(row '' boot 'crng init' 'after PID 1' 'the seeder says')")

step "a: no seeding"
own_vm "$d/a" --cpu "$cpu"
guest 'grep -qw rdrand /proc/cpuinfo && echo "CPU has RDRAND" || echo "CPU without RDRAND"' | grep -qx 'CPU without RDRAND' ||
	fail "the guest's CPU has RDRAND: the kernel would not wait"
ta=$(crng_time)
timeline
[[ -n $ta ]] || fail "a: no 'crng init done' in dmesg"
ra=$(since_pid1 "$ta")
sa=$(since_random_seed "$ta")
ma=$(since_modprobe "$ta")
[[ $(guest 'systemctl show -P ConditionResult eb-seed-virtio.service') == no ]] ||
	fail "a: eb-seed-virtio.service did not skip itself in a guest given no key"
table+=("$(row a 'no seeding' "$ta s" "$ra s" '-')")
vm_stop "$d/a"

step "b: virtio-rng, QEMU's rng-egd on the host's eb-sink-egd"
own_vm "$d/b" --cpu "$cpu" -- -chardev "socket,id=egdc,path=$d/egd.sock" \
	-object rng-egd,id=egd0,chardev=egdc \
	-device virtio-rng-pci,rng=egd0,max-bytes=4096,period=1000
tb=$(crng_time)
timeline
[[ -n $tb ]] || fail "b: no 'crng init done' in dmesg"
rb=$(since_pid1 "$tb")
rng=$(guest 'cat /sys/class/misc/hw_random/rng_current')
[[ $rng == virtio_rng.* ]] || fail "b: the guest's hwrng is '$rng', not virtio-rng"
table+=("$(row b 'virtio-rng from eb-sink-egd' "$tb s" "$rb s" "(the kernel's hwrng thread) rng_current=$rng")")
vm_stop "$d/b"

step "c: eb-seed-virtio.service over the port, host side on the broker's unix+tls listener, key by fw_cfg"
own_vm "$d/c" --cpu "$cpu" -- -chardev "socket,id=seed,path=$d/host/virtio.sock,reconnect=1" \
	-device "virtserialport,chardev=seed,name=$port" "${fwcfg[@]}"
diag 'systemctl status --no-pager eb-seed-virtio.service; journalctl -b --no-pager -o short-monotonic -t eb-sink-kernel -u eb-seed-virtio.service'
tc=$(crng_time)
timeline
[[ -n $tc ]] || fail "c: no 'crng init done' in dmesg"
rc=$(since_pid1 "$tc")
sc=$(since_random_seed "$tc")
log=$(seeder_log)
echo "$log"
line=$(grep -m1 'Credited [0-9]* bits from virtio:' <<<"$log") ||
	fail "c: eb-seed-virtio.service logged no 'Credited N bits from virtio:...'"
table+=("$(row c 'eb-seed-virtio.service' "$tc s" "$rc s" "${line#*eb-sink-kernel*: }")")
grep -q 'was not initialised before them and is now' <<<"$line" ||
	fail "c: the seeder did not credit the kernel before it was initialised: $line"
[[ $(guest 'systemctl show -P Result eb-seed-virtio.service') == success ]] ||
	fail "c: eb-seed-virtio.service did not succeed"
# The key came by fw_cfg only: PID 1 imported it from there, and the seeder's TLS session with
# the host broker as vm1 could only be keyed by it.
guest 'ls /sys/firmware/qemu_fw_cfg/by_name/opt/io.systemd.credentials/eb.key/raw' >/dev/null ||
	fail "c: the guest does not see the fw_cfg entry opt/io.systemd.credentials/eb.key"
guest 'systemd-creds --system list --no-legend' | grep -q '^eb\.key ' ||
	fail "c: PID 1 did not import eb.key from fw_cfg"
vm_stop "$d/c"
_EB_DIAG=()

step "d: the same, with nothing behind the host side of the port"
own_vm "$d/d" --cpu "$cpu" -- -chardev "socket,id=seed,path=$d/nobody.sock,reconnect=1" \
	-device "virtserialport,chardev=seed,name=$port" "${creds[@]}"
diag 'systemctl status --no-pager eb-seed-virtio.service; journalctl -b --no-pager -o short-monotonic -t eb-sink-kernel -u eb-seed-virtio.service'
td=$(crng_time)
timeline
rd=$(since_pid1 "${td:-0}")
# Boot went on after the bound; the seeder goes on trying until its --timeout in the background.
wait_guest 60 'systemctl is-failed --quiet eb-seed-virtio.service' ||
	fail "d: eb-seed-virtio.service did not fail within 60 s as it should with no host"
[[ $(guest 'systemctl show -P Result eb-seed-virtio.service') == exit-code ]] ||
	fail "d: eb-seed-virtio.service did not fail with its exit code"
# The first run only: the port's device unit starts the failed unit again at coldplug.
log=$(seeder_log)
echo "$log"
pid=$(sed -n 's/.*eb-sink-kernel\[\([0-9]*\)\].*/\1/p' <<<"$log" | head -n 1)
log=$(grep -F "eb-sink-kernel[$pid]:" <<<"$log")
md=$(since_modprobe "${td:-0}")
# Boot went on (systemd's "Started", on READY=1) before the seeder gave up: from "Starting" to
# "Started" is how long boot waited for it, its exec and sandbox included.
units=$(guest 'journalctl -b --no-pager -o short-monotonic | grep "systemd\[1\]: .*eb-seed-virtio.service"')
t_starting=$(sed -n 's/^\[ *\([0-9.]*\)\].*Starting eb-seed-virtio.service.*/\1/p' <<<"$units" | head -n 1)
t_started=$(sed -n 's/^\[ *\([0-9.]*\)\].*Started eb-seed-virtio.service.*/\1/p' <<<"$units" | head -n 1)
t_gaveup=$(sed -n 's/^\[ *\([0-9.]*\)\].*giving up.*/\1/p' <<<"$log" | head -n 1)
grep -q 'Not seeded within --ready-timeout=2 s' <<<"$log" ||
	fail "d: the seeder did not say it let boot go on (READY=1 at --ready-timeout)"
if ! [[ -n $t_starting && -n $t_started && -n $t_gaveup ]] || ! earlier "$t_started" "$t_gaveup"; then
	fail "d: boot did not go on before the seeder gave up (Starting ${t_starting:-?}, Started ${t_started:-?}, gave up ${t_gaveup:-?})"
fi
held=$(awk -v a="$t_starting" -v b="$t_started" 'BEGIN { printf "%.1f", b - a }')
# What boot may lose to the seeder: systemd setting up its process (from "Starting" to the
# program's first line: its sandbox and credentials, 1.7 s with OpenSSL's start-up in an idle TCG
# guest, several times that on a loaded host), its 2 s bound, and D_SLACK for the boot's jitter.
t_first=$(sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p' <<<"$log" | head -n 1)
margin=$(awk -v a="$t_starting" -v f="$t_first" -v s="$D_SLACK" 'BEGIN { printf "%.1f", (f - a) + 2 + s }')
errors=$(grep -cE 'giving up|--timeout reached' <<<"$log" || true)
((errors == 1)) || fail "d: the seeder logged $errors lines on giving up, not one"
line=$(grep -E 'giving up|--timeout reached' <<<"$log")
grep -q "Cannot reach a broker: cannot connect to virtio:$port: Transport endpoint is not connected" <<<"$line" ||
	fail "d: the seeder's line does not say that the host side never connected: $line"
# From its first line (when its --timeout starts) to its last, by the kernel's clock.
took=$(sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p' <<<"$log" | sed -n '1p;$p' | paste -sd' ' |
	awk '{ printf "%.1f", $2 - $1 }')
awk -v t="$took" 'BEGIN { exit !(t <= 15.5) }' || fail "d: the seeder took $took s to give up, more than its 15 s bound"
table+=("$(row d 'c with the host side absent' "${td:-?} s" "$rd s" "READY=1 after $held s; gave up after $took s: ${line#*eb-sink-kernel*: }")")

# kmsg_time PATTERN: the kernel-clock time of the first dmesg line matching PATTERN (ERE).
kmsg_time() {
	guest "dmesg | grep -m1 -E '$1' || true" | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'
}

step "e: the seeder in an initramfs-tools image (EB_INITRAMFS=yes), made by the guest's own mkinitramfs"
# The image's root file system with the project installed, and the administrator's one line; the
# modules the initramfs needs listed (MODULES=list: "dep" would look at this host's hardware).
img=$(dirname "$EB_VM_KERNEL")
kver=$(cat "$img/kernel-version")
it=$d/initramfs
mkdir -p "$it/upper/etc/entropy-broker" "$it/upper/etc/initramfs-tools/conf.d" "$it/work" "$it/merged"
printf 'EB_INITRAMFS=yes\n' >"$it/upper/etc/entropy-broker/initramfs.conf"
printf 'MODULES=list\n' >"$it/upper/etc/initramfs-tools/conf.d/eb-vm"
printf '%s\n' virtio_pci virtio_blk crc32c_generic ext4 >"$it/upper/etc/initramfs-tools/modules"
t0=$(date +%s.%N)
unshare --mount sh -euc '
	mount --make-rprivate /
	mount -t overlay overlay -o "lowerdir=$1:$2,upperdir=$3/upper,workdir=$3/work" "$3/merged" ||
		{ cp -a "$2/." "$1/." "$3/upper/." "$3/merged/"; }
	mount -t proc proc "$3/merged/proc"
	mount -t sysfs sysfs "$3/merged/sys"
	mount --bind /dev "$3/merged/dev"
	chroot "$3/merged" mkinitramfs -o /eb-initrd.img "$4"
	cp "$3/merged/eb-initrd.img" "$5"
' sh "$EB_VM_DESTDIR" "$img/rootfs" "$it" "$kver" "$d/initrd-e.img" >"$it/mkinitramfs.log" 2>&1 ||
	fail "e: mkinitramfs failed: $(tail -n 3 "$it/mkinitramfs.log" | tr '\n' ' ')"
tmk=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat "$it/mkinitramfs.log"
echo "mkinitramfs took $tmk s; $(du -h "$d/initrd-e.img" | cut -f1)"
EB_VM_INITRD=$d/initrd-e.img own_vm "$d/e" --cpu "$cpu" -- -chardev "socket,id=seed,path=$d/host/virtio.sock,reconnect=1" \
	-device "virtserialport,chardev=seed,name=$port" "${fwcfg[@]}"
diag 'dmesg | grep -E "eb-|crng|systemd 2"; systemctl status --no-pager eb-seed-virtio.service'
guest 'dmesg | grep -E "eb-seed-initramfs|eb-sink-kernel|crng init|systemd\[1\]: systemd 2"'
te=$(crng_time)
[[ -n $te ]] || fail "e: no 'crng init done' in dmesg"
re=$(since_pid1 "$te")
e_start=$(kmsg_time 'eb-seed-initramfs: Seeding from')
e_credit=$(kmsg_time 'eb-sink-kernel: Credited [0-9]+ bits from virtio:')
e_pid1=$(kmsg_time 'systemd\[1\]: systemd [0-9]+.* running in system mode')
line=$(guest "dmesg | grep -m1 -E 'eb-sink-kernel: Credited [0-9]+ bits from virtio:'") ||
	fail "e: the initramfs's seeder logged no 'Credited N bits from virtio:...' in the kernel's log"
grep -q 'key by fw_cfg' <<<"$(guest "dmesg | grep -m1 'eb-seed-initramfs: Seeding from'")" ||
	fail "e: the initramfs's script did not take the key from fw_cfg"
grep -q 'was not initialised before them and is now' <<<"$line" ||
	fail "e: the initramfs's seeder did not credit the kernel before it was initialised: $line"
[[ -n $e_start && -n $e_credit && -n $e_pid1 ]] ||
	fail "e: missing from dmesg: the script's start (${e_start:-?}), the credit (${e_credit:-?}) or systemd's first line after switch_root (${e_pid1:-?})"
# The credit initialised the CRNG inside the ioctl: "crng init done" comes between the script's
# start and the seeder's line, and both before systemd's first line, which follows switch_root.
awk -v s="$e_start" -v c="$te" -v l="$e_credit" -v p="$e_pid1" 'BEGIN { exit !(s <= c && c <= l && l < p) }' ||
	fail "e: not in order: script start $e_start, crng init done $te, credited line $e_credit, systemd after switch_root $e_pid1"
[[ $(guest 'cat /run/entropy-broker/initramfs') == credited ]] ||
	fail "e: /run/entropy-broker/initramfs does not say credited"
[[ $(guest 'systemctl show -P ConditionResult eb-seed-virtio.service') == no ]] ||
	fail "e: eb-seed-virtio.service did not skip itself after the initramfs's seed"
table+=("$(row e 'the initramfs (fw_cfg key)' "$te s" "$re s" "${line#*eb-sink-kernel: } (script start $e_start s, switch_root before $e_pid1 s)")")
vm_stop "$d/e"
_EB_DIAG=()

step "f: e's initramfs with nothing behind the host side of the port"
EB_VM_INITRD=$d/initrd-e.img own_vm "$d/f" --cpu "$cpu" -- -chardev "socket,id=seed,path=$d/nobody.sock,reconnect=1" \
	-device "virtserialport,chardev=seed,name=$port" "${fwcfg[@]}"
diag 'dmesg | grep -E "eb-|crng|systemd 2"'
guest 'dmesg | grep -E "eb-seed-initramfs|eb-sink-kernel|crng init|systemd\[1\]: systemd 2"'
tf=$(crng_time)
rf=$(since_pid1 "${tf:-0}")
f_start=$(kmsg_time 'eb-seed-initramfs: Seeding from')
f_end=$(kmsg_time 'eb-seed-initramfs: Not seeded')
[[ -n $f_start && -n $f_end ]] ||
	fail "f: the initramfs's script did not log its start (${f_start:-?}) and that it did not seed (${f_end:-?})"
fheld=$(awk -v a="$f_start" -v b="$f_end" 'BEGIN { printf "%.1f", b - a }')
[[ $(guest 'cat /run/entropy-broker/initramfs') == failed* ]] ||
	fail "f: /run/entropy-broker/initramfs does not say failed"
[[ $(guest 'systemctl show -P ConditionResult eb-seed-virtio.service') == no ]] ||
	fail "f: eb-seed-virtio.service ran again after the initramfs's try: boot would wait twice"
table+=("$(row f 'e with the host side absent' "${tf:-?} s" "$rf s" "boot waited $fheld s: $(guest "dmesg | grep -m1 'eb-sink-kernel: .*giving up' | sed 's/^\[[^]]*\] //'")")")
vm_stop "$d/f"

report "${table[@]}" "crng init from systemd-random-seed.service's start: a $sa s, c $sc s" \
	"initramfs (e, f): mkinitramfs $tmk s; boot waited for the absent host $fheld s in f (eb-sink-kernel(8): EB_TIMEOUT=2 s after start-up, 7 s at most), $held s in d" \
	"crng init from modprobe@virtio_console.service's first start: a $ma s, d $md s (d may be $margin s later: its start $(awk -v m="$margin" -v s="$D_SLACK" 'BEGIN { printf "%.1f", m - 2 - s }') s, its bound 2 s, slack $D_SLACK s); boot waited $held s for the seeder"
[[ -n $td ]] || fail "d: no 'crng init done' in dmesg"
earlier "$held" "$margin" ||
	fail "d: boot waited $held s for the seeder (systemd's Starting to Started), more than its start-up, its 2 s bound and $D_SLACK s ($margin s): the absent host slowed boot"
earlier "$rb" "$ra" || fail "b: crng init done $rb s after PID 1 started, not earlier than $ra s without seeding"
earlier "$sc" "$sa" ||
	fail "c: crng init done $sc s from systemd-random-seed.service's start, not earlier than a's $sa s"
earlier "$re" "$(awk -v b="$rb" 'BEGIN { print b + 0.005 }')" ||
	fail "e: crng init done $re s after PID 1 started, later than b's $rb s"
awk -v f="$fheld" 'BEGIN { exit !(f <= 7) }' ||
	fail "f: boot waited $fheld s for the initramfs's seeder, more than its stated bound of 7 s"
earlier "$fheld" "$(awk -v h="$held" -v s="$D_SLACK" 'BEGIN { print h + s }')" ||
	fail "f: boot waited $fheld s for the initramfs's seeder with the host absent, more than d's $held s (+ $D_SLACK s)"
