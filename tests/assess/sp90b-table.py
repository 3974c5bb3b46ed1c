#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turns the JSON reports of NIST's SP 800-90B reference tool (ea_non_iid -o, ea_iid -o,
ea_restart -o) on the comparison sets into the table the agreement test reads,
tests/assess/sp90b-reference.tsv. docs/assess.md says how to take the reports.

    sp90b-table.py DIR [SMALL_DIR [RESTART_DIR]] > sp90b-reference.tsv

DIR holds SET.non_iid.json (on 10^6 samples), and where taken SET.iid.json (ea_iid on the first
100,000: track iid_full); SMALL_DIR holds SET.iid.json on the first 10,000 (track iid, the one CI
checks); RESTART_DIR holds SET.restart.json and SET.restart.txt (ea_restart -n -v -o on the whole
set read as 1,000 restarts of 1,000 samples: track restart; its cutoff, counts and row and column
figures are only in the text). The table's rows: set, track (literal, bitstring, final, iid,
iid_full, restart), item, value; a value is a figure to its last digit or, for a verdict, pass or
fail."""

import glob
import json
import os
import sys

# The reference's test case names, and the keys eb-assess --json uses.
CASES = {
    "Most Common Value": "mcv",
    "Collision Test (for bit strings only)": "collision",
    "Markov Test (for bit strings only)": "markov",
    "Compression Test (for bit strings only)": "compression",
    "T-Tuple Test": "t_tuple",
    "LRS Test": "lrs",
    "Multi Most Common in Window Test": "multi_mcw",
    "Lag Prediction Test": "lag",
    "Multi Markov Model with Counting Test (MultiMMC)": "multi_mmc",
    "LZ78Y Test": "lz78y",
}
# Where each figure sits in a test case: (JSON field, track).
FIELDS = [("hOriginal", "literal"), ("tTupleRes", "literal"), ("lrsRes", "literal"),
          ("hBitstring", "bitstring"), ("binTTupleRes", "bitstring"), ("binLrsRes", "bitstring")]


def rows_non_iid(name, report):
    for case in report["testCases"]:
        desc = case["testCaseDesc"]
        if desc == "Overall":
            yield name, "final", "min_entropy", repr(case["hAssessed"])
            continue
        for field, track in FIELDS:
            # A field the reference left at its -1 did not run.
            if field in case and case[field] >= 0:
                yield name, track, CASES[desc], repr(case[field])


def rows_iid(name, report, track, samples):
    case = report["testCases"][0]
    yield name, track, "samples", str(samples)
    for field, item in (("passedIidPermutationTests", "permutation"),
                        ("passedChiSquareTests", "chi_square"),
                        ("passedLongestRepeatedSubstringTest", "lrs")):
        yield name, track, item, "pass" if case[field] else "fail"
    # The report's "IID" field says which tool wrote it, not a verdict: the data are IID when
    # all three tests pass (SP 800-90B section 5).
    ok = all(case[f] for f in ("passedIidPermutationTests", "passedChiSquareTests",
                               "passedLongestRepeatedSubstringTest"))
    yield name, track, "verdict", "pass" if ok else "fail"


def rows_restart(name, report, text):
    """From ea_restart's report and its verbose text."""
    yield name, "restart", "h_i", report["commandline"].split()[-1]
    fields = {}
    for line in text.splitlines():
        for key, item in (("X_cutoff:", "cutoff"), ("X_max:", "max_count"), ("H_r:", "h_rows"),
                          ("H_c:", "h_columns")):
            if key in line:
                fields[item] = line.split(key)[1].split()[0].rstrip(",")
    sanity = "Restart Sanity Check Failed" not in text
    for item in ("cutoff", "max_count", "h_rows", "h_columns"):
        if item in fields:
            yield name, "restart", item, fields[item]
    yield name, "restart", "sanity", "pass" if sanity else "fail"
    yield name, "restart", "verdict", "pass" if "Validation Test Passed" in text else "fail"


def main():
    if len(sys.argv) not in (2, 3, 4):
        sys.exit("Usage: sp90b-table.py DIR [SMALL_DIR [RESTART_DIR]]")
    d = sys.argv[1]
    print("# NIST SP800-90B_EntropyAssessment v1.1.8 (commit 68ed165f), on the sets "
          "tests/assess/sp90b-sets.py writes;\n# regenerate with tests/assess/sp90b-table.py "
          "(docs/assess.md).\n# set\ttrack\titem\tvalue")
    for path in sorted(glob.glob(os.path.join(d, "*.non_iid.json"))):
        name = os.path.basename(path).split(".")[0]
        with open(path) as f:
            rows = list(rows_non_iid(name, json.load(f)))
        iid_dirs = [(d, "iid_full", 100000)]
        if len(sys.argv) >= 3:
            iid_dirs.append((sys.argv[2], "iid", 10000))
        for where, track, samples in iid_dirs:
            p = os.path.join(where, f"{name}.iid.json")
            if os.path.exists(p):
                with open(p) as f:
                    rows += list(rows_iid(name, json.load(f), track, samples))
        if len(sys.argv) == 4:
            p = os.path.join(sys.argv[3], f"{name}.restart.json")
            if os.path.exists(p):
                with open(p) as f, open(p[:-len("json")] + "txt") as t:
                    rows += list(rows_restart(name, json.load(f), t.read()))
        for row in rows:
            print("\t".join(row))


if __name__ == "__main__":
    main()
