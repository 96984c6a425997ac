"""The documentation stays true: every ```python example in README.md and docs/ runs against a real
broker or cluster, the API table of docs/compatibility.md is the one the handler registry makes (and a
cluster member really advertises it), the layout table of docs/architecture.md names every module, and
README keeps the two commands CI and newcomers run."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafka_compat import docs
from kafka_compat.faults import disk
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.testing import EmbeddedBroker, EmbeddedCluster, zookeeper_missing

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from wire import WireClient  # noqa: E402

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\n(.*?)^```$", re.M | re.S)
QUICKSTART_BOOTSTRAP = "127.0.0.1:9092"     # what `kafka-compat serve` listens on by default


def fenced_blocks() -> list[tuple[str, int, str, str]]:
    """(page, line, language, code) of every fenced block of every page."""
    out = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            out.append((page.relative_to(ROOT).as_posix(), text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)))
    return out


PYTHON = [b for b in fenced_blocks() if b[2] == "python"]


def test_every_block_says_its_language():
    """Only ```python blocks run; a block without a tag would be taken for neither."""
    assert [f"{page}:{line}" for page, line, lang, _ in fenced_blocks() if not lang] == []
    assert len(PYTHON) >= 4


def missing_for(code: str) -> str | None:
    """Why this example cannot run on this machine (what it needs is not installed), or None."""
    if "EmbeddedCluster" in code and zookeeper_missing():
        return zookeeper_missing()
    if "disks=" in code and disk.missing():
        return disk.missing()
    if "slow_disk" in code and disk.throttling_missing():
        return disk.throttling_missing()
    return None


@pytest.mark.parametrize("page,line,code", [(p, n, c) for p, n, _, c in PYTHON], ids=[f"{p}:{n}" for p, n, _, _ in PYTHON])
def test_python_example_runs(page, line, code, tmp_path):
    """Each example as its text says: one defining pytest tests runs under pytest (its fixtures from
    kafka_compat.testing); one talking to the quickstart's broker gets an EmbeddedBroker in its place
    (at its own port, since 9092 may be taken); the others build their own broker or cluster."""
    reason = missing_for(code)
    if reason:
        pytest.skip(reason)
    if re.search(r"^def test_", code, re.M):
        path = tmp_path / "test_example.py"
        path.write_text(code)
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                                capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert re.search(r"\b\d+ passed", result.stdout) and "skipped" not in result.stdout, result.stdout
    elif QUICKSTART_BOOTSTRAP in code:
        with EmbeddedBroker() as broker:
            exec(compile(code.replace(QUICKSTART_BOOTSTRAP, broker.bootstrap), f"{page}:{line}", "exec"),
                 {"__name__": "__docs__"})
    else:
        exec(compile(code, f"{page}:{line}", "exec"), {"__name__": "__docs__"})


# -- the two commands ---------------------------------------------------------------------------------

def test_readme_gives_the_two_commands_and_stays_short():
    readme = (ROOT / "README.md").read_text()
    shell = [c.strip() for _, _, lang, c in fenced_blocks() if lang == "sh"]
    assert "pip install . && kafka-compat serve" in shell
    assert "bash tests/run.sh" in shell
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text()     # CI runs what README gives
    assert len(readme.splitlines()) <= 260


def test_serve_defaults_are_the_ones_readme_names():
    from kafka_compat.cli import EMBEDDED_DEFAULTS
    assert EMBEDDED_DEFAULTS["listeners"] == f"PLAINTEXT://{QUICKSTART_BOOTSTRAP}"
    assert EMBEDDED_DEFAULTS["log.dirs"] == "./kafka-compat-data"


def test_every_relative_link_leads_somewhere():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.name}: {target}")
    assert broken == []


# -- the API table ------------------------------------------------------------------------------------

def test_api_table_is_the_registrys():
    text = docs.DOC.read_text()
    assert docs.render(text) == text, "run python -m kafka_compat.docs"
    assert docs.main(["--check"]) == 0


def test_api_table_check_fails_on_a_wrong_row_or_a_missing_one():
    text = docs.DOC.read_text()
    wrong = text.replace("| 0 | Produce | 0–13 |", "| 0 | Produce | 0–12 |")
    assert wrong != text and docs.render(wrong) != wrong
    missing = re.sub(r"^\| 18 \| ApiVersions .*\n", "", text, flags=re.M)
    assert missing != text and docs.render(missing) != missing


def test_the_table_lists_the_controllers_apis_for_cluster_members_only():
    single, cluster = docs.single_node_versions(), docs.cluster_member_versions()
    assert set(cluster) - set(single) == {4, 5, 6, 7, 56}
    assert cluster[45] == (0, 0) and single[45] == (0, 1)     # the controller's reassignments: v0


@pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))
def test_a_cluster_member_advertises_the_tables_cluster_column():
    """The cluster column is computed from the handler classes; a real member's ApiVersions holds it true."""
    with EmbeddedCluster(1) as cluster:
        broker = cluster.brokers[0]
        c = WireClient("127.0.0.1", broker.port)
        resp = c.call(18, 3, ApiVersionsRequest(client_software_name="docs", client_software_version="1"))
        assert resp.error_code == 0
        assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == docs.cluster_member_versions()


# -- the layout table ---------------------------------------------------------------------------------

LAYOUT_ROOTS = ("kafka_compat", "storage", "codegen")
GENERATED = "kafka_compat/protocol/messages/"     # one codec per schema, held to codegen by tests/test_codegen.py


def layout_rows(text: str) -> dict[str, str]:
    """path -> what the rows of that path name, from the Layout section's table (rows of one path merge)."""
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([^`]+/)` \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = rows.get(m.group(1), "") + " " + m.group(2)
    return rows


def unnamed_modules(text: str) -> list[str]:
    """Modules no row names, and names in a row that are no module."""
    rows = layout_rows(text)
    problems = []
    modules = set()
    for top in LAYOUT_ROOTS:
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py" or "/__pycache__/" in rel:
                continue
            modules.add(rel)
            if rel.startswith(GENERATED) and GENERATED in rows:
                continue
            folder = max((f for f in rows if rel.startswith(f)), key=len, default=None)
            if folder is None or f"`{rel[len(folder):]}`" not in rows[folder]:
                problems.append(f"{rel} is not named")
    for folder, cell in rows.items():
        if not folder.startswith(tuple(t + "/" for t in LAYOUT_ROOTS)):
            continue
        for name in re.findall(r"`([\w/]+\.py)`", cell):
            if folder + name not in modules and not (ROOT / name).exists():
                problems.append(f"{folder}{name} is named but is no module")
    return sorted(problems)


def test_the_layout_names_every_module():
    assert unnamed_modules((ROOT / "docs" / "architecture.md").read_text()) == []


def test_the_layout_check_finds_a_module_left_out_and_one_that_went():
    text = (ROOT / "docs" / "architecture.md").read_text()
    left_out = text.replace("`open_files.py` (the descriptor and mapping budget), ", "")
    assert left_out != text and unnamed_modules(left_out) == ["storage/open_files.py is not named"]
    gone = text.replace("`fallocate.py`,", "`fallocate.py`, `no_such_module.py`,")
    assert unnamed_modules(gone) == ["storage/no_such_module.py is named but is no module"]


def test_layout_rows_parse():
    rows = layout_rows(textwrap.dedent("""\
        ## Layout
        | path | holds |
        | `a/` | `x.py` |
        | `a/` | `y.py` |
        ## Next
        | `b/` | `z.py` |
        """))
    assert rows == {"a/": " `x.py` `y.py`"}
