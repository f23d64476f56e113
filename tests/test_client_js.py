"""The JavaScript client (clients/js): its own ``node --test`` suite (every vector bit for bit), its
spec parser and command against the Python reference, its ``submit()`` against a real ``localpriv
serve``, and the browser page driven headless by Playwright posting to that collector.

``make test`` installs Node.js (Debian's package, pinned) where it is missing and the client's
development packages (``npm ci`` from the committed lockfile); without ``node`` these tests skip with
that reason."""
from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.mechanisms.portable import PORTABLE_KEYS, PortableError, parse_portable
from localpriv.service import free_port, launch

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "clients" / "js"
NODE = shutil.which("node")
ADMIN = "test-admin-token-js-client-0123456789"

pytestmark = pytest.mark.skipif(NODE is None,
                                reason="Node.js is not installed: `make test` installs it (Debian's nodejs)")


def _node(*args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run([NODE, *args], cwd=JS, input=input, capture_output=True, text=True, timeout=timeout)


def test_node_test_suite_passes():
    """``node --test`` in clients/js: every vector of vectors-v1.json (streams, primitives, XXH64,
    mechanisms, memoized cases, negative cases), the primitives, the command and submit()."""
    files = sorted(str(p.relative_to(JS)) for p in (JS / "test").glob("*.test.js"))
    assert len(files) >= 4
    res = _node("--test", *files)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "# fail 0" in res.stdout and "# pass 0" not in res.stdout


SPECS: list[tuple[str, str | None]] = [
    ("ss(k=10,eps=1.0,omega=4)", None), ("hr(k=10,eps=0.5,blocks=1)", None),
    ("olh(k=10,eps=1.0,n_seeds=4294967296)", None), ("olh(k=10,eps=1.0,hash=xxh64)", None),
    ("sw(k=10,eps=1e-5)", None), ("krr(k=10,eps=+1e16)", None), ("geometric(k=10,eps=0.1,lo=-3,hi=+12)", None),
    ("rappor(k=10,keys=index)", None), ("planar-geometric(eps=1,nrows=2,ncols=3,k=6)", None),
    ("planar-laplace(eps=1,nrows=2,ncols=3,cell_km=2)", None), (" \tkrr ( k = 10 , eps = .5 ) \n", None),
    ("lblh(k=5,eps_perm=3,eps_1=1,n_seeds=7)", None), ("lolh(k=5,eps_perm=3.0,eps_1=2.9999999999)", None),
    ("pm(k=10,eps=57)", None), ("pm(k=10,eps=56)", None), ("hr(k=10,eps=1.0,blocks=32)", None),
    ("hr(k=10,eps=1.0,blocks=16)", None), ("rappor(k=10,m=4097)", None), ("rappor(k=10,h=33)", None),
    ("rappor(k=10,cohorts=65537)", None), ("rappor(k=10,f=1.0)", None), ("rappor(k=10,f=0,p=0,q=1)", None),
    ("planar-geometric(eps=1.0,nrows=1001,ncols=1000)", None),
    ("planar-laplace(eps=1.0,nrows=20001,ncols=1,cell_km=0.5)", None), ("geometric(k=10,eps=1.0,lo=3)", None),
    ("sw(k=10,eps=1.0,buckets=0)", None), ("ss(k=10,eps=1.0,omega=0)", None), ("krr(k=10,eps=1.0,)", None),
    ("krr()", None), ("krr(k=9223372036854775808,eps=1)", None), ("olh(k=10,eps=1.0,hash=XXH64)", None),
    ("krr(k=10,eps=1e-320)", None), ("lsue(k=4,eps_perm=2.0,eps_1=1.999999999)", None),
    ("planar-geometric(eps=2,nrows=3,ncols=3,cell_km=1e-10)", None), ("rappor(m=200,cohorts=300)", "a,b,c"),
    ("lolh(eps_perm=7.5,eps_1=0.25)", "0..999"), ("sw(eps=3.0,buckets=7)", "-3..3"),
    ("planar-laplace(eps=0.5,nrows=3,ncols=4)", "0..11"), ("planar-geometric(eps=0.5,nrows=3,ncols=4)", "0..10"),
    ("hr(eps=9.5)", "0..4999"), ("ss(eps=0.01)", "x,y,z"), ("duchi(eps=1e-3)", "0..1"), ("pm(eps=2.5)", "1..7"),
    ("losue(eps_perm=3,eps_1=2)", "0..40"), ("hr(eps=0.5)", "0..999999999"), ("hr(k=600000000,eps=0.5)", None),
    ("hr(k=1000000000,eps=9,blocks=1073741824)", None), ("sw(k=10,eps=1,buckets=1000000001)", None),
    ("sw(k=10,eps=1,buckets=1000000000)", None), ("geometric(k=10,eps=1,lo=0,hi=1000000000)", None),
    ("geometric(k=10,eps=1,lo=-5,hi=999999994)", None), ("oue(k=30,eps=1)", None), ("rappor(k=10,m=40)", None),
    ("krr(k=3,eps=1)", "a,b"), ("krr(eps=1", "a,b"), ("zz(k=2)", "a,a"),
]


def _compare_specs(specs: list[tuple[str, str | None]]) -> None:
    res = _node("scripts/canon.mjs", input=json.dumps(specs))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    want: list[list[Any]] = []
    for spec, domain in specs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # huge eps warns in Python; both accept it
                want.append([str(parse_portable(spec, domain)), None])
        except PortableError as exc:
            want.append([None, exc.code])
    for (spec, domain), g, w in zip(specs, got, want, strict=True):
        assert g == w, (spec, domain)


def test_spec_parser_agrees_with_the_python_reference():
    """The canonical spec or the error code of each spec: the same in JavaScript as in Python."""
    _compare_specs(SPECS)


@pytest.mark.parametrize("spec,domain,values,extra", [
    ("olh(eps=2.0)", "0..99", "37\n42\n0\n", []),
    ("pm(eps=1.0)", "0..9", "3\r\n3\n1\n9\n", ["--group"]),
    ("rappor(m=128,cohorts=4)", "a,b,c", "a\nc\n", []),
])
def test_command_output_is_byte_for_byte_the_python_command(tmp_path, spec, domain, values, extra):
    from typer.testing import CliRunner

    from localpriv.cli.main import app
    py_memo, js_memo = tmp_path / "py.json", tmp_path / "js.json"
    res_py = CliRunner().invoke(app, ["client", spec, "-d", domain, "--seed", "same", "--memo", str(py_memo), *extra],
                                input=values)
    assert res_py.exit_code == 0, res_py.output
    res_js = _node("bin/localpriv-client.js", spec, "-d", domain, "--seed", "same", "--memo", str(js_memo), *extra,
                   input=values)
    assert res_js.returncode == 0, res_js.stderr
    assert res_js.stdout == res_py.stdout
    assert py_memo.exists() == js_memo.exists()
    if py_memo.exists():
        assert js_memo.read_bytes() == py_memo.read_bytes()


@pytest.fixture(scope="module")
def collector(tmp_path_factory):
    """One ``localpriv serve`` on loopback for the module (SQLite in a temporary folder)."""
    where = tmp_path_factory.mktemp("collector")
    port = free_port()
    proc = launch(str(where / "collector.sqlite"), port, where / "server.log", ADMIN)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()  # nothing to keep: the store is thrown away
        proc.wait()


def _collection(url: str, name: str, domain: str, mechanisms: list[str]) -> dict[str, Any]:
    r = httpx.post(f"{url}/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30, json={
        "name": name, "domain": domain, "policy": {"mechanisms": mechanisms, "max_eps": 8}})
    assert r.status_code == 201, r.text
    return r.json()


def _ingest(url: str, name: str, token: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/collections/{name}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["ingest"]


SUBMIT = """
import { perturbValues, postBatch, submit } from './src/index.js';
const [url, collection, token, spec, domain, n] = process.argv.slice(1);
const values = Array.from({ length: Number(n) }, (_, i) => String(i % 7));
const res = await submit({ url, collection, token, spec, domain, values, batchSize: 40 });
// a batch posted twice with one id (as a retry after a lost answer does) is counted once
const run = perturbValues(spec, domain, ['1', '2', '3']);
const group = { mechanism: run.mechanism.canonical, reports: run.reports };
res.again = [];
for (let i = 0; i < 2; i++) {
  const answer = await postBatch({ url, collection, token, groups: group, batchId: `js-${collection}-1` });
  res.again.push(answer.status);
}
process.stdout.write(JSON.stringify(res) + '\\n');
"""


def test_submit_posts_every_report_kind_to_a_real_collector(collector):
    """Index reports beyond 2^53 (olh), hex bit vectors (oue), floats (pm) and memoized reports
    (lgrr), drawn from the CSPRNG and posted by submit(): the collector counts each report once,
    and a batch posted again under its id is a duplicate, not counted twice."""
    kinds = [("big", "olh(eps=3.0)"), ("bits", "oue(eps=1.0)"), ("floats", "pm(eps=1.0)"),
             ("memo", "lgrr(eps_perm=2.0,eps_1=1.0)")]
    for name, spec in kinds:
        info = _collection(collector, name, "0..6", [spec.split("(")[0]])
        res = _node("--input-type=module", "-e", SUBMIT, collector, name, info["ingest_token"], spec, "0..6", "100")
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert (out["reports"], out["batches"], out["duplicates"]) == (100, 3, 0)
        assert out["again"] == ["accepted", "duplicate"]
        stats = _ingest(collector, name, info["analyst_token"])
        assert (stats["reports"], stats["batches"], stats["refused_reports"]) == (103, 4, 0), stats
        assert stats["duplicate_batches"] == 1


def test_browser_page_posts_to_the_collector(collector):
    """The test page in headless Chromium perturbs values with the browser's crypto.getRandomValues
    and posts them; the collector's counts equal what the page reports sending."""
    if not (JS / "node_modules" / "playwright-core").is_dir():
        pytest.fail("clients/js/node_modules is missing: run `make test` (npm ci in clients/js)")
    assert Path("/usr/bin/chromium").exists(), "chromium is missing: run `make browser`"
    info = _collection(collector, "web", "red,green,blue", ["oue"])
    res = _node("scripts/browser.mjs", collector, "web", info["ingest_token"], "oue(eps=1.0)", "red,green,blue", "250",
                "60", timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    page = json.loads(res.stdout.strip().splitlines()[-1])
    assert "error" not in page and "pageErrors" not in page, page
    assert page["crypto"] == "function"
    assert (page["sent"], page["batches"], page["duplicates"]) == (250, 5, 0)
    stats = _ingest(collector, "web", info["analyst_token"])
    assert (stats["reports"], stats["batches"], stats["refused_reports"]) == (page["sent"], page["batches"], 0), stats


def test_reports_on_new_seeds_agree_with_the_python_reference():
    """Every mechanism case of the vectors replayed on other seeds and inputs than the file's:
    the JavaScript reports, memos and word counts equal Python's (``perturb_lines``)."""
    from localpriv.mechanisms.portable import ChaCha20Source, perturb_lines

    doc = json.loads((ROOT / "clients" / "vectors" / "vectors-v1.json").read_text(encoding="utf-8"))
    cases = []
    for i, v in enumerate(doc["mechanisms"] + doc["memoized"]):
        values = [str(x) for x in v["values"]]
        cases.append({"spec": v["spec"], "domain": v["domain"], "seed": f"parity-{i}",
                      "values": (values[::-1] + values[: 5])})
    res = _node("scripts/replay.mjs", input=json.dumps(cases))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    for case, js in zip(cases, got, strict=True):
        source = ChaCha20Source(case["seed"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # large levels warn in Python; both draw the same
            run = perturb_lines(case["spec"], case["domain"], case["values"], source)
        assert js["reports"] == [json.dumps(r) for r in run.reports], case["spec"]
        assert js["memos"] == run.memos, case["spec"]
        assert js["words"] == source.used, case["spec"]


_KEYS = ["k", "eps", "n_seeds", "hash", "omega", "blocks", "lo", "hi", "buckets", "nrows", "ncols", "cell_km",
         "eps_perm", "eps_1", "m", "h", "cohorts", "f", "p", "q", "keys", "delta"]
_VALUES = ["1", "2", "3", "10", "0", "-1", "+5", "2.0", "0.5", ".5", "1e-3", "1e999", "30", "4294967296", "xxh64",
           "index", "two", "1.5e1", "64", "16", "7", "0.75", "60"]


@settings(max_examples=4, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(sorted(PORTABLE_KEYS) + ["laplace", "Krr"]),
                          st.lists(st.tuples(st.sampled_from(_KEYS), st.sampled_from(_VALUES)), max_size=4),
                          st.sampled_from([None, "0..9", "a,b,c", "1..64", "0..11", "9..0"]),
                          st.sampled_from(["", " ", "\t"])),
                min_size=40, max_size=40))
def test_random_specs_get_the_same_canonical_form_or_error_code(cases):
    """Specs assembled at random from names, keys and values: the JavaScript parser gives the same
    canonical spec or the same error code as the Python reference."""
    specs = [(f"{name}({','.join(f'{k}{sep}={sep}{v}' for k, v in args)})", domain)
             for name, args, domain, sep in cases]
    _compare_specs(specs)


@settings(max_examples=3, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.text(alphabet=" \t,.-+019ab\u00a0", max_size=12),
                          st.lists(st.text(alphabet=" \t.-+019ab\u00a0", max_size=5), max_size=4)),
                min_size=60, max_size=60))
def test_random_domains_and_values_read_as_in_python(cases):
    """Domain texts and input values assembled at random: the same size and indices, or the same
    error code (``domain.syntax``, ``value.out_of_domain``), in JavaScript as in Python."""
    from localpriv.mechanisms.portable import encode_value, portable_domain

    fixed = [("0..9", ["3", " 9 ", "+0", "-0", "10", "3.0", ""]), ("-2..2", ["-2", "2", "- 1"]),
             (" a , b ", [" b ", "a", "a b"]), ("a,b,a", []), ("0 .. 9", []), ("1..0", []),
             ("9007199254740992..9007199254740992", [])]
    cases = fixed + [(text, values) for text, values in cases]
    res = _node("scripts/domains.mjs", input=json.dumps(cases))
    assert res.returncode == 0, res.stderr
    for (text, values), js in zip(cases, json.loads(res.stdout), strict=True):
        try:
            dom = portable_domain(text)
        except PortableError as exc:
            assert js == {"error": exc.code}, text
            continue
        want = []
        for v in values:
            try:
                want.append(encode_value(dom, v))
            except PortableError as exc:
                want.append(exc.code)
        assert js == {"size": dom.size, "indices": want}, text
