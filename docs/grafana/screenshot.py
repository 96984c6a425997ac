"""Draw docs/grafana/dashboard.png: the dashboard's panels over a real run, queried from a real Prometheus.

Grafana is not packaged for Debian, PyPI or npm, so this does what Grafana would:
it starts a broker with its metrics endpoint, a Prometheus server (Debian's
`prometheus` package) scraping it every second, and a workload (producers on
three topics, a consumer group committing offsets, one producer held to a
256 KB/s quota); then it runs every query of kafka-compat-dashboard.json
against that Prometheus over the run and plots the answers in the dashboard's
layout with matplotlib. `$job` becomes `.*`, `$__rate_interval` 5s.

    pip install matplotlib && apt-get install prometheus
    python docs/grafana/screenshot.py [--seconds 90] [--out docs/grafana/dashboard.png]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from confluent_kafka import Consumer, Producer  # noqa: E402
from wire import WireClient  # noqa: E402

from interop.peers import start_prometheus  # noqa: E402
from kafka_compat.testing import EmbeddedBroker, free_port  # noqa: E402

DASHBOARD = os.path.join(HERE, "kafka-compat-dashboard.json")


def set_quota(broker: EmbeddedBroker, client_id: str, rate: int) -> None:
    from kafka_compat.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as A
    c = WireClient("127.0.0.1", broker.port)
    c.call(49, 1, A(validate_only=False, entries=[A.EntryData(
        entity=[A.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[A.OpData(key="producer_byte_rate", value=float(rate), remove=False)])]))
    c.close()


def workload(broker: EmbeddedBroker, seconds: float) -> None:
    """Uneven traffic on three topics, a consumer group, and a quoted producer."""
    set_quota(broker, "throttled-app", 256_000)
    stop = time.monotonic() + seconds

    def produce(topic: str, client_id: str, size: int, pause: float) -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5,
                      "queue.buffering.max.kbytes": 4096})
        i = 0
        while time.monotonic() < stop:
            try:
                p.produce(topic, b"%08d" % i + b"x" * size)
                i += 1
            except BufferError:
                p.poll(0.01)
            if i % 200 == 0:
                p.poll(0)
                time.sleep(pause * (1.5 + (i // 5000) % 3))
        p.purge()
        p.flush(5)

    def consume() -> None:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dashboard-readers",
                      "auto.offset.reset": "earliest", "auto.commit.interval.ms": 1000})
        c.subscribe(["orders", "clicks"])
        while time.monotonic() < stop:
            c.consume(500, 0.5)
        c.close()

    threads = [threading.Thread(target=produce, args=a) for a in (("orders", "orders-app", 400, 0.02),
                                                                   ("clicks", "clicks-app", 120, 0.01),
                                                                   ("audit", "throttled-app", 2000, 0.0))]
    threads += [threading.Thread(target=consume)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def expand(expr: str, job: str = ".*", rate_interval: str = "5s") -> str:
    """A target's PromQL with the dashboard's variables filled in, as Grafana would send it."""
    return expr.replace("$__rate_interval", rate_interval).replace("$job", job)


def query_range(prom: str, expr: str, start: float, end: float, **variables) -> list[dict]:
    """Prometheus's answer to one target over [start, end], a point a second: its series."""
    qs = urllib.parse.urlencode({"query": expand(expr, **variables), "start": start, "end": end, "step": 1})
    try:
        with urllib.request.urlopen(f"{prom}/api/v1/query_range?{qs}", timeout=30) as r:
            answer = json.load(r)
    except urllib.error.HTTPError as e:        # a query Prometheus cannot parse or run: 400 with the reason
        raise ValueError(f"{expr}: {e.read().decode(errors='replace')}") from e
    if answer.get("status") != "success":
        raise ValueError(f"{expr}: {answer}")
    return answer["data"]["result"]


def legend(fmt: str, labels: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt) or str(labels)


def render(prom: str, start: float, end: float, out: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, FuncFormatter

    dash = json.load(open(DASHBOARD))
    panels = dash["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    plt.style.use("dark_background")
    fig = plt.figure(figsize=(16, rows * 0.33), dpi=72, facecolor="#111217")
    grid = fig.add_gridspec(rows, 24, hspace=0.0, wspace=0.0, left=0.01, right=0.99, top=0.97, bottom=0.01)
    fig.suptitle(f"{dash['title']}  (kafka-compat, rendered from Prometheus query_range; "
                 f"{int(end - start)} s run)", color="#d8d9da", fontsize=13, x=0.01, ha="left")
    for p in panels:
        g = p["gridPos"]
        if p["type"] == "row":
            ax = fig.add_subplot(grid[g["y"]:g["y"] + 1, :])
            ax.axis("off")
            ax.text(0.0, 0.1, p["title"], color="#d8d9da", fontsize=11, fontweight="bold", transform=ax.transAxes)
            continue
        ax = fig.add_subplot(grid[g["y"]:g["y"] + g["h"], g["x"]:g["x"] + g["w"]])
        inner = ax.inset_axes([0.1, 0.3, 0.86, 0.55])
        ax.set_facecolor("#181b1f")
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_color("#2c3235")
        ax.text(0.01, 0.96, p["title"], color="#d8d9da", fontsize=10, va="top", transform=ax.transAxes)
        unit = p["fieldConfig"]["defaults"].get("unit", "short")
        series = []
        for t in p["targets"]:
            for r in query_range(prom, t["expr"], start, end):
                series.append((legend(t["legendFormat"], r["metric"]),
                               [(float(ts) - start, float(v)) for ts, v in r["values"]]))
        if p["type"] == "stat":
            inner.axis("off")
            for i, (name, values) in enumerate(series):
                last = values[-1][1] if values else float("nan")
                inner.text(0.25 + 0.5 * i, 0.4, f"{last:g}", color="#73bf69", fontsize=28, ha="center")
                inner.text(0.25 + 0.5 * i, 0.05, name, color="#d8d9da", fontsize=9, ha="center")
            continue
        inner.set_facecolor("#181b1f")
        series.sort(key=lambda s: -sum(v for _, v in s[1] if v == v) / max(len(s[1]), 1))   # biggest first
        for name, values in series[:10]:
            if values:
                xs, ys = zip(*values)
                inner.plot(xs, ys, linewidth=1.3, label=name)
        inner.tick_params(labelsize=7, colors="#9fa7b3")
        if unit == "ms":
            inner.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g} s" if abs(v) >= 1000
                                                          else f"{v:g} ms"))
        else:
            inner.yaxis.set_major_formatter(EngFormatter(unit={"Bps": "B/s", "bytes": "B"}.get(unit, "")))
        inner.grid(color="#2c3235", linewidth=0.5)
        inner.set_xlim(0, end - start)
        if series:
            inner.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4, frameon=False)
    fig.savefig(out, facecolor=fig.get_facecolor())
    from PIL import Image  # matplotlib's own dependency: a 64-colour PNG stays small
    Image.open(out).convert("RGB").quantize(colors=64).save(out, optimize=True)
    print(f"wrote {out}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--out", default=os.path.join(HERE, "dashboard.png"))
    args = ap.parse_args()
    if shutil.which("prometheus") is None:
        print("prometheus is not installed (Debian: apt-get install prometheus)", file=sys.stderr)
        return 1
    workdir = tempfile.mkdtemp(prefix="kafka-compat-dashboard-")
    metrics_port = free_port()
    try:
        with EmbeddedBroker({"prometheus.listener": f"http://127.0.0.1:{metrics_port}",
                             "num.partitions": 3}) as broker:
            prom, url = start_prometheus([f"127.0.0.1:{metrics_port}"], workdir)
            try:
                time.sleep(3)
                start = time.time()
                workload(broker, args.seconds)
                time.sleep(3)
                end = time.time()
                render(url, start, end, args.out)
            finally:
                prom.terminate()
                prom.wait(30)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
