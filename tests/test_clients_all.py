"""benchmarks/clients_all.py and its generated table in docs/clients.md (no benchmark is run)."""
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def report():
    return _load("bench_report_clients_all", BENCH / "report.py")


@pytest.fixture(scope="module")
def bench():
    return _load("bench_clients_all", BENCH / "clients_all.py")


def test_docs_table_is_the_rendering_of_the_committed_json(report):
    text = report.DOCS_CLIENTS.read_text()
    assert text == report.splice_clients_docs(text, report.clients_docs_block(BENCH)), \
        "the table of docs/clients.md is stale: run `python benchmarks/report.py`"


def test_committed_json_has_every_mechanism_and_client(bench):
    doc = json.loads((BENCH / "results-clients-all.json").read_text())
    assert [m["name"] for m in doc["mechanisms"]] == list(bench.SPECS)
    assert doc["clients"] == list(bench.CLIENTS)
    assert isinstance(doc["quick"], bool)
    for m in doc["mechanisms"]:
        assert set(m["clients"]) == set(bench.CLIENTS)
        assert m["vs_python_portable"]["python-portable"] in (1.0, None)


def test_every_mechanism_is_offered_by_the_js_and_java_benches(bench):
    js = (BENCH / "clients_js.mjs").read_text()
    java = (ROOT / "clients/java/bench/org/localpriv/client/Bench.java").read_text()
    for name in bench.SPECS:
        assert re.search(rf"'{re.escape(name)}\(", js), name
        assert re.search(rf'"{re.escape(name)}\(', java), name


def test_ratios_and_skipped_clients_render(report, tmp_path):
    one = {"median": 100.0, "min": 90.0, "max": 110.0, "n": 3}
    doc = {"clients": ["python-portable", "python-vectorized", "javascript", "java"], "rounds": 3, "n": 10,
           "n_vectorized": 100, "quick": True, "started": "2030-01-01T00:00:00Z",
           "mechanisms": [{"name": "krr", "spec": "krr(eps=1.0)", "canonical": "krr(k=100,eps=1.0)",
                           "bytes_per_report": 1.9,
                           "clients": {"python-portable": {"reports_per_cpu_s": one},
                                       "python-vectorized": {"reports_per_cpu_s": dict(one, median=400.0)},
                                       "javascript": {"reports_per_cpu_s": dict(one, median=200.0)},
                                       "java": {"skipped": "javac / java not found"}},
                           "vs_python_portable": {"python-portable": 1.0, "python-vectorized": 4.0,
                                                  "javascript": 2.0, "java": None},
                           "vs_python_vectorized": {"python-portable": 0.25, "python-vectorized": 1.0,
                                                    "javascript": 0.5, "java": None}}]}
    (tmp_path / "results-clients-all.json").write_text(json.dumps(doc))
    block = report.clients_docs_block(tmp_path)
    row = next(line for line in block.splitlines() if line.startswith("| `krr"))
    assert row.split(" | ")[1:] == ["100", "400", "200", "javac / java not found", "4x", "2x", "-", "0.500x", "-",
                                    "1.9 |"]
    assert "Quick smoke run" in block
    assert "Not measured" in report.clients_docs_block(tmp_path / "missing")
