"""Summarise one librdkafka test-runner run: one line per broker test, a closing count.

run.sh runs the suite once per test scenario (default, noautocreate), each pass
in its own directory. The runner's JSON report (TEST_REPORT) holds each test's state but not why it
failed or was skipped; those reasons come from its log, where each failure is a
`### Test "NAME" failed at ...: ###` block followed by the message, and the
closing summary table gives skip reasons. Exit status 1 when a test that is not
in skip.txt failed, or a runner broke without a failed test to show for it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
FAILED_AT = re.compile(r'^### Test "([^"]+)" failed at [^\n]*###\n([^\n]*)', re.M)
SKIPPING = re.compile(r"^\[(\S+)\s*/[^\]]*\] WARN: SKIPPING TEST: (.*)$", re.M)
SUMMARY_ROW = re.compile(r"^\|[ \t]*(\S+)[ \t]*\|[ \t]*(PASSED|FAILED|SKIPPED)[ \t]*\|[^|\n]*\|[ \t]*(.*)$", re.M)
# Tests the runner filtered out by flag (-L, -E, manual): not broker tests of this run.
FILTERED = ("Filtered due to", "Manual test")


def load_skip_list(path: str) -> dict[str, str]:
    """skip.txt: `<test name> <reason>` a line, `#` comments."""
    skips = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, reason = line.partition(" ")
                skips[name] = reason.strip()
    return skips


def reasons_from_log(text: str) -> dict[str, str]:
    text = ANSI.sub("", text)
    reasons = {}
    for name, state, extra in SUMMARY_ROW.findall(text):
        if extra.strip():
            reasons[name] = extra.strip()
    for name, message in SKIPPING.findall(text):
        reasons.setdefault(name, message.strip())
    for name, message in FAILED_AT.findall(text):
        reasons.setdefault(name, message.strip())
    return reasons


def load_pass(path: str) -> tuple[dict, dict[str, str], int]:
    """One scenario's run directory: (tests by name, reasons by name, runner exit status)."""
    with open(os.path.join(path, "runner.log"), errors="replace") as f:
        log = f.read()
    with open(os.path.join(path, "rc")) as f:
        rc = int(f.read())
    try:
        with open(os.path.join(path, "report.json")) as f:
            tests = json.load(f)["tests"]
    except (OSError, ValueError) as e:
        print(log[-5000:])
        raise SystemExit(f"{path}: no test report ({e}); test-runner exited with {rc}")
    return tests, reasons_from_log(log), rc


def merge(passes: list[tuple[dict, dict[str, str], int]]) -> dict[str, tuple[dict, str]]:
    """Each test as the pass that ran it saw it; a test no pass ran keeps a stated skip reason, and a
    test several passes ran (plain tests run again over SASL_SSL) is as good as its worst run.

    A scenario's runner skips the other scenarios' tests silently (no reason logged).
    """
    def rank(t: dict, why: str) -> int:
        return 3 if t["state"] not in ("SKIPPED", "PASSED") else 2 if t["state"] == "PASSED" else 1 if why else 0

    merged: dict[str, tuple[dict, str]] = {}
    for tests, reasons, _ in passes:
        for name, t in tests.items():
            why = reasons.get(name, "")
            if name not in merged or rank(t, why) > rank(*merged[name]):
                merged[name] = (t, why)
    return merged


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("skip_list")
    ap.add_argument("runs", nargs="+", help="run directories: report.json, runner.log, rc")
    args = ap.parse_args(argv)

    skips = load_skip_list(args.skip_list)
    passes = [load_pass(p) for p in args.runs]
    merged = merge(passes)

    passed, failed, skipped, listed, filtered = [], [], [], [], 0
    for name, (t, why) in merged.items():
        if name == "<MAIN>":
            continue
        state = t["state"]
        if name[:4] >= "1000" or (state == "SKIPPED" and (not why or why.startswith(FILTERED))):
            filtered += 1  # broker-less, manual, outside 0000-0999, or not asked for (TESTS)
            continue
        if name in skips:
            listed.append(name)
            print(f"SKIP  {name:48s} skip.txt: {skips[name]}")
        elif state == "SKIPPED" and "TESTS_SKIP" in why:
            filtered += 1  # a broker-less test sharing its number with a listed one
        elif state == "PASSED":
            passed.append(name)
            print(f"PASS  {name:48s} {t['duration']:7.1f}s")
        elif state == "SKIPPED":
            skipped.append(name)
            print(f"SKIP  {name:48s} suite: {why}")
        else:  # FAILED, or RUNNING / NOT_STARTED when the runner died under it
            failed.append(name)
            print(f"FAIL  {name:48s} {t['duration']:7.1f}s  {state}: {why}")

    # A runner that exits non-zero with every test passed or skipped broke afterwards
    # (e.g. librdkafka threads left behind): that fails the run too.
    broken = [f"{path}: test-runner exited with {rc}: {reasons.get('<MAIN>', 'see its log')}"
              for path, (tests, reasons, rc) in zip(args.runs, passes)
              if rc != 0 and all(t["state"] in ("PASSED", "SKIPPED") for t in tests.values())]
    for b in broken:
        print(f"FAIL  {b}")
    unknown = sorted(set(skips) - set(merged))
    if unknown:
        print(f"note: skip.txt names tests this runner does not have: {', '.join(unknown)}")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped) + len(listed)} skipped "
          f"({len(listed)} in skip.txt, {len(skipped)} by the suite; {filtered} broker-less or unselected tests not run)")
    return 1 if failed or broken else 0


if __name__ == "__main__":
    sys.exit(main())
