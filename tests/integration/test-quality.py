#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Output quality with only this project's own noise sources feeding the broker: eb-source-jitter
(one per core) and eb-source-timers donate at their default claims, eb-sink-file draws full-entropy
output, and `ent` (>= 7.999 bits per byte) and `rngtest` (FIPS 140-2, at most 3 failed blocks in
1,000) judge it.

    test-quality.py [BYTES]

The default is 16 MiB: 6,710 FIPS 140-2 blocks of 20,000 bits after the 32 bits rngtest keeps
for its continuous test. rngtest judges the first 1,000 blocks (at most 3 failures) and all of
them (at most 3 per 1,000). Two jitter sources and one timers source on two cores credit about
3 Mbit/s here, so the draw takes under a minute."""
import os
import re
import signal
import subprocess
import sys
import time

from eblib import Broker, Failure, check, main, need, prog, run

FIPS_BLOCK = 2500  # bytes: rngtest's 20,000-bit block


def ent(path):
    p = run(["ent", "-t", path], check=True)
    # ent -t: a header line, then "0,File-bytes,Entropy,Chi-square,Mean,Monte-Carlo-Pi,Serial-Correlation".
    row = p.stdout.decode().strip().splitlines()[-1].split(",")
    return {"bytes": int(row[1]), "entropy": float(row[2]), "chi2": float(row[3]),
            "mean": float(row[4]), "pi": float(row[5]), "serial": float(row[6])}


def rngtest(path, blocks):
    with open(path, "rb") as f:
        p = subprocess.run(["rngtest", "-c", str(blocks)], stdin=f, capture_output=True,
                           timeout=300)
    # rngtest exits 1 when any block fails; good data fails about 1 block in 1,000, so the
    # counts decide, not the exit status.
    err = p.stderr.decode(errors="replace")
    ok = re.search(r"FIPS 140-2 successes: (\d+)", err)
    bad = re.search(r"FIPS 140-2 failures: (\d+)", err)
    if not ok or not bad:
        raise Failure(f"rngtest printed no counts: {err!r}")
    return int(ok.group(1)), int(bad.group(1)), err


def test():
    need("ent")
    need("rngtest")
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 16 << 20
    # rngtest takes its first 32 bits to seed the continuous run test.
    blocks = (size - 4) // FIPS_BLOCK
    if blocks < 1000:
        raise Failure(f"{size} bytes are fewer than 1,000 FIPS blocks")
    allowed = -(-3 * blocks // 1000)
    # One user both donates and draws over unix:; credit up to 8 bits per byte, so the sources'
    # own claims are what counts. A pool of 8 Mbit lets the sources run ahead of the sink.
    b = Broker({"local": {"role": "source,sink", "unix-uid": os.getuid(), "key": False,
                          "max-credit-per-byte": 8},
                "admin": {"role": "admin"}}, capacity=8 << 20).start()
    env = dict(os.environ, EB_LOG_TARGET="console")
    logs, sources = [], []
    try:
        for name in ["eb-source-jitter"] * (os.cpu_count() or 1) + ["eb-source-timers"]:
            log = open(os.path.join(b.tmp, f"{name}-{len(sources)}.log"), "wb")
            logs.append(log)
            sources.append(subprocess.Popen([prog(name), "-b", b.unix], stdout=log,
                                            stderr=log, env=env))
        out = os.path.join(b.tmp, "out")
        t0 = time.monotonic()
        p = run([prog("eb-sink-file"), "-b", b.unix, "--bytes", str(size), "-o", out,
                 "--timeout", "900"], timeout=1000, env=env)
        wall = time.monotonic() - t0
        check(p.returncode == 0 and os.path.getsize(out) == size,
              f"eb-sink-file drew {size} bytes in {wall:.1f} s "
              f"({size * 8 / wall / 1e6:.2f} Mbit/s of full-entropy output) "
              f"({p.stderr.decode(errors='replace').strip()[-200:]!r})")
        st = b.status()
        print(f"# broker: {st}")
        for s in sources:
            s.terminate()
        for s in sources:
            s.wait(10)
        for s, log in zip(sources, logs):
            log.close()
            with open(log.name, errors="replace") as f:
                text = f.read()
            # SIGTERM is how systemd stops a source, and a clean exit for it.
            check(s.returncode == -signal.SIGTERM,
                  f"{os.path.basename(log.name)} ran until stopped ({text.strip()[-200:]!r})")
            check("Health test failed" not in text,
                  f"{os.path.basename(log.name)}: no health-test alarm")
        check(st["bits_out"] + 64 <= st["bits_in"],
              f"the broker gave out no more than was credited in ({st['bits_out']} <= "
              f"{st['bits_in']})")

        e = ent(out)
        print(f"# ent: {e}")
        check(e["bytes"] == size, "ent read all of it")
        check(e["entropy"] >= 7.999, f"ent: {e['entropy']:.6f} bits per byte >= 7.999")
        good, failed, err = rngtest(out, 1000)
        check(good + failed == 1000, f"rngtest tested the first 1000 blocks ({good} + {failed})")
        check(failed <= 3, f"rngtest: {failed} of the first 1000 blocks failed, at most 3")
        good, failed, err = rngtest(out, blocks)
        print("# " + "\n# ".join(l for l in err.splitlines() if "FIPS" in l))
        check(good + failed == blocks, f"rngtest tested all {blocks} blocks ({good} + {failed})")
        check(failed <= allowed, f"rngtest: {failed} of {blocks} blocks failed, at most {allowed}")
    finally:
        for s in sources:
            if s.poll() is None:
                s.kill()
                s.wait()
        for log in logs:
            log.close()
        b.cleanup()


main(test)
