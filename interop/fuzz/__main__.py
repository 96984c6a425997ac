"""python -m interop.fuzz: a full fuzzing campaign against a fresh broker; exits 1 on any problem."""
from __future__ import annotations

import argparse
import json
import sys
import time

from .campaign import run_campaign


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m interop.fuzz", description=__doc__)
    ap.add_argument("--frames", type=int, default=1_000_000, help="mutated frames to send (default 10^6)")
    ap.add_argument("--connections", type=int, default=32, help="concurrent fuzzing connections")
    ap.add_argument("--seed", type=int, default=int(time.time()), help="random seed (printed; reruns a campaign)")
    ap.add_argument("--no-companion", action="store_true", help="no real client beside the fuzzer")
    ap.add_argument("--stall-limit", type=float, default=1.0, help="probe round trip that counts as a stall (s)")
    ap.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE",
                    help="broker config override (repeatable)")
    ap.add_argument("--json", help="write the result here as JSON")
    ap.add_argument("--broker-log", help="keep the broker's log here")
    ap.add_argument("--data-parent", help="folder for the broker's data (default /dev/shm where it exists)")
    args = ap.parse_args(argv)
    overrides = dict(o.split("=", 1) for o in args.override)
    print(f"seed {args.seed}, {args.frames} frames, {args.connections} connections", flush=True)
    result = run_campaign(args.frames, connections=args.connections, seed=args.seed, overrides=overrides,
                          companion=not args.no_companion, progress=lambda line: print(line, flush=True),
                          data_parent=args.data_parent, keep_log=args.broker_log)
    print(result.summary())
    problems = result.problems(args.stall_limit)
    for p in problems:
        print("PROBLEM:", p)
    if args.json:
        data = {k: v for k, v in vars(result).items() if k != "history"}
        data["history"] = result.history.summary() if result.history else None
        data["seed"] = args.seed
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1, default=str)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
