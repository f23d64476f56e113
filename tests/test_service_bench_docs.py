"""The tables of docs/service.md (mixed load), decision 0065 (ingest profile), decision 0075
(interleaved ingest) and decision 0082 (JSON and binary bodies) are the rendering of the committed
benchmark JSON, and every section of that JSON's report renders."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def _load(name):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod


@pytest.mark.parametrize("script, result, doc", [
    ("service_mixed", "results-service-mixed.json", "docs/service.md"),
    ("service_ingest_profile", "results-service-ingest-profile.json",
     "docs/decisions/0065-ingest-cpu-against-a-sqlite-floor.md")])
def test_docs_tables_are_the_rendering_of_the_committed_json(script, result, doc):
    mod = _load(script)
    block = mod.docs_block(json.loads((BENCH / result).read_text()))
    assert block in (ROOT / doc).read_text(), f"{doc} is stale: run `python benchmarks/{script}.py --docs-only`"


def test_decision_0075_table_is_the_rendering_of_the_committed_json():
    mod = _load("service_ingest_profile")
    block = mod.interleaved_block(json.loads((BENCH / "results-service-ingest-interleaved.json").read_text()))
    doc = ROOT / "docs/decisions/0075-ingest-without-the-routing-layers.md"
    assert block in doc.read_text(), "decision 0075 is stale: run `python benchmarks/service_ingest_profile.py " \
        "--interleave BASE_SRC --docs-only`"


def test_decision_0082_table_is_the_rendering_of_the_committed_json():
    mod = _load("service_ingest_profile")
    block = mod.bodies_block(json.loads((BENCH / "results-service-ingest-bodies.json").read_text()))
    doc = ROOT / "docs/decisions/0082-binary-batches-and-httptools.md"
    assert block in doc.read_text(), "decision 0082 is stale: run `python benchmarks/service_ingest_profile.py " \
        "--bodies BASE_SRC --docs-only`"
