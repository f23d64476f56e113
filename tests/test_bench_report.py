"""benchmarks/RESULTS.md is the rendering of the committed benchmark JSON."""
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("bench_report", BENCH / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_results_md_is_the_rendering_of_the_committed_json(report):
    assert (BENCH / "RESULTS.md").read_text() == report.render(BENCH), \
        "benchmarks/RESULTS.md is stale: run `make bench-report`"


def test_every_section_of_an_empty_directory_says_not_measured(report, tmp_path):
    text = report.render(tmp_path)
    for name, title, _ in report.SECTIONS:
        part = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
        assert part.strip().startswith("Not measured"), name
    assert "Source:" not in text


def test_partial_and_malformed_json_is_reported_not_guessed(report, tmp_path):
    # a results.json holding one section with half its keys, one failed run, and a broken file
    doc = {"machine": {"cpu": "Test CPU", "cores": 2}, "started": "2030-01-01T00:00:00Z",
           "results": {"gibu": {"iterations": 7},
                       "planar": {"error": "Traceback ...\nRuntimeError: boom", "wall_seconds": 1.0},
                       "ibu": {"rows": [{"mechanism": "krr", "k": 10, "contenders": "garbage"}]}}}
    (tmp_path / "results.json").write_text(json.dumps(doc))
    (tmp_path / "results-service.json").write_text("{not json")
    text = report.render(tmp_path)
    assert "Test CPU" in text and "2030-01-01T00:00:00Z" in text
    gibu = text.split("## GIBU", 1)[1].split("\n## ", 1)[0]
    assert "| - | - | not measured | - | 7 |" in gibu
    assert "RuntimeError: boom" in text
    assert "unexpected shape" in text.split("## IBU", 1)[1].split("\n## ", 1)[0]
    service = text.split("## Collector service", 1)[1].split("\n## ", 1)[0]
    assert "`benchmarks/results-service.json` is not valid JSON" in service
    assert "Not measured" in text.split("## Heavy hitters", 1)[1]


def test_the_later_run_of_a_section_wins(report, tmp_path):
    for name in ("results.json", "results-memory.json"):
        shutil.copy(BENCH / "results-memory.json", tmp_path / name)
    def stamp(name, when):  # the run's date, at the top and on the section (which is read first)
        doc = json.loads((tmp_path / name).read_text())
        doc["finished"] = when
        if isinstance(doc.get("results", {}).get("memory"), dict):
            doc["results"]["memory"]["finished"] = when
        (tmp_path / name).write_text(json.dumps(doc))

    stamp("results.json", "2031-01-01T00:00:00Z")
    assert report.sources(tmp_path)["memory"]["file"] == "results.json"
    stamp("results-memory.json", "2032-01-01T00:00:00Z")
    assert report.sources(tmp_path)["memory"]["file"] == "results-memory.json"


def test_check_mode_detects_a_stale_file(report, tmp_path):
    out = tmp_path / "RESULTS.md"
    out.write_text("stale\n")
    assert report.main(["--dir", str(tmp_path), "--out", str(out), "--check"]) == 1
    assert report.main(["--dir", str(tmp_path), "--out", str(out)]) == 0
    assert report.main(["--dir", str(tmp_path), "--out", str(out), "--check"]) == 0


def test_rappor_accuracy_section_renders_arms_pairs_and_sign_tests(report, tmp_path):
    # benchmarks/rappor.py --accuracy-only's format (version 1): a run cut short says so, every paired
    # comparison shows better / equal / worse with its sign-test p-value, and no time is rendered
    spread = lambda v: {"median": v, "mean": v, "min": v, "max": v}  # noqa: E731
    arm = lambda mse, p10: {"mse": spread(mse), "precision_at_10": spread(p10),  # noqa: E731
                            "precision_at_50": spread(0.5)}
    cmp_ = lambda b, e, w, p: {"better": b, "equal": e, "worse": w, "sign_test_p": p}  # noqa: E731
    doc = {"benchmark": "rappor-accuracy", "version": 1, "date": "2031-02-03T04:05:06Z", "complete": False,
           "rounds": 7, "rounds_requested": 60, "stopped": "deadline", "seeds": "0..6", "n": 1000, "m": 128,
           "h": 2, "cohorts": 8, "timing": "not measured",
           "cells": {"f=0.5": {"accuracy": {"A": arm(4.2e-6, 0.8), "B": arm(5.0e-6, 0.75)},
                               "paired": [{"arm": "A", "against": "B", "mse": cmp_(7, 0, 0, 0.015625),
                                           "precision_at_10": cmp_(2, 4, 1, 1.0),
                                           "precision_at_50": cmp_(3, 1, 3, 1.0)}]}}}
    (tmp_path / "results-rappor-accuracy.json").write_text(json.dumps(doc))
    text = report.render(tmp_path)
    part = text.split("## RAPPOR accuracy", 1)[1].split("\n## ", 1)[0]
    assert "2031-02-03T04:05:06Z" in part and "7 round(s)" in part
    assert "**Incomplete run**: 7 of 60 rounds (deadline)" in part
    assert "| f=0.5 | A | 4.20e-06 | 0.800 | 0.500 |" in part
    assert "| f=0.5 | A | B | 7 / 0 / 0 (p = 0.016) | 2 / 4 / 1 (p = 1) | 3 / 1 / 3 (p = 1) |" in part
    assert "Timing: not measured" in part
    assert "## Other benchmark files" not in text  # the file has its section, it is not an unknown one


def test_committed_rappor_accuracy_json_renders(report):
    part = report.render(BENCH).split("## RAPPOR accuracy", 1)[1].split("\n## ", 1)[0]
    assert "Not measured" not in part and "Not rendered" not in part
    assert "| f=0.5 | ours ridge | pure-LDP, PRR as specified |" in part
    assert "| f=0.25 | ours em-exact (MLE) | pure-LDP's decoder on our reports |" in part
