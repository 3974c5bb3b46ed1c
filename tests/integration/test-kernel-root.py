#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The real eb-sink-kernel --oneshot makes the real RNDADDENTROPY: as root with CAP_SYS_ADMIN it
exits 0 having credited the 256 bits the broker delivered, and on an initialised 5.18+ kernel
the real RNDRESEEDCRNG that follows succeeds. After "crng init done" the kernel
ignores the credit (entropy_avail stays 256), so the broker's count and the sink's log are the
evidence; tests/seam-kernel.c's double is what checks the exact ioctl arguments."""
import os
import sys

from eblib import SKIP, Broker, check, donate, main, prog, run


def test():
    b = Broker({
        "alice": {"role": "source"},
        "admin": {"role": "admin"},
        "local": {"role": "sink", "unix-uid": os.getuid(), "key": False},
    }).start()
    try:
        noise = os.path.join(b.tmp, "noise")
        with open(noise, "wb") as f:
            f.write(os.urandom(16 * 1024))
        check(donate(b, "alice", noise).returncode == 0, "a source fills the pool")
        st0 = b.status()
        p = run([prog("eb-sink-kernel"), "-b", b.unix, "--oneshot", "--timeout", "10"])
        err = p.stderr.decode(errors="replace")
        if p.returncode != 0 and "Operation not permitted" in err:
            print("SKIP: RNDADDENTROPY needs CAP_SYS_ADMIN (run as root): " + err.strip()[-200:])
            sys.exit(SKIP)
        check(p.returncode == 0, f"the real RNDADDENTROPY succeeds ({err.strip()[-300:]})")
        check("Credited 256 bits from unix:" in err, "the sink logs the 256 bits it credited")
        check(b.status()["bits_out"] - st0["bits_out"] == 256,
              "the broker delivered exactly those 256 bits")
        with open("/proc/sys/kernel/random/entropy_avail") as f:
            avail = int(f.read())
        check(avail >= 256 or "not yet initialised" in err,
              f"the kernel's RNG is initialised (entropy_avail {avail})")
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
        if "already initialised" in err and (major, minor) >= (5, 18):
            check("forced a CRNG reseed (RNDRESEEDCRNG), so they are in use now" in err and
                  "Failed to force" not in err,
                  f"an initialised 5.18+ kernel took the real RNDRESEEDCRNG ({err.strip()[-200:]})")
    finally:
        b.cleanup()


main(test)
