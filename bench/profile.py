"""Summarise py-spy's raw (collapsed-stack) profiles that `bench/run.py --profile DIR` writes.

    python bench/profile.py DIR/produce-1KiB-acks1-none.txt [--top 30]

Prints the functions with the most samples on top of the stack (self) and
anywhere on it (total), as a share of all samples, idle included.
"""
from __future__ import annotations

import argparse
import collections


def load(path: str):
    stacks = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            stacks.append((stack.split(";"), int(count)))
    return stacks


def summarise(stacks, top: int) -> str:
    total = sum(c for _, c in stacks) or 1
    own = collections.Counter()
    anywhere = collections.Counter()
    for frames, count in stacks:
        own[frames[-1]] += count
        for frame in set(frames):
            anywhere[frame] += count
    lines = [f"{total} samples"]
    for title, counter in (("self", own), ("total", anywhere)):
        lines.append(f"-- {title}")
        lines += [f"{100 * c / total:6.1f}%  {frame}" for frame, c in counter.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    print(summarise(load(args.profile), args.top))


if __name__ == "__main__":
    main()
