"""``localpriv query`` on the reports of RRBA's adaptive blocks (thesis, seed 004 section 4.4, second
version): each block's reports carry their own fake table, ``rrba(p=..,table=[..])``, and the
query's joint is the maximum-likelihood table of all blocks together (the one EM engine), the
estimate :func:`localpriv.multiattr.block_aggregation.pooled_estimate` computes from a block run."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.multiattr.block_aggregation import BlockRun, pooled_estimate


def test_query_answers_marginals_from_adaptive_rrba_blocks(tmp_path):
    rng = np.random.default_rng(7)
    dom = "product(a=0..2;b=x,y)"
    a, b = rng.choice(3, 3000, p=[0.5, 0.2, 0.3]), rng.choice(["x", "y"], 3000)
    tables = ([1 / 6] * 6, [0.35, 0.15, 0.1, 0.1, 0.15, 0.15])  # block 2's table: what block 1 estimated
    files, run = [], BlockRun(p=0.5, block_size=1500)
    for k, table in enumerate(tables):
        people = tmp_path / f"p{k}.csv"
        rows = slice(1500 * k, 1500 * (k + 1))
        people.write_text("a,b\n" + "".join(f"{u},{v}\n" for u, v in zip(a[rows], b[rows])))
        out = tmp_path / f"r{k}.parquet"
        spec = f"rrba(p=0.5,table=[{','.join(repr(t) for t in table)}])"
        res = CliRunner().invoke(app, ["perturb", str(people), "-o", str(out), "--domain", dom, "--columns", "a,b",
                                       "--mechanism", spec, "--seed", str(k + 1)])
        assert res.exit_code == 0, res.output
        files.append(str(out))
        run.sent.append(np.asarray(table) / np.sum(table))
        run.counts.append(np.bincount(pd.read_parquet(out)["report"], minlength=6).astype(float))
    answers = tmp_path / "a.json"
    res = CliRunner().invoke(app, ["query", *files, "--domain", dom, "--marginal", "a,b", "--out", str(answers)])
    assert res.exit_code == 0, res.output
    rows = json.loads(answers.read_text())["marginals"]["a,b"]
    got = np.array([r["probability"] for r in rows])
    assert all(r["lower"] <= r["probability"] <= r["upper"] for r in rows)
    # both maximize the same likelihood; they differ by the engines' stopping tolerances only
    want = pooled_estimate(run, accelerate="newton", stop="gap")
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert got.sum() == pytest.approx(1.0)
