#!/bin/bash
# SPDX-License-Identifier: MIT
# The Debian packages on a fresh guest, used exactly as the README's "Using it" says and not one
# step more: the base image without the meson install tree, the .debs (scripts/build-debs, or
# $EB_VM_DEBS when scripts/test built them already) in a directory of the guest, then the README's
# command lines run in order, with a virtio-rng hot-added where the README says "now plug in". It
# checks what the README promises: the packages' scripts made the users and enabled the socket,
# the source's connection activates the broker, the source donates as the shipped drop-in's
# user, the pool level and its catalog entry are in the journal, and the kernel sink seeds the
# kernel from the pool. The install opens no TCP port (ss -ltn before and after); the README's
# first steps for users on other machines open it (eb-brokerd-tcp.socket), and a keyed user then
# draws over TCP.
# order: 90
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

top=$(cd "$EB_VM_LIB/../../.." && pwd)
base=$(dirname "$EB_VM_KERNEL")/rootfs
[[ -f $top/debian/control ]] || skip "no debian/ packaging in this tree"
[[ -x $base/usr/bin/apt ]] || skip "the base image has no apt (tests/vm/image/build-image.sh)"
if [[ -z ${EB_VM_DEBS:-} ]]; then
	command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null && command -v lintian >/dev/null ||
		skip "dpkg-dev, debhelper or lintian missing (scripts/install-deps --test)"
fi
checks_done

d=$EB_VM_SCENARIO_DIR
cmds=$d/readme-commands

# The README's "Using it" section up to the users on other machines: the lines of its sh blocks
# that are not comments, block by block (an empty line between blocks), and "#plug" where a
# comment says to plug a device in.
awk '/^## Using it/ { on = 1; next } /^## |^Users on other machines/ { on = 0 } !on { next }
	/^```sh/ { inb = 1; next } /^```/ && inb { inb = 0; print ""; next }
	inb && /^# now plug in/ { print "#plug"; next }
	inb && !/^#/ && NF { print }' "$top/README.md" >"$cmds"
cat "$cmds"
grep -q 'apt install ./\*.deb' "$cmds" || fail "the README's Using it no longer installs the packages with apt install ./*.deb"
grep -q '^#plug$' "$cmds" || fail "the README's Using it no longer says where to plug in an RNG"

step "the packages"
t=$(eb_now)
if [[ -n ${EB_VM_DEBS:-} ]]; then
	debs=$EB_VM_DEBS
	report "packages from $debs (built by scripts/test)"
else
	"$top/scripts/build-debs" "$d/debs" || fail "scripts/build-debs failed (see $d/debs/build.log)"
	debs=$d/debs
	report "packages built by scripts/build-debs in $(eb_elapsed "$t") s"
fi
mkdir -p "$d/vm/share"
# Every package the build made, as "apt install ./*.deb" takes them (debug symbols aside).
for p in entropy-broker entropy-broker-common entropy-broker-sources entropy-broker-sinks \
	entropy-broker-tools; do
	compgen -G "$debs/${p}_*.deb" >/dev/null || fail "no ${p}_*.deb in $debs"
done
find "$debs" -maxdepth 1 -name '*.deb' ! -name '*-dbgsym_*' -exec cp -t "$d/vm/share/" {} +
ls -l "$d/vm/share"

step "a fresh guest: the base image alone, nothing of the project in it"
t=$(eb_now)
truncate -s 1G "$d/fresh.img"
mke2fs -q -t ext4 -d "$base" -F "$d/fresh.img" || fail "mke2fs of the base image failed"
export EB_VM_ROOTIMG=$d/fresh.img
own_vm "$d/vm"
report "fresh guest up in $(eb_elapsed "$t") s"
diag 'systemctl list-units --all --no-pager "eb-*"'
diag 'journalctl -b --no-pager -n 80 -u eb-brokerd.service -u "eb-source-stream@*" -u eb-sink-kernel.service'
diag 'ls -l /dev/hwrng; cat /sys/class/misc/hw_random/rng_current; udevadm info /dev/hwrng'
guest 'mountpoint -q /mnt/host' >/dev/null || fail "the host share is not mounted at /mnt/host"
guest 'command -v eb-brokerd; ls /lib/systemd/system/eb-* /usr/lib/systemd/system/eb-* 2>/dev/null; getent passwd eb-source; true' |
	grep . && fail "the fresh guest already has something of the project"

# The TCP listeners before anything of the project is installed: the packages may add none.
listen_before=$(guest 'ss -ltnH' | awk '{ print $4 }' | sort -u)

cleanup() {
	vm_exec -t 10 'pkill -f eb-test-feed || true' >/dev/null 2>&1 || true
}
trap 'cleanup; _eb_scenario_exit; _eb_host_exit' EXIT

# plug: a virtio-rng, hot-added; then what the README promises of it.
plug() {
	step "plug in a hardware RNG: device_add virtio-rng-pci"
	vm_mon 'device_add virtio-rng-pci,rng=rng0,id=ebvrng' || fail "QEMU refused device_add virtio-rng-pci"
	wait_guest 90 'systemctl is-active --quiet eb-source-stream@hwrng.service' ||
		fail "eb-source-stream@hwrng.service did not start within 90 s of the hotplug"
	wait_guest 90 'systemctl is-active --quiet eb-brokerd.service' ||
		fail "the source's connection did not activate eb-brokerd.service within 90 s"
	wait_guest 90 'journalctl -b -u eb-brokerd.service --no-pager | grep "user local-sources connected as source" | grep -q hwrng' ||
		fail "the broker did not take the hwrng source as user local-sources (the packaged drop-in) within 90 s"
	# shellcheck disable=SC2016 # expanded in the guest
	wait_guest 120 '[ "$(journalctl -b -u eb-brokerd.service -o json --no-pager | jq -r "select(.EB_POOL_BITS != null) | .EB_POOL_BITS" | sort -n | tail -n 1)" -gt 0 ]' ||
		fail "EB_POOL_BITS in eb-brokerd's journal stayed at 0 for 120 s with the hwrng source running"
	local show
	show=$(guest 'systemctl show -p Type -p SubState -p StatusText eb-brokerd.service')
	grep -qx 'Type=notify' <<<"$show" && grep -qx 'SubState=running' <<<"$show" ||
		fail "eb-brokerd.service is not a running Type=notify service: $show"
	report "hwrng donating as local-sources; broker $(grep StatusText <<<"$show")"
}

block=1
t_readme=$(eb_now)
while IFS= read -r line; do
	if [[ -z $line ]]; then
		block=$((block + 1))
		continue
	fi
	if [[ $line == "#plug" ]]; then
		plug
		continue
	fi
	# The build ran on the host (scripts/build-debs runs dpkg-buildpackage), and the guest
	# is root; "cd .." lands in the directory that holds the packages.
	if [[ $line == *dpkg-buildpackage* ]]; then
		echo "(on the host: $line)"
		continue
	fi
	line=${line//sudo /}
	step "README block $block: $line"
	case $line in
	*"apt install"*)
		# A bound, not an expectation: each maintainer script's deb-systemd-helper takes 1.5-3 s
		# and each daemon-reload 7-8 s in a TCG guest, more on a loaded host.
		t=$(eb_now)
		out=$(vm_exec -t 600 "cd /mnt/host && DEBIAN_FRONTEND=noninteractive $line" 2>&1) ||
			fail "'$line' failed in the guest: $(tail -n 5 <<<"$out" | tr '\n' ' ')"
		printf '%s\n' "$out"
		report "$line: $(eb_elapsed "$t") s"
		guest 'grep -E " (unpack|configure|trigproc) " /var/log/dpkg.log' || true
		# What the packages' scripts did, in one round trip: the users and directories, which
		# units they enabled (the socket and the VM seeders, nothing else), and the socket
		# listening with the service still down.
		units="eb-brokerd.socket eb-seed-vsock.service eb-seed-virtio.service eb-brokerd.service
			eb-brokerd-tcp.socket eb-brokerd-vsock.socket eb-metrics.socket eb-sink-kernel.service eb-sink-egd.socket
			eb-sink-egd-tcp.socket eb-seed.service eb-source-jitter.service"
		state=$(vm_exec "dpkg-query -W 'entropy-broker*' >&2
			getent passwd entropy-broker eb-source entropy-egd eb-metrics >/dev/null && getent group eb-sink >/dev/null && echo users
			test -d /run/entropy-broker && test -d /etc/entropy-broker/keys && echo dirs
			for u in $(echo $units); do echo \"\$u \$(systemctl is-enabled \$u)\"; done
			echo \"socket \$(systemctl is-active eb-brokerd.socket)\"
			echo \"service \$(systemctl is-active eb-brokerd.service)\"" 2>&1) || true
		printf '%s\n' "$state"
		grep -qx users <<<"$state" || fail "the packages did not create the system users and groups"
		grep -qx dirs <<<"$state" || fail "the packages did not create /run/entropy-broker and /etc/entropy-broker/keys"
		for u in eb-brokerd.socket eb-seed-vsock.service eb-seed-virtio.service; do
			grep -qx "$u enabled" <<<"$state" || fail "apt install did not enable $u"
		done
		grep -qx "eb-brokerd.service indirect" <<<"$state" || fail "eb-brokerd.service is not left to its socket"
		for u in eb-brokerd-tcp.socket eb-brokerd-vsock.socket eb-metrics.socket eb-sink-kernel.service eb-sink-egd.socket \
			eb-sink-egd-tcp.socket eb-seed.service eb-source-jitter.service; do
			grep -qx "$u disabled" <<<"$state" || fail "apt install enabled $u, or it is not installed"
		done
		grep -qx "socket active" <<<"$state" || fail "apt install did not start eb-brokerd.socket"
		grep -qx "service inactive" <<<"$state" ||
			fail "eb-brokerd.service is not inactive before any client connected (socket activation)"
		report "apt install: users, directories, eb-brokerd.socket enabled and listening, service inactive"
		# Nothing open that was not asked for: no TCP listener that was not there before.
		listen_after=$(guest 'ss -ltnH' | awk '{ print $4 }' | sort -u)
		printf 'TCP listeners after install:\n%s\n' "$listen_after"
		new_listeners=$(comm -13 <(printf '%s\n' "$listen_before") <(printf '%s\n' "$listen_after") | grep . || true)
		[[ -z $new_listeners ]] || fail "apt install opened TCP ports nobody asked for: $(tr '\n' ' ' <<<"$new_listeners")"
		grep -q ':55225$' <<<"$listen_after" && fail "port 55225 listens after a fresh install"
		report "ss -ltn: no TCP listener added by the install"
		;;
	"journalctl -u eb-brokerd.service"*)
		out=$(guest "$line --no-pager")
		tail -n 5 <<<"$out"
		grep -q 'bits' <<<"$out" || fail "'$line' shows no pool level"
		id=$(guest "journalctl -b -u eb-brokerd.service -o json --no-pager | jq -r 'select(.EB_POOL_BITS != null) | .MESSAGE_ID' | tail -n 1")
		subject=$(guest "journalctl --list-catalog $id --no-pager" | cut -d' ' -f2-)
		[[ -n $subject ]] || fail "message $id has no catalog entry: the package's catalog did not reach journald's database"
		report "journal: $(grep bits <<<"$out" | tail -n 1 | cut -c1-150)"
		report "catalog: $id $subject"
		;;
	*"eb-sink-kernel.service"*)
		guest "$line"
		wait_guest 90 "systemctl show -P StatusText eb-sink-kernel.service | grep -q '^Seeded with'" ||
			fail "eb-sink-kernel.service did not report a seed within 90 s"
		wait_guest 30 'journalctl -b -u eb-brokerd.service --no-pager | grep -q "user local-sinks connected as sink"' ||
			fail "the broker did not serve eb-sink-kernel as user local-sinks"
		report "eb-sink-kernel: $(guest 'systemctl show -P StatusText eb-sink-kernel.service')"
		report "$(guest "journalctl -b -u eb-sink-kernel.service -o cat --no-pager | grep -m1 -E 'redit|bits'")"
		;;
	*)
		guest "$line"
		;;
	esac
done <"$cmds"
report "README's Using it in $(eb_elapsed "$t_readme") s"

# "To watch it": the metrics endpoint, which the packages' own user and drop-in serve with no
# file edited. The command and the address are the README's.
metrics_line=$(grep -m1 -E '^systemctl enable --now eb-metrics\.socket +# .*http://' "$top/README.md") ||
	fail "the README no longer says how to turn on the metrics endpoint"
metrics_cmd=${metrics_line%%#*}
metrics_cmd=${metrics_cmd%"${metrics_cmd##*[! ]}"}
metrics_url=$(grep -oE 'http://[0-9.]+:[0-9]+/[a-z]+' <<<"$metrics_line")
metrics_host=${metrics_url#http://}
metrics_path=/${metrics_host#*/}
metrics_host=${metrics_host%%/*}
step "README: $metrics_cmd, then GET $metrics_url"
guest "$metrics_cmd"
guest 'systemctl is-active eb-metrics.socket' >/dev/null || fail "eb-metrics.socket is not listening"
# No curl in a fresh guest: bash speaks the HTTP/1.0 request itself.
scrape="exec 3<>/dev/tcp/${metrics_host%:*}/${metrics_host#*:}; printf 'GET $metrics_path HTTP/1.0\r\nHost: $metrics_host\r\n\r\n' >&3; cat <&3"
out=$(vm_exec -t 60 "$scrape") || fail "GET $metrics_url failed: $out"
grep -m1 '^HTTP/' <<<"$out"
grep -E '^eb_(broker_up|pool_bytes|pool_capacity_bytes) ' <<<"$out" || true
grep -qE '^HTTP/1\.[01] 200' <<<"$out" || fail "GET $metrics_url did not answer 200: $(head -n 3 <<<"$out")"
grep -qx 'eb_broker_up 1' <<<"$out" || fail "the metrics do not say eb_broker_up 1"
bytes=$(sed -n 's/^eb_pool_bytes \([0-9]*\).*/\1/p' <<<"$out")
[[ -n $bytes && $bytes -gt 0 ]] || fail "eb_pool_bytes is '${bytes}', not above 0 with the hwrng donating"
report "metrics: $metrics_cmd; GET $metrics_url: eb_broker_up 1, eb_pool_bytes $bytes"

step "no file was edited"
guest 'find /etc/entropy-broker -type f | grep . && exit 1; true' || fail "a file appeared in /etc/entropy-broker"

# The README's steps for users on other machines: the lines before the key is made open the TCP
# port (enable the socket, restart the running broker, which takes it); then the key, a [user] section where
# the README says $EDITOR, the reload, and a sink on TCP (the README's broker.example is this
# guest) draws with that key.
step "README: users on other machines"
awk '/^Users on other machines/ { on = 1; next } on && /^```sh/ { inb = 1; next }
	inb && /^```/ { exit } inb && !/^#/ && NF { print }' "$top/README.md" >"$d/remote-commands"
cat "$d/remote-commands"
grep -qE '^systemctl enable (--now )?eb-brokerd-tcp\.socket( |$)' "$d/remote-commands" ||
	fail "the README's steps for users on other machines do not enable eb-brokerd-tcp.socket"
while IFS= read -r line; do
	line=${line%%#*}
	line=${line%"${line##*[! ]}"}
	case $line in
	'$EDITOR '*)
		step "README: $line: [user alice], source and sink, with that key"
		guest "printf '[user alice]\nrole = source, sink\nkey-file = /etc/entropy-broker/keys/alice.key\n' >>/etc/entropy-broker/eb-brokerd.conf"
		;;
	eb-*' -b tcp://broker.example'*)
		;;
	*)
		step "README: $line"
		guest "$line"
		;;
	esac
	if [[ $line == 'systemctl restart eb-brokerd.service' ]]; then
		guest 'systemctl is-enabled eb-brokerd-tcp.socket; systemctl is-active eb-brokerd-tcp.socket eb-brokerd.service' >/dev/null
	fi
done <"$d/remote-commands"
wait_guest 30 'ss -ltnH | awk "{ print \$4 }" | grep -q ":55225$"' || fail "nothing listens on TCP 55225 after the README's steps"
report "ss -ltn: $(guest 'ss -ltnH' | awk '{ print $4 }' | grep ':55225$' | tr '\n' ' ')"
# The client's copy of the key, as on the user's own machine: mode 0600, its owner's.
out=$(vm_exec -t 90 'install -m 0600 /etc/entropy-broker/keys/alice.key /root/alice.key &&
	eb-sink-file -b tcp://127.0.0.1:55225 -u alice -k /root/alice.key --bytes 32 --timeout 60 -o /tmp/seed.bin &&
	stat -c %s /tmp/seed.bin' 2>&1) ||
	fail "eb-sink-file over TCP as alice failed: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
[[ $(tail -n 1 <<<"$out") == 32 ]] || fail "eb-sink-file over TCP wrote $(tail -n 1 <<<"$out") bytes, not 32"
wait_guest 30 'journalctl -b -u eb-brokerd.service --no-pager | grep -q "user alice connected as sink"' ||
	fail "the broker did not log alice's TCP session"
report "a keyed user drew 32 bytes over eb-brokerd-tcp.socket"
