#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-source-audio and eb-source-v4l against what is not their device: a file that is no ALSA
PCM or V4L2 device, a card that does not exist, exit 1 with the reason and nothing donated. Then,
where this machine has a capture PCM or a V4L2 capture device we may read, each runs against a
real broker for 8192 samples: exit 0, --dump-raw holds every sample, and the credit is what the
health tests allowed (0.5 bits per admitted sample, or nothing after an alarm). Skipped, with a
message, without such a device; the VM suite (audio, webcam, no-entropy) plugs emulated ones in."""
import glob
import os
import re

from eblib import SKIP, Broker, check, main, prog, run

SAMPLES = 8192


def capture_pcms():
    return [p for p in sorted(glob.glob("/dev/snd/pcmC*D*c")) if os.access(p, os.R_OK)]


def cameras():
    out = []
    for p in sorted(glob.glob("/dev/video*")):
        name = os.path.basename(p)
        try:
            with open(f"/sys/class/video4linux/{name}/name") as f:
                f.read()
        except OSError:
            continue
        if os.access(p, os.R_OK | os.W_OK):
            out.append(p)
    return out


def test():
    b = Broker({"local": {"role": "source", "unix-uid": os.getuid(), "key": False}}).start()
    try:
        audio, v4l = prog("eb-source-audio"), prog("eb-source-v4l")
        notdev = os.path.join(b.tmp, "not-a-device")
        with open(notdev, "wb") as f:
            f.write(os.urandom(4096))
        for path, what in ((notdev, "a regular file"), ("/dev/null", "/dev/null")):
            p = run([audio, "-b", b.unix, path], timeout=30)
            err = p.stderr.decode()
            check(p.returncode == 1 and "is not an ALSA PCM device" in err,
                  f"eb-source-audio refuses {what} (exit {p.returncode}: {err.strip()!r})")
            p = run([v4l, "-b", b.unix, path], timeout=30)
            err = p.stderr.decode()
            check(p.returncode == 1 and "is not a V4L2 device" in err and "libv4l2" not in err,
                  f"eb-source-v4l refuses {what}, in its own words ({err.strip()!r})")
        p = run([audio, "-b", b.unix, "hw:NoSuchCard,0"], timeout=30)
        check(p.returncode == 1 and 'No sound card "hw:NoSuchCard,0"' in p.stderr.decode(),
              f"eb-source-audio names a card that does not exist ({p.stderr.decode().strip()!r})")
        p = run([audio, "-b", b.unix, "hw:1,99"], timeout=30)
        check(p.returncode == 2 and "Invalid DEVICE" in p.stderr.decode(),
              "a device number above 31 is a usage error")

        devices = [(audio, d) for d in capture_pcms()] + [(v4l, d) for d in cameras()]
        if not devices:
            print("SKIP: no readable capture PCM (/dev/snd/pcmC*D*c) or V4L2 device here")
            raise SystemExit(SKIP)
        for exe, dev in devices:
            dump = os.path.join(b.tmp, os.path.basename(dev) + ".raw")
            p = run([exe, "-b", b.unix, "--samples", str(SAMPLES), "--dump-raw", dump, dev],
                    timeout=120)
            err = p.stderr.decode()
            name = os.path.basename(exe)
            if p.returncode == 1 and re.search(r"cannot capture|no uncompressed|busy", err):
                print(f"# {name} {dev}: not usable here: {err.strip()[-200:]}")
                continue
            check(p.returncode == 0, f"{name} {dev} exits 0 ({err.strip()[-300:]})")
            check(os.path.getsize(dump) == SAMPLES, f"{name} {dev}: --dump-raw holds every sample")
            m = re.search(r"Took (\d+) samples \((\d+) admitted.*?(\d+) bits credited", err, re.S)
            check(m is not None, f"{name} {dev} reports what it took and what was credited")
            took, admitted, credited = (int(x) for x in m.groups())
            check(took == SAMPLES and credited <= admitted // 2,
                  f"{name} {dev}: {credited} bits credited for {admitted} admitted samples")
            print(f"# {name} {dev}: {admitted} of {took} admitted, {credited} bits credited")
    finally:
        b.cleanup()


main(test)
