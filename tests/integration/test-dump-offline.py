# SPDX-License-Identifier: MIT
"""--dump-raw is a capture for eb-assess: it works with no broker at all (the samples are tested
and dumped, nothing is donated), and a broker that is full (SLEEP) does not stall it: the dump
goes on, the output is dropped until the broker wants data, and the source says so."""

import os
import subprocess
import time

from eblib import Broker, check, donate, main, prog


def test():
    b = Broker({"src": {"role": "source", "max-credit-per-byte": 8}}, capacity=131072)
    env = {k: v for k, v in os.environ.items() if k not in ("EB_BROKER", "EB_USER")}
    try:
        # 1. No broker: an offline capture.
        raw = os.path.join(b.tmp, "raw.bin")
        p = subprocess.run([prog("eb-source-kernel"), "--dump-raw", raw, "--samples", "8192"],
                           capture_output=True, timeout=60, env=env)
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 0 and os.path.getsize(raw) == 8192,
              f"--dump-raw with no broker captures every sample (rc {p.returncode}, "
              f"{os.path.getsize(raw) if os.path.exists(raw) else 0} bytes; {err.strip()!r})")
        check("capturing raw samples to --dump-raw only" in err,
              "and says it donates nothing")

        # 2. A full broker: the capture goes on.
        b.start()
        data = os.path.join(b.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(65536))
        check(donate(b, "src", data).returncode == 0, "a source fills the pool")
        n = 4 * 1024 * 1024
        t0 = time.monotonic()
        p = subprocess.run([prog("eb-source-kernel"), "-b", b.tcp, "-u", "src", "-k",
                            b.keys["src"], "--credit-per-byte", "8", "--dump-raw", raw,
                            "--samples", str(n)], capture_output=True, timeout=90, env=env)
        took = time.monotonic() - t0
        err = p.stderr.decode(errors="replace")
        size = os.path.getsize(raw)
        print(f"# {n} samples captured against a full broker in {took:.1f} s")
        check(p.returncode == 0 and size == n and took < 45,
              f"a capture against a full broker does not stall (rc {p.returncode}, {size} "
              f"bytes in {took:.1f} s; {err.strip()[-300:]!r})")
        check("is full (SLEEP); still capturing to --dump-raw" in err,
              f"and says the broker is full ({err.strip()[-300:]!r})")
    finally:
        b.stop()
        b.cleanup()


if __name__ == "__main__":
    main(test)
