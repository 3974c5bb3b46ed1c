#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-assess against NIST's SP 800-90B reference tool, on the seeded sets sp90b-sets.py writes:
every estimator the reference ran (on the samples and on their bit string) within 1e-4 of the
reference's figure in sp90b-reference.tsv, no estimator run by one and not the other, and
eb-assess's final figure never above the reference's; then the IID track (section 5) on each
set's first 10,000 samples, whose verdicts (permutation, chi-square, LRS, IID) must be the
reference's; and the restart tests, on the sets the reference ran them on (each set read as 1,000
restarts of 1,000 samples). --full runs the IID track on the first 100,000 instead, against the reference's
verdicts there (minutes: 10,000 shuffles of 100,000 samples for each set that fails).

    test-sp90b-agreement.py [--full] EB_ASSESS SETS_SCRIPT TABLE [SET...]"""

import json
import os
import subprocess
import sys
import tempfile
import time

TOLERANCE = 1e-4
failed = 0
n_check = 0


def check(cond, what):
    global failed, n_check
    n_check += 1
    print(("ok %d - " if cond else "not ok %d - ") % n_check + what, flush=True)
    failed += not cond


def load(table):
    ref = {}
    with open(table) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, track, item, value = line.rstrip("\n").split("\t")
            ref.setdefault(name, {}).setdefault(track, {})[item] = value
    return ref


def compare(name, ours, ref):
    for track in ("literal", "bitstring"):
        want = ref.get(track, {})
        for key, h in ours[track].items():
            if key in want:
                diff = abs(h - float(want[key])) if h is not None else float("inf")
                check(diff <= TOLERANCE, f"{name} {track} {key}: {h} against the reference's "
                      f"{float(want[key]):.6f} (off by {diff:.2g})")
            else:
                check(h is None, f"{name} {track} {key}: not run, as the reference did not")
    final = float(ref["final"]["min_entropy"])
    check(ours["min_entropy"] <= final and final - ours["min_entropy"] <= TOLERANCE,
          f"{name}: final {ours['min_entropy']:.6f} <= the reference's {final:.6f}, within "
          f"{TOLERANCE}")


def compare_iid(tool, tmp, sets, names, ref, track):
    samples = None
    todo = [n for n in names if track in ref[n]]
    for name in todo:
        samples = ref[name][track]["samples"]
    if not todo:
        return
    small = os.path.join(tmp, track)
    os.mkdir(small)
    subprocess.run([sys.executable, sets, "--samples", samples, small] + todo, check=True)
    for name in todo:
        want = ref[name][track]
        start = time.monotonic()
        p = subprocess.run([tool, "--json", "--iid", os.path.join(small, name + ".bin")],
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            check(False, f"{name}: eb-assess --iid exits 0 ({p.stderr.strip()})")
            continue
        got = json.loads(p.stdout)["iid"]
        print(f"# {name}, first {want['samples']}: {time.monotonic() - start:.1f} s, {got}")
        for item in ("permutation", "chi_square", "lrs", "verdict"):
            check(got[item] == want[item], f"{name} IID {item} on {want['samples']} samples: "
                  f"{got[item]}, as the reference")


def compare_restart(tool, tmp, names, ref):
    """The restart tests on each set read as 1,000 restarts of 1,000 samples, at the reference's
    H_I: the same sanity verdict, most common count and (within one: the reference simulates
    it) cutoff; the same row and column figures within the tolerance; the same verdict."""
    for name in names:
        want = ref[name].get("restart")
        if not want:
            continue
        p = subprocess.run([tool, "--json", "--restart", want["h_i"],
                            os.path.join(tmp, name + ".bin")],
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            check(False, f"{name}: eb-assess --restart exits 0 ({p.stderr.strip()})")
            continue
        got = json.loads(p.stdout)["restart"]
        print(f"# {name} restart at H_I {want['h_i']}: {got}")
        check(got["sanity"] == want["sanity"], f"{name} restart sanity: {got['sanity']}")
        check(max(got["row_max"], got["column_max"]) == int(want["max_count"]),
              f"{name} restart most common count {want['max_count']}")
        check(abs(got["cutoff"] - int(want["cutoff"])) <= 1,
              f"{name} restart cutoff {got['cutoff']} against the reference's {want['cutoff']}")
        for item in ("h_rows", "h_columns"):
            if item in want:
                check(abs(got[item] - float(want[item])) <= TOLERANCE,
                      f"{name} restart {item} {got[item]} against {want[item]}")
        check(got["verdict"] == want["verdict"], f"{name} restart verdict: {got['verdict']}")


def main():
    args = sys.argv[1:]
    full = args[:1] == ["--full"]
    args = args[1:] if full else args
    if len(args) < 3:
        sys.exit(__doc__)
    tool, sets, table = args[:3]
    ref = load(table)
    names = args[3:] or sorted(ref)
    with tempfile.TemporaryDirectory(prefix="sp90b-") as tmp:
        subprocess.run([sys.executable, sets, tmp] + names, check=True)
        for name in names:
            start = time.monotonic()
            p = subprocess.run([tool, "--json", os.path.join(tmp, name + ".bin")],
                               capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                check(False, f"{name}: eb-assess exits 0 ({p.stderr.strip()})")
                continue
            print(f"# {name}: {time.monotonic() - start:.1f} s")
            compare(name, json.loads(p.stdout)["sp800_90b"], ref[name])
        compare_restart(tool, tmp, names, ref)
        compare_iid(tool, tmp, sets, names, ref, "iid_full" if full else "iid")
    print(f"1..{n_check}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
