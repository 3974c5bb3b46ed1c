#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-source-stream on this machine's real /dev/hwrng: it finds the device is the kernel's hardware
RNG, names the driver behind it, claims H = 4 bits per byte, passes the start-up health test and
is credited exactly (samples - 1024) x 4 bits; --dump-raw holds what it read. Skipped, with a
message, where there is no readable /dev/hwrng or no driver behind it."""
import os
import re
import select
import time

from eblib import ME, SKIP, Broker, check, main, prog, run

DEV = "/dev/hwrng"
SAMPLES = 16384


def readable():
    """Whether DEV gives a byte within 5 s: it exists, we may read it, a driver is behind it."""
    try:
        fd = os.open(DEV, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return f"{DEV} cannot be opened: {e.strerror}"
    try:
        deadline = time.time() + 5
        while time.time() < deadline:
            select.select([fd], [], [], 0.5)
            try:
                if os.read(fd, 1):
                    return None
            except BlockingIOError:
                continue
            except OSError as e:
                return f"{DEV} cannot be read: {e.strerror}"
        return f"{DEV} gave nothing in 5 s"
    finally:
        os.close(fd)


def test():
    why = readable()
    if why:
        print(f"SKIP: {why}")
        raise SystemExit(SKIP)
    b = Broker({"admin": {"role": "admin"},
                "local": {"role": "source", "unix-uid": ME, "key": False}},
               capacity=64 * 1024 * 1024).start()
    try:
        dump = os.path.join(b.tmp, "hwrng.raw")
        t0 = time.time()
        p = run([prog("eb-source-stream"), "-b", b.unix, "--samples", str(SAMPLES),
                 "--dump-raw", dump, DEV], timeout=120)
        secs = time.time() - t0
        err = p.stderr.decode()
        check(p.returncode == 0, f"eb-source-stream {DEV} exits 0 ({err.strip()[-300:]})")
        check("is a kernel hardware RNG (--type hwrng)" in err, "it knows the device for what it is")
        m = re.search(r"hardware RNG driver is (\S+)", err)
        check(m is not None, f"and names the driver behind it ({m.group(1) if m else None})")
        check("H = 4.000 bits each; RCT cutoff 6, APT cutoff 63 in 512" in err,
              "H = 4 bits per byte, with the cutoffs for it")
        m = re.search(r"(\d+) bits credited of (\d+) claimed; (\d+) health-test alarm", err)
        got = tuple(int(x) for x in m.groups()) if m else None
        check(got == ((SAMPLES - 1024) * 4, (SAMPLES - 1024) * 4, 0),
              f"credited (samples - 1024) x 4 bits, no alarm ({got})")
        check(os.path.getsize(dump) == SAMPLES, "--dump-raw holds every sample read")
        check(len(set(open(dump, "rb").read())) > 200, "and they are not stuck")
        print(f"# {DEV}: {SAMPLES} bytes in {secs:.1f} s, {SAMPLES / secs:.0f} bytes/s, "
              f"{(SAMPLES - 1024) * 4 / secs:.0f} credited bits/s")
    finally:
        b.cleanup()


main(test)
