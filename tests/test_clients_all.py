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


def test_js_and_java_rows_are_matched_to_the_set_by_name(bench):
    js = {"mechanisms": [{"spec": "krr(k=100,eps=1.0)", "canonical": "krr(k=100,eps=1.0)", "reports_per_s_cpu": 5.0,
                          "bytes_per_report": 2.9},
                         {"spec": "sue(k=100,eps=1.0)", "canonical": "sue(k=100,eps=1.0)", "reports_per_s_cpu": 1.0}]}
    java = {"mechanisms": [{"spec": "planar-geometric(eps=1.0,nrows=10,ncols=10,cell_km=1.0)",
                            "canonical": "planar-geometric(eps=1.0,nrows=10,ncols=10,cell_km=1.0)",
                            "reports_per_cpu_second": {"median": 7.0, "min": 7.0, "max": 7.0},
                            "bytes_per_report": 1.8},
                           {"spec": "planar-laplace(eps=1.0)", "canonical": "planar-laplace(eps=1.0)",
                            "reports_per_cpu_second": {"median": 1.0}}]}
    assert bench.js_rows(js) == {"krr": {"reports_per_cpu_s": 5.0, "bytes_per_report": 2.9,
                                         "canonical": "krr(k=100,eps=1.0)"}}
    assert list(bench.java_rows(java)) == ["planar-geometric"]
    assert bench.java_rows(java)["planar-geometric"]["reports_per_cpu_s"] == 7.0


def test_python_children_cover_the_set(bench):
    portable = bench._child_portable(3)
    vectorized = bench._child_vectorized(3)
    assert list(portable) == list(vectorized) == list(bench.SPECS)
    for name, row in portable.items():
        assert row["canonical"] == vectorized[name]["canonical"]
        assert row["canonical"].split("(")[0] == name
        assert row["bytes_per_report"] >= 1 and row["cpu_s"] >= 0


@pytest.mark.parametrize("argv", [["--quik"], ["--rounds"], ["--n", "5", "--bogus", "1"]])
def test_unknown_or_incomplete_options_are_refused(bench, argv):
    with pytest.raises(SystemExit, match="^error: "):
        bench._check_args(argv)
