#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeding from the initramfs: Debian's own mkinitramfs runs the project's hook, conf-hook and
init-premount script (as built, from a copy of /usr/share/initramfs-tools) in a private mount
namespace, with an empty module tree for a made-up kernel version, so nothing of this machine's
/boot, /etc or /usr changes. Checked on the images it makes:

- with EB_INITRAMFS=yes and a key stored (EB_KEY_FILE=), the image is 0600 (the conf-hook's
  UMASK=0077), the key inside it 0600; without a stored key the image is mkinitramfs' usual 0644
  and holds no key; with an administrator's UMASK=0022 after ours, the hook refuses the key;
- the image carries eb-sink-kernel and every library it needs: the binary runs (--version)
  chrooted into the unpacked image, with only what the image holds;
- the init-premount script, run in that chroot with a made-up /sys/firmware, finds the key in an
  SMBIOS type 11 string (as QEMU's -smbios type=11 hands it over), says so on /dev/kmsg, gives up
  on an absent host within its bound, and leaves no copy of the key behind;
- with EB_INITRAMFS unset, the hook adds nothing, and the script, which every image carries, ends
  at once without a word.

The VM suite's boot-virtio (boots e and f) boots such an image made by the guest's own mkinitramfs."""
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time

from eblib import BUILD, check, main, need, need_root

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KVER = "6.1.0-eb-test"
KEY = "5e" * 32


def built(name):
    return os.path.join(BUILD, "initramfs-tools", "entropy-broker." + name)


def configured_paths():
    """Where the built hook reads its configuration and finds eb-sink-kernel."""
    hook = open(built("hook")).read()
    conf = re.search(r"^conf=(\S+)$", hook, re.M).group(1)
    binary = re.search(r"^copy_exec (\S+)$", hook, re.M).group(1)
    return conf, binary


def mkinitramfs(tmp, conf_text, late_conf_hook=None):
    """Runs mkinitramfs with the project's files in place (and a conf-hook sorted after the
    project's, when given); returns (exit status, output, image)."""
    conf, binary = configured_paths()
    root = tempfile.mkdtemp(dir=tmp)
    itools = os.path.join(root, "itools")
    shutil.copytree("/usr/share/initramfs-tools", itools, symlinks=True)
    for name, where, mode in (("hook", "hooks", 0o755), ("init-premount", "scripts/init-premount", 0o755),
                              ("conf-hook", "conf-hooks.d", 0o644)):
        os.makedirs(os.path.join(itools, where), exist_ok=True)
        dst = os.path.join(itools, where, "entropy-broker")
        shutil.copy(built(name), dst)
        os.chmod(dst, mode)
    if late_conf_hook:
        with open(os.path.join(itools, "conf-hooks.d", "zz-late"), "w") as f:
            f.write(late_conf_hook)
    etc = os.path.join(root, "etc")
    os.makedirs(os.path.join(etc, "entropy-broker"))
    with open(os.path.join(etc, "entropy-broker", "initramfs.conf"), "w") as f:
        f.write(conf_text)
    confdir = os.path.join(root, "initramfs-tools")
    shutil.copytree("/etc/initramfs-tools", confdir, symlinks=True)
    with open(os.path.join(confdir, "initramfs.conf"), "a") as f:
        f.write("\nMODULES=list\nCOMPRESS=gzip\n")
    boot = os.path.join(root, "boot")
    os.makedirs(boot)
    with open(os.path.join(boot, "config-" + KVER), "w") as f:
        f.write("CONFIG_RD_GZIP=y\n")
    ulib, ulibw = os.path.join(root, "ulib"), os.path.join(root, "ulibw")
    os.makedirs(os.path.join(ulib, "modules", KVER))
    os.makedirs(ulibw)
    sbin = os.path.join(root, "sbin")
    os.makedirs(sbin)
    shutil.copy(os.path.join(BUILD, "sinks", "eb-sink-kernel"), sbin)
    out = os.path.join(root, "out")
    os.makedirs(out)
    image = os.path.join(out, "initrd.img")
    # The project's files where the built hook looks for them, and initramfs-tools' own copy with
    # them added; the rest of the machine is as it is.
    script = f"""set -e
mount --make-rprivate /
mount --bind {itools} /usr/share/initramfs-tools
mkdir -p {os.path.dirname(os.path.dirname(conf))} 2>/dev/null || true
mount --bind {etc} {os.path.dirname(os.path.dirname(conf))}
mount --bind {sbin} {os.path.dirname(binary)}
mount --bind {boot} /boot
mount -t overlay overlay -o lowerdir=/usr/lib,upperdir={ulib},workdir={ulibw} /usr/lib
umask 022
TMPDIR={root} mkinitramfs -d {confdir} -o {image} {KVER}
"""
    p = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True,
                       timeout=300)
    return p.returncode, p.stdout + p.stderr, image


def unpack(image, dest):
    os.makedirs(dest)
    subprocess.run(["unmkinitramfs", image, dest], check=True, timeout=120)
    # An image with an early (uncompressed) part unpacks into early/ and main/.
    main_dir = os.path.join(dest, "main")
    return main_dir if os.path.isdir(main_dir) else dest


def run_script(root, firmware):
    """Runs the init-premount script chrooted into the unpacked image, with /sys/firmware made up
    from firmware ({relative path: (bytes, mode)}) and /dev/kmsg a file; returns (exit status,
    the kmsg lines, seconds)."""
    fw = os.path.join(root, "fw")
    os.makedirs(fw, exist_ok=True)
    for rel, (data, mode) in firmware.items():
        path = os.path.join(fw, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
    kmsg = os.path.join(root, "kmsg")
    open(kmsg, "w").close()
    script = f"""set -e
mount --make-rprivate /
for d in dev sys proc run; do mkdir -p {root}/$d; done
mount -t tmpfs tmpfs {root}/dev
touch {root}/dev/kmsg {root}/dev/null {root}/dev/random {root}/dev/urandom
mount --bind {kmsg} {root}/dev/kmsg
mount --bind /dev/null {root}/dev/null
mount --bind /dev/random {root}/dev/random
mount --bind /dev/urandom {root}/dev/urandom
mount -t tmpfs tmpfs {root}/sys
mkdir -p {root}/sys/firmware
mount --bind {fw} {root}/sys/firmware
mount -t proc proc {root}/proc
mount -t tmpfs tmpfs {root}/run
exec chroot {root} /bin/sh /scripts/init-premount/entropy-broker
"""
    t = time.monotonic()
    p = subprocess.run(["unshare", "--mount", "--pid", "--fork", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t
    with open(kmsg) as f:
        lines = f.read().splitlines()
    print("\n".join("  kmsg: " + l for l in lines))
    if p.returncode:
        print(p.stdout + p.stderr)
    return p.returncode, lines, took


def test():
    need_root("(mount namespaces, chroot)")
    for tool in ("mkinitramfs", "unmkinitramfs", "unshare", "busybox"):
        need(tool)
    tmp = tempfile.mkdtemp(prefix="eb-initramfs-")
    try:
        keyfile = os.path.join(tmp, "vm1.key")
        with open(keyfile, "w") as f:
            f.write(KEY + "\n")
        os.chmod(keyfile, 0o600)
        conf, binary = configured_paths()

        # A key stored in the image: root's alone.
        rc, out, image = mkinitramfs(tmp, f"EB_INITRAMFS=yes\nEB_USER=vm1\nEB_KEY_FILE={keyfile}\n")
        check(rc == 0, "mkinitramfs with a stored key succeeds" + (f" (exit {rc}): {out[-600:]}" if rc else ""))
        mode = stat.S_IMODE(os.stat(image).st_mode)
        check(mode == 0o600, f"the image holding a key is 0600 (got {mode:04o})")
        root = unpack(image, os.path.join(tmp, "with-key"))
        inkey = os.path.join(root, "etc", "entropy-broker", "eb.key")
        check(os.path.isfile(inkey) and open(inkey).read().strip() == KEY,
              "the stored key is in the image")
        check(stat.S_IMODE(os.stat(inkey).st_mode) == 0o600, "the key in the image is 0600")

        # Without a stored key: the usual mode, no key.
        rc, out, image = mkinitramfs(tmp, "EB_INITRAMFS=yes\nEB_BROKER=virtio:eb.test.port\n"
                                          "EB_TIMEOUT=1\nEB_USER=vm1\n")
        check(rc == 0, "mkinitramfs without a stored key succeeds" + (f" (exit {rc}): {out[-600:]}" if rc else ""))
        mode = stat.S_IMODE(os.stat(image).st_mode)
        check(mode == 0o644, f"the image without a key keeps mkinitramfs' 0644 (got {mode:04o})")
        root = unpack(image, os.path.join(tmp, "no-key"))
        check(not os.path.exists(os.path.join(root, "etc", "entropy-broker", "eb.key")),
              "no key in the image when none is stored")
        sk = os.path.join(root, binary.lstrip("/"))
        check(os.access(sk, os.X_OK), f"the image carries {binary}")
        premount = os.path.join(root, "scripts", "init-premount")
        check(os.access(os.path.join(premount, "entropy-broker"), os.X_OK),
              "the image carries scripts/init-premount/entropy-broker")
        check("/scripts/init-premount/entropy-broker" in open(os.path.join(premount, "ORDER")).read(),
              "initramfs-tools' ORDER runs it")
        econf = open(os.path.join(root, "conf", "entropy-broker.conf")).read()
        check("EB_BROKER='virtio:eb.test.port'" in econf and "EB_TIMEOUT=1" in econf,
              f"conf/entropy-broker.conf carries the administrator's settings: {econf!r}")
        # With /proc, in a mount namespace of its own: a sanitizer build reads its options from
        # /proc/self/environ, and LeakSanitizer fails without /proc/PID/task.
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            'mkdir -p "$1/proc" && mount -t proc proc "$1/proc" && '
                            'exec chroot "$1" "$2" --version', "sh", root, binary],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "eb-sink-kernel" in p.stdout,
              f"eb-sink-kernel runs in the image with only its libraries (exit {p.returncode}: "
              f"{(p.stdout + p.stderr).strip()[:300]})")

        # The script: a key by SMBIOS type 11 (header, then NUL-separated strings), no host.
        smbios = (bytes([11, 5, 0x2a, 0, 2]) + b"io.systemd.credential:eb.user=vm1\0" +
                  b"io.systemd.credential:eb.key=" + KEY.encode() + b"\0\0")
        rc, lines, took = run_script(root, {"dmi/entries/11-0/raw": (smbios, 0o400)})
        text = "\n".join(lines)
        check(rc == 0, f"the script exits 0 whatever happens (got {rc})")
        check(re.search(r"eb-seed-initramfs: Seeding from virtio:eb\.test\.port as vm1, key by SMBIOS",
                        text), "the script found the key and the user in SMBIOS type 11")
        check(re.search(r"eb-sink-kernel: .*virtio:eb\.test\.port", text),
              "eb-sink-kernel's own lines reach /dev/kmsg")
        check("Not seeded" in text, "the script says it did not seed with no host")
        # EB_TIMEOUT=1 after start-up, killed at 6 s in all: the bound eb-sink-kernel(8) states.
        check(took < 1 + 5 + 2, f"boot waited {took:.1f} s, within the bound of EB_TIMEOUT + 5 s")
        check(not os.path.exists(os.path.join(root, "eb-seed")), "the copy of the key is gone")
        check(all(KEY not in l for l in lines), "the key is in no log line")

        # Two type 11 entries both naming eb.key (a VMM given -smbios type=11 twice): the first
        # wins, as systemd's own import takes the first of a credential and ignores the rest; the
        # two values run together would be no key at all.
        other = "".join(reversed(KEY))
        rc, lines, took = run_script(root, {
            "dmi/entries/11-0/raw": (smbios, 0o400),
            "dmi/entries/11-1/raw": (bytes([11, 5, 0x2b, 0, 1]) + b"io.systemd.credential:eb.key=" +
                                     other.encode() + b"\0\0", 0o400)})
        text = "\n".join(lines)
        check(re.search(r"key by SMBIOS", text) and
              re.search(r"eb-sink-kernel: .*virtio:eb\.test\.port", text) and
              not re.search(r"eb-sink-kernel: .*[Kk]ey", text),
              f"of two SMBIOS entries naming eb.key the first is taken, and the seeder has a key it "
              f"can load ({text[-400:]})")
        check(all(KEY not in l and other not in l for l in lines), "neither key is in a log line")
        os.remove(os.path.join(root, "fw", "dmi", "entries", "11-1", "raw"))

        # fw_cfg first: read in place.
        fwkey = "opt/io.systemd.credentials/eb.key/raw"
        rc, lines, took = run_script(root, {
            "qemu_fw_cfg/by_name/" + fwkey: ((KEY + "\n").encode(), 0o400),
            "qemu_fw_cfg/by_name/opt/io.systemd.credentials/eb.user/raw": (b"vm2", 0o400)})
        check(any("as vm2, key by fw_cfg" in l for l in lines), "fw_cfg's key and user come first")

        # No key anywhere: one line, nothing run.
        shutil.rmtree(os.path.join(root, "fw"))
        rc, lines, took = run_script(root, {"dmi/entries/1-0/raw": (b"\1\5\0\0\0\0", 0o400)})
        check(rc == 0 and len(lines) == 1 and "No key handed over" in lines[0],
              "with no key handed over the script says so in one line and seeds nothing")

        # An administrator's UMASK=0022 that comes after the conf-hook's (conf-hooks are read after
        # conf.d, so only a conf-hook sorted later can undo it): the hook refuses the key.
        rc, out, image = mkinitramfs(tmp, f"EB_INITRAMFS=yes\nEB_USER=vm1\nEB_KEY_FILE={keyfile}\n",
                                     late_conf_hook="UMASK=0022\n")
        check(rc != 0 and "readable by others" in out,
              "the hook refuses to store a key in an image others could read" +
              ("" if rc else f": {out[-400:]}"))

        # Not enabled: nothing added.
        rc, out, image = mkinitramfs(tmp, "EB_INITRAMFS=no\n")
        check(rc == 0, "mkinitramfs with EB_INITRAMFS=no succeeds" + (f": {out[-400:]}" if rc else ""))
        root = unpack(image, os.path.join(tmp, "off"))
        check(not os.path.exists(os.path.join(root, binary.lstrip("/"))) and
              not os.path.exists(os.path.join(root, "conf", "entropy-broker.conf")),
              "with EB_INITRAMFS=no the image carries no eb-sink-kernel and no configuration")
        # The init-premount script is in every image (mkinitramfs copies every script); where the
        # hook added nothing it ends at once, silently, without the configuration it would read.
        rc, lines, took = run_script(root, {})
        check(rc == 0 and not lines,
              f"with EB_INITRAMFS=no the script exits 0 and says nothing (got {rc}, {lines})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(test)
