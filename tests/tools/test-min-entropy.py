#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""min-entropy on sequences whose min-entropy is known: it must come close from below on good
data and must not be fooled by structure that a most-common-value count alone would miss."""

import json
import os
import random
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
N = 200000


def estimate(data, bits=None):
    with tempfile.NamedTemporaryFile(prefix="min-entropy-") as f:
        f.write(bytes(data))
        f.flush()
        args = [TOOL, "--json", f.name] + (["--bits", str(bits)] if bits else [])
        return json.loads(subprocess.run(args, check=True, capture_output=True).stdout)


def check(cond, what):
    print(("ok - " if cond else "not ok - ") + what)
    if not cond:
        sys.exit(1)


rng = random.Random(1)
uniform = estimate(os.urandom(N))
check(7.0 < uniform["min_entropy"] <= 8.0,
      f"uniform bytes: {uniform['min_entropy']:.3f} bits, near 8 from below")

# Two values, 3/4 and 1/4: H = -log2(3/4) = 0.415 per sample.
biased = estimate([1 if rng.random() < 0.25 else 0 for _ in range(N)], bits=1)
check(0.38 < biased["min_entropy"] <= 0.415, f"biased bits: {biased['min_entropy']:.3f} <= 0.415")

constant = estimate([7] * N)
check(constant["min_entropy"] < 0.001, f"constant: {constant['min_entropy']:.4f}")

# A counter looks uniform to a most-common-value count, but is perfectly predictable: the lag
# and Markov estimators see through it.
counter = estimate([i % 64 for i in range(N)], bits=6)
check(counter["mcv"] > 5.5, f"counter: MCV alone says {counter['mcv']:.2f} bits")
check(counter["min_entropy"] < 0.5, f"counter: overall {counter['min_entropy']:.3f} bits")

# Uniform 4-bit samples, each repeated: half the samples are predictable.
pairs = []
for _ in range(N // 2):
    v = rng.randrange(16)
    pairs += [v, v]
rep = estimate(pairs, bits=4)
check(rep["min_entropy"] < 2.2, f"repeated 4-bit samples: {rep['min_entropy']:.3f} (true ~2)")

r = subprocess.run([TOOL, "--bits", "2", "/dev/null"], capture_output=True)
check(r.returncode == 1, "an empty capture is refused")
