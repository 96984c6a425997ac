"""The Grafana dashboard's every query, run by a real Prometheus over a broker under traffic.

A dashboard fails quietly: a metric renamed, a label mistyped or a histogram
without buckets leaves a panel empty, and nothing reports an error. So a real
Prometheus server (Debian's `prometheus`) scrapes a broker every second while
docs/grafana/screenshot.py's workload runs (three topics, a consumer group, a
producer held to a quota), and each target of kafka-compat-dashboard.json, with
its variables filled in as Grafana fills them, must come back with values.
"""
from __future__ import annotations

import importlib.util
import json
import math
import shutil
import time
import urllib.parse
import urllib.request

import pytest
from peers import ROOT, free_port, require, start_prometheus, stop

from kafka_compat.testing import EmbeddedBroker

DASHBOARD = ROOT / "docs" / "grafana" / "kafka-compat-dashboard.json"
# Grafana's $__rate_interval: four scrape intervals at the least (the data source's is 1 s here)
RATE_INTERVAL = "4s"


def load_screenshot():
    spec = importlib.util.spec_from_file_location("dashboard_screenshot", DASHBOARD.parent / "screenshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


shot = load_screenshot()
dashboard = json.loads(DASHBOARD.read_text())
panels = [p for p in dashboard["panels"] if p["type"] != "row"]


def api(prom: str, path: str, **params) -> dict:
    with urllib.request.urlopen(f"{prom}{path}?{urllib.parse.urlencode(params, doseq=True)}", timeout=30) as r:
        answer = json.load(r)
    assert answer["status"] == "success", answer
    return answer["data"]


@pytest.fixture(scope="module", name="run")
def run_fixture(tmp_path_factory):
    """Prometheus's URL, the job it scrapes the broker as, and the workload's [start, end]."""
    require(shutil.which("prometheus"), "prometheus")
    metrics_port = free_port()
    # no initial rebalance delay: the group's members must heartbeat twice within the 8 s workload
    with EmbeddedBroker({"prometheus.listener": f"http://127.0.0.1:{metrics_port}", "num.partitions": 3,
                         "group.initial.rebalance.delay.ms": 0}) as broker:
        prom, url = start_prometheus([f"127.0.0.1:{metrics_port}"], tmp_path_factory.mktemp("prometheus"))
        try:
            deadline = time.monotonic() + 30
            while not [s for s in api(url, "/api/v1/query", query="up")["result"] if s["value"][1] == "1"]:
                assert time.monotonic() < deadline, "Prometheus never scraped the broker"
                time.sleep(0.2)
            start = time.time()
            shot.workload(broker, 8.0)
            time.sleep(2.5)                  # two more scrapes: the run's last counts are in
            end = time.time()
            yield url, start, end
        finally:
            stop(prom)


def job_values(run) -> list[str]:
    """The dashboard's `job` variable: what Grafana offers for it (label_values(metric, job))."""
    url, start, end = run
    (template,) = dashboard["templating"]["list"]
    metric, label = template["query"][len("label_values("):-1].split(", ")
    return api(url, f"/api/v1/label/{label}/values", **{"match[]": metric, "start": start, "end": end})


def series(run, expr: str) -> dict[str, list[float]]:
    """One target over the run as Grafana asks for it: legend labels -> the values' finite points."""
    url, start, end = run
    job = "|".join(job_values(run))          # a multi-value variable with everything selected
    out = {}
    for s in shot.query_range(url, expr, start, end, job=job, rate_interval=RATE_INTERVAL):
        out[json.dumps(s["metric"], sort_keys=True)] = [v for _, v in (map(float, p) for p in s["values"])
                                                        if math.isfinite(v)]
    return out


def test_the_dashboard_imports_into_grafana_with_a_prometheus_data_source():
    """The shape Grafana's import dialog needs: one data source input every panel uses, a 24-column grid."""
    (source,) = dashboard["__inputs"]
    assert (source["type"], source["pluginId"]) == ("datasource", "prometheus")
    ref = {"type": "prometheus", "uid": "${%s}" % source["name"]}
    cells: set[tuple[int, int]] = set()
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for p in dashboard["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        mine = {(g["x"] + dx, g["y"] + dy) for dx in range(g["w"]) for dy in range(g["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
        if p["type"] == "row":
            continue
        assert p["datasource"] == ref, p["title"]
        assert p["targets"], p["title"]
        ref_ids = [t["refId"] for t in p["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == ref, p["title"]
    assert dashboard["templating"]["list"][0]["datasource"] == ref


def dropped(ours, theirs, path: str = "") -> list[str]:
    """Where ``theirs`` lost a key of ``ours`` or changed a value (keys it added are defaults)."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [path]
        return [p for k, v in ours.items()
                for p in ([f"{path}/{k}"] if k not in theirs else dropped(v, theirs[k], f"{path}/{k}"))]
    if isinstance(ours, list):
        if not isinstance(theirs, list) or len(ours) != len(theirs):
            return [path]
        return [p for i, (a, b) in enumerate(zip(ours, theirs)) for p in dropped(a, b, f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path}: {ours!r} became {theirs!r}"]


def test_grafanas_own_dashboard_model_keeps_every_field():
    """Read through Grafana's dashboard schema (grafana-foundation-sdk, generated from it, with the
    timeseries, stat and Prometheus query models): a key the schema does not know is dropped, so a
    misspelt option or one Grafana has renamed shows up here. `__inputs` belongs to the export format
    (the import dialog's data source question), not to the dashboard."""
    sdk = pytest.importorskip("grafana_foundation_sdk")
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard
    from grafana_foundation_sdk.models.prometheus import Dataquery
    from grafana_foundation_sdk.models.timeseries import Options

    register_default_plugins()
    model = Dashboard.from_json(dashboard)
    assert isinstance(model.panels[1].options, Options) and isinstance(model.panels[1].targets[0], Dataquery), sdk
    again = json.loads(json.dumps(model, cls=JSONEncoder))
    assert dropped({k: v for k, v in dashboard.items() if k != "__inputs"}, again) == []
    assert dropped({"panels": [{"options": {"legend": {"displayMod": "list"}}}]}, json.loads(json.dumps(
        Dashboard.from_json({"panels": [{"type": "timeseries", "options": {"legend": {"displayMod": "list"}}}]}),
        cls=JSONEncoder))) == ["/panels[0]/options/legend/displayMod"]          # the check itself can fail


def test_the_job_variable_offers_the_scraped_broker(run):
    assert job_values(run) == ["kafka-compat"]


@pytest.mark.parametrize("panel", panels, ids=[p["title"] for p in panels])
def test_every_target_of_the_panel_has_data(run, panel):
    for target in panel["targets"]:
        got = series(run, target["expr"])
        assert got, f"{target['refId']}: no series for {target['expr']}"
        assert any(points for points in got.values()), f"{target['refId']}: only NaN for {target['expr']}"


def by(run, expr: str, label: str) -> dict[str, float]:
    """A target's largest value over the run, per value of one label (the largest of its series)."""
    out: dict[str, float] = {}
    for k, v in series(run, expr).items():
        key = json.loads(k).get(label, "")
        out[key] = max([out.get(key, 0.0), *v])
    return out


def target(title: str, ref: str = "A") -> str:
    (panel,) = [p for p in panels if p["title"] == title]
    return next(t["expr"] for t in panel["targets"] if t["refId"] == ref)


def test_the_panels_show_what_the_workload_did(run):
    messages = by(run, target("Messages in /s"), "topic")
    assert {"orders", "clicks", "audit"} <= {t for t, v in messages.items() if v > 0}, messages
    requests = by(run, target("Requests /s by API"), "request")
    # (a group's one JoinGroup and SyncGroup may fall before their counters' first scrape: no rate)
    assert {"Produce", "Fetch", "OffsetCommit", "Heartbeat"} <= {r for r, v in requests.items() if v > 0}, requests
    throttled = by(run, target("Throttle time by client"), "client_id")
    assert throttled.get("throttled-app", 0) > 0, throttled
    assert by(run, target("Consumer groups by state"), "")[""] >= 1        # the group reached Stable
    sizes = by(run, target("Log size by topic"), "topic")
    assert all(sizes.get(t, 0) > 0 for t in ("orders", "clicks", "audit")), sizes
    (controllers,) = series(run, target("Controller")).values()
    assert controllers[-1] == 1
