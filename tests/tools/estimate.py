#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Captures a source's raw samples and estimates their min-entropy, the way docs/sources.md's
figures were made:

    tests/tools/estimate.py [--build DIR] [--samples N] [--load] PROGRAM [ARGS...]

starts a private broker (large capacity, so it never says SLEEP), runs PROGRAM with --dump-raw
and --samples N against it, and runs min-entropy on the capture. --load keeps every core busy
with a spinning process meanwhile, the condition where the noise is most likely to change.
The capture is kept (its path is printed) for NIST's ea_non_iid."""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("EB_BUILD_DIR"))
    ap.add_argument("--samples", type=int, default=1000000)
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("program")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.build:
        os.environ["EB_BUILD_DIR"] = os.path.abspath(a.build)
    import eblib

    b = eblib.Broker({"src": {"role": "source", "unix-uid": os.getuid(), "key": False}},
                     capacity=1 << 31).start()
    spinners = []
    try:
        if a.load:
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        for _ in range(os.cpu_count() or 1)]
        out = a.out or os.path.join(b.tmp, "raw.bin")
        t0 = time.monotonic()
        cpu0 = os.times()
        p = eblib.run([eblib.prog(a.program), "-b", b.unix, "--dump-raw", out,
                       "--samples", str(a.samples), *a.args], timeout=1800)
        cpu1 = os.times()
        wall = time.monotonic() - t0
        if p.returncode != 0:
            sys.exit(f"{a.program} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
        cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system -
                                                            cpu0.children_system)
        print(f"{a.program} {' '.join(a.args)}: {a.samples} samples in {wall:.2f} s "
              f"({a.samples / wall:.0f} samples/s, {cpu:.2f} CPU-s){' under load' if a.load else ''}")
        sys.stdout.flush()
        subprocess.run([os.path.join(eblib.BUILD, "tests", "tools", "min-entropy"), out],
                       check=True)
        if a.out:
            print(f"capture kept in {out}")
    finally:
        for s in spinners:
            s.kill()
            s.wait()
        b.cleanup()


main()
