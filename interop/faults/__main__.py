"""python -m interop.faults: a fault campaign against a fresh 3-broker cluster; exits 1 on any anomaly."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .campaign import KINDS, missing, run_campaign


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m interop.faults", description=__doc__)
    ap.add_argument("--faults", type=int, default=100, help="faults of each kind (default 100)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--seed", type=int, default=int(time.time()), help="random seed (printed; reruns a campaign)")
    ap.add_argument("--minutes", type=float, help="start no new fault after this long")
    ap.add_argument("--rate", type=float, default=100.0, help="records a second per producer (two producers)")
    ap.add_argument("--history", help="save the history here (JSON lines)")
    ap.add_argument("--json", help="write the result here as JSON")
    ap.add_argument("--keep", help="run the cluster in this (new) directory and keep it: brokers' logs and data")
    args = ap.parse_args(argv)
    why = missing()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}")
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    print(f"seed {args.seed}, {args.faults} faults of each of {', '.join(kinds)}", flush=True)
    result = run_campaign(args.faults, kinds=kinds, seed=args.seed, deadline=deadline, rate=args.rate,
                          history_path=args.history, data_dir=args.keep,
                          log=lambda line: print(time.strftime("%H:%M:%S"), line, flush=True))
    print(result.summary(), flush=True)
    if args.json:
        r = result.report
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "faults": result.faults, "stuck": result.stuck, "seconds": round(result.seconds),
                       "acknowledged": r.acked, "reads": r.read, "load_average": os.getloadavg(),
                       "restarts_after_full_disk": result.restarts_after_full_disk,
                       "produce_errors": len(result.produce_errors),
                       **{name: len(getattr(r, name)) for name in r.ANOMALIES},
                       "unverified": len(r.unverified), "stalls": result.stalls,
                       "examples": {name: getattr(r, name)[:10] for name in r.ANOMALIES if getattr(r, name)}},
                      f, indent=1)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
