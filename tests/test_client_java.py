"""The Java client (clients/java): compiled with plain javac, it replays every conformance vector,
its command agrees with the Python client command, and its submitter posts to a live collector and
retries the same batch on 5xx only."""
from __future__ import annotations

import http.server
import json
import os
import pathlib
import re
import shutil
import subprocess
import threading
import time
import warnings

import pytest

from localpriv.mechanisms.portable import (
    ChaCha20Source,
    PortableError,
    encode_value,
    parse_portable,
    perturb_lines,
    portable_domain,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
JAVA = ROOT / "clients" / "java"
VECTORS = ROOT / "clients" / "vectors" / "vectors-v1.json"
#: start-up flags: the client programs are short runs (no need for the optimizing compiler)
JVM = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss4m"]

pytestmark = pytest.mark.skipif(shutil.which("javac") is None or shutil.which("java") is None,
                                reason="javac is not installed (make java-client installs openjdk-17-jdk-headless)")


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("java-build")
    sources = sorted(str(p) for p in (JAVA / "src").rglob("*.java")) + \
        sorted(str(p) for p in (JAVA / "test").rglob("*.java"))
    res = subprocess.run(["javac", "--release", "17", "-Xlint:all", "-Werror", "-d", str(out), *sources],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def _java(build, cls, *args, stdin="", env=None, timeout=60):
    return subprocess.run(["java", *JVM, "-cp", str(build), f"org.localpriv.client.{cls}", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_java_client_replays_every_vector(build):
    """Every primitive, mechanism, memo and negative vector, word counts included, and the command
    on each case (in process)."""
    res = _java(build, "VectorsTest", str(VECTORS))
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    m = re.search(r"^(\d+) passed, 0 failed$", res.stdout, flags=re.M)
    assert m and int(m.group(1)) > 500, res.stdout[-2000:]


def test_java_core_compiles_against_the_java_8_api(tmp_path):
    """The samplers, parser, sources and JSON (everything but the desktop command and the
    java.net.http submitter) use only the Java 8 API, the one Android's library follows; the
    Android snippet of docs/clients.md compiles against them."""
    desktop = {"Main.java", "Submit.java", "Submitter.java"}
    core = sorted(str(p) for p in (JAVA / "src").rglob("*.java") if p.name not in desktop)
    # the Android snippet of docs/clients.md compiles with them
    snippet = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8").split("```java\n")[1].split("```")[0]
    (tmp_path / "AgeReporter.java").write_text(snippet, encoding="utf-8")
    res = subprocess.run(["javac", "--release", "8", "-Xlint:-options", "-d", str(tmp_path / "out"), *core,
                          str(tmp_path / "AgeReporter.java")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_java_command_is_the_python_command(build, tmp_path):
    """Same spec, domain, seed and lines: the same group as Python; memos written by Java are read
    by Python (and the reverse) and give the same longitudinal reports."""
    lines = ["b", "c", "a", "b"]
    text = "".join(f"{v}\n" for v in lines)
    res = _java(build, "Main", "ss(eps=1.5)", "-d", "a,b,c,d,e", "--seed", "cmd-1", "--group", stdin=text)
    assert res.returncode == 0, res.stderr
    run = perturb_lines("ss(eps=1.5)", "a,b,c,d,e", lines, ChaCha20Source("cmd-1"))
    assert res.stdout == json.dumps({"mechanism": str(run.mechanism), "reports": run.reports}) + "\n"

    memo = tmp_path / "memos.json"
    spec, dom = "lolh(eps_perm=3.0,eps_1=1.0)", "0..99"
    assert _java(build, "Main", spec, "-d", dom, "--memo", str(memo), stdin="7\n42\n").returncode == 0
    memos = json.loads(memo.read_text())["memos"]
    assert [m["index"] for m in memos] == [7, 42]
    res = _java(build, "Main", spec, "-d", dom, "--memo", str(memo), "--seed", "cmd-2", stdin="42\n7\n42\n")
    assert res.returncode == 0, res.stderr
    again = perturb_lines(spec, dom, ["42", "7", "42"], ChaCha20Source("cmd-2"), memos)
    assert res.stdout.splitlines() == [json.dumps(r) for r in again.reports]
    assert json.loads(memo.read_text())["memos"] == memos  # no new value: no new memo
    # and the reverse: memos drawn by Python, reports drawn by Java
    py_memos = perturb_lines("rappor(m=16)", "a,b,c", ["c"], ChaCha20Source("cmd-3")).memos
    memo.write_text(json.dumps({"memos": py_memos}) + "\n", encoding="utf-8")
    res = _java(build, "Main", "rappor(m=16)", "-d", "a,b,c", "--memo", str(memo), "--seed", "cmd-4", stdin="c\nc\n")
    assert res.returncode == 0, res.stderr
    again = perturb_lines("rappor(m=16)", "a,b,c", ["c", "c"], ChaCha20Source("cmd-4"), py_memos)
    assert res.stdout.splitlines() == [json.dumps(r) for r in again.reports]


_NAMES = ["krr", "oue", "sue", "olh", "blh", "ss", "hr", "geometric", "duchi", "pm", "sw", "planar-geometric",
          "planar-laplace", "lgrr", "lsue", "loue", "lsoue", "losue", "lblh", "lolh", "rappor", "laplace", "Krr"]
_KEYS = ["k", "eps", "n_seeds", "hash", "omega", "blocks", "lo", "hi", "buckets", "nrows", "ncols", "cell_km",
         "eps_perm", "eps_1", "m", "h", "cohorts", "f", "p", "q", "keys", "delta"]
_VALUES = ["0", "1", "2", "3", "10", "-1", "+4", "1.0", "0.5", "1e-3", "2.5e2", ".5", "5.", "1e400", "xxh64", "cw",
           "index", "4294967297", "9223372036854775808", "1e-320", "57", "'2'", "(1)"]
_DOMAINS = ["0..9", "1..100", "a,b,c", "-5..5", "0..0", "+1..+3", " x , y ", "0..19", "a,,b", "9..0", "0 .. 9", None]
_ALPHABET = "(),= \t.+-eE0123456789abkxz_"


def _spec_cases(rng, n):
    """Spec strings around the vectors' specs: mutated characters, random keys and values, domains."""
    doc = json.loads(VECTORS.read_text(encoding="utf-8"))
    base = [(c["spec"], c["domain"]) for c in doc["mechanisms"] + doc["memoized"] + doc["negative"]]
    cases = []
    for _ in range(n):
        r = rng.random()
        spec, domain = rng.choice(base)
        if rng.random() < 0.5:
            domain = rng.choice(_DOMAINS)
        if r < 0.4:
            pass  # the vector's spec as it is
        elif r < 0.65:
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(spec) + 1)
                spec = spec[:i] + rng.choice(_ALPHABET) + spec[i + rng.randint(0, 1):]
        else:
            args = [f"{rng.choice(_KEYS)}={rng.choice(_VALUES)}" for _ in range(rng.randint(0, 3))]
            if rng.random() < 0.6:
                args.insert(0, rng.choice(["eps=1.0", "eps_perm=2.0,eps_1=1.0", "eps=0.5,nrows=2,ncols=5"]))
            spec = f"{rng.choice(_NAMES)}({','.join(args)})"
        value = rng.choice([None, "0", "3", "a", " b ", "10", "-1", "1.5", ""]) if domain else None
        cases.append({"spec": spec, "domain": domain, "value": value})
    return cases


def _python_answer(case: dict) -> dict[str, object]:
    try:
        dom = portable_domain(case["domain"]) if case["domain"] is not None else None
        mech = parse_portable(case["spec"], dom)
        out: dict[str, object] = {"error": None, "canonical": str(mech)}
        if case["value"] is not None:
            assert dom is not None  # a value comes with a domain
            out["index"] = encode_value(dom, case["value"])
        return out
    except PortableError as exc:
        return {"error": exc.code}


def test_java_parser_agrees_with_python_on_random_specs(build):
    """Spec strings, domains and values around the vectors': Java and Python refuse with the same
    code or accept with the same canonical spec and index."""
    import random
    cases = _spec_cases(random.Random(39), 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # large-eps warnings of the accepted specs
        expected = [_python_answer(c) for c in cases]
    res = _java(build, "SpecProbe", stdin="".join(json.dumps(c) + "\n" for c in cases))
    assert res.returncode == 0, res.stderr
    got = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(got) == len(cases)
    bad = [(c, e, g) for c, e, g in zip(cases, expected, got) if e != g]
    assert not bad, bad[:5]
    assert sum(e["error"] is None for e in expected) > 20  # accepted specs are compared too


def test_java_replays_every_vector_case_on_other_seeds_as_python(build):
    """Every mechanism and memoized case of the vectors, on two seeds the file does not hold: the
    same reports (JSON text), memos and word counts as the Python reference."""
    doc = json.loads(VECTORS.read_text(encoding="utf-8"))
    cases = [{"spec": c["spec"], "domain": c["domain"], "seed": f"{c['seed']}-java-{i}",
              "values": [str(v) for v in c["values"]] * (c.get("rounds", 1))}
             for c in doc["mechanisms"] + doc["memoized"] for i in range(2)]
    res = _java(build, "ReplayProbe", stdin="".join(json.dumps(c) + "\n" for c in cases))
    assert res.returncode == 0, res.stderr
    got = res.stdout.splitlines()
    assert len(got) == len(cases)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # large-eps warnings
        for case, line in zip(cases, got):
            source = ChaCha20Source(case["seed"])
            run = perturb_lines(case["spec"], case["domain"], case["values"], source)
            # byte for byte: the reports' JSON text (floats as Python's repr), memos, word count
            assert line == json.dumps({"reports": run.reports, "memos": run.memos, "words": source.used}), case


def test_java_command_refuses_in_one_line(build, tmp_path):
    out = tmp_path / "reports.jsonl"
    for args, stdin, code in ((["krr eps=1.0", "-d", "0..9"], "3\n", "error: spec.syntax: "),
                              (["krr(eps=1.0)", "-d", "0..9", "-o", str(out)], "3\n10\n",
                               "error: value.out_of_domain: line 2: "),
                              (["lgrr(eps_perm=1.0,eps_1=2.0)", "-d", "a,b"], "a\n", "error: spec.bad_value: ")):
        res = _java(build, "Main", *args, stdin=stdin)
        assert res.returncode == 1 and res.stdout == "", res.stdout
        assert res.stderr.startswith(code) and len(res.stderr.splitlines()) == 1, res.stderr
    assert not out.exists()


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers POSTs with the statuses of ``script`` in turn and records each body."""

    script: list[int] = []
    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802 - the stdlib's handler name
        type(self).bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        status = type(self).script.pop(0)
        body = json.dumps({"status": "accepted", "reports": 2, "counts_version": 1} if status == 200
                          else {"error": f"scripted {status}"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_java_submit_retries_the_same_batch_on_5xx_only(build):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    env = {**os.environ, "LOCALPRIV_TOKEN": "tok"}
    group = json.dumps({"mechanism": "krr(k=10,eps=1.0)", "reports": [3, 7]})
    try:
        _Scripted.script, _Scripted.bodies = [503, 502, 200], []
        res = _java(build, "Submit", url, "ages", "--backoff-ms", "10", stdin=group, env=env)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["status"] == "accepted"
        assert len(_Scripted.bodies) == 3 and len(set(_Scripted.bodies)) == 1  # one batch id for every retry
        sent = json.loads(_Scripted.bodies[0])
        assert re.fullmatch(r"[0-9a-f]{32}", sent["batch_id"])
        assert sent["groups"] == [json.loads(group)]
        _Scripted.script, _Scripted.bodies = [422], []
        res = _java(build, "Submit", url, "ages", "--backoff-ms", "10", stdin=group, env=env)
        assert res.returncode == 1 and len(_Scripted.bodies) == 1  # a refusal is not retried
        assert res.stderr.startswith("error: server refused (422): scripted 422")
    finally:
        server.shutdown()
        server.server_close()


def test_java_reports_are_accepted_by_a_live_collector(build, tmp_path):
    """Java's reports of three mechanisms (index, bit vector, float), posted by Java to a real
    collector on loopback: accepted and counted."""
    import httpx
    import uvicorn

    from localpriv.service import free_port
    from localpriv.service.app import ServerLimits, create_app, server_config
    from localpriv.service.core import Collector
    from localpriv.service.storage import open_store
    admin = "test-admin-token-0123456789"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collector = Collector(open_store(str(tmp_path / "c.sqlite")), admin)
    port = free_port()
    server = uvicorn.Server(server_config(create_app(collector, 1 << 20), "127.0.0.1", port, ServerLimits()))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    url = f"http://127.0.0.1:{port}"
    try:
        r = httpx.post(f"{url}/v1/collections", headers={"Authorization": f"Bearer {admin}"},
                       json={"name": "ages", "domain": "0..9",
                             "policy": {"mechanisms": ["krr", "oue", "pm"], "max_eps": 2.0}})
        assert r.status_code == 201, r.text
        env = {**os.environ, "LOCALPRIV_TOKEN": r.json()["ingest_token"]}
        total = 0
        for spec in ("krr(eps=1.0)", "oue(eps=1.0)", "pm(eps=1.0)"):
            res = _java(build, "Main", spec, "-d", "0..9", "--group", stdin="0\n3\n9\n")
            assert res.returncode == 0, res.stderr
            sub = _java(build, "Submit", url, "ages", stdin=res.stdout, env=env)
            assert sub.returncode == 0, sub.stderr
            assert json.loads(sub.stdout)["status"] == "accepted"
            total += 3
        info = httpx.get(f"{url}/v1/collections/ages", headers={"Authorization": f"Bearer {admin}"}).json()
        assert info["ingest"]["reports"] == total and info["ingest"]["batches"] == 3, info
    finally:
        server.should_exit = True
        thread.join(10)
