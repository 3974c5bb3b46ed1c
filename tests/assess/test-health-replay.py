#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-assess's health-test replay names the alarm that opened the first failure episode as the
first alarm, not the one that opened the last: a capture with two stuck stretches, far apart,
must report the first stretch's sample.

    test-health-replay.py EB_ASSESS"""

import json
import random
import subprocess
import sys
import tempfile

N = 20000


def main():
    tool = sys.argv[1]
    rng = random.Random(27)
    data = bytearray(rng.randrange(1, 256) for _ in range(N))
    # Ten zeros from 170 and from 15000, amid non-zero bytes. At a claim of 8 bits the
    # repetition count test's cutoff is 1 + ceil(20 / 8) = 4: the fourth zero of each stretch
    # (samples 173 and 15003) opens an episode; 1024 clean samples in between close the first.
    data[170:180] = bytes(10)
    data[15000:15010] = bytes(10)
    with tempfile.NamedTemporaryFile(prefix="health-replay-") as f:
        f.write(data)
        f.flush()
        text = subprocess.run([tool, "--claim", "8", f.name], check=True, capture_output=True,
                              text=True).stdout
        report = json.loads(subprocess.run([tool, "--json", "--claim", "8", f.name], check=True,
                                           capture_output=True, text=True).stdout)
    health = report["health"]
    print("1..4")
    print(f"# {health}")
    ok = [
        (health["rct_cutoff"] == 4 and health["episodes"] == 2,
         f"cutoff 4, two episodes: {health['rct_cutoff']}, {health['episodes']}"),
        ("first alarm              repetition-count at sample 173 " in text,
         "the text report's first alarm is sample 173, the first stretch's"),
        ("last episode opened      repetition-count at sample 15003 " in text,
         "the text report names sample 15003 as the last episode's opening"),
        (health.get("first_alarm") == {"test": "repetition-count", "sample": 173},
         f"the JSON's first_alarm is sample 173: {health.get('first_alarm')}"),
    ]
    for i, (cond, what) in enumerate(ok, 1):
        print(("ok %d - " if cond else "not ok %d - ") % i + what)
    sys.exit(0 if all(c for c, _ in ok) else 1)


if __name__ == "__main__":
    main()
