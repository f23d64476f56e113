"""The black-box privacy audit (localpriv.analysis.audit, ``localpriv audit``).

Correct clients (the portable protocol in process, seeded ChaCha20 streams) never get a lower bound
above their computed level, at a small and a large level of every portable mechanism; each
deliberately broken client of tests/audit_clients.py is flagged; the JavaScript and Java clients
are audited through their commands (the memoized mechanisms with simulated devices,
``--reports-per-device``). Trial counts are small; ``make audit`` runs larger ones.
"""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from audit_clients import run_variant
from typer.testing import CliRunner

from localpriv.analysis.audit import (
    MAX_TRIALS,
    audit,
    channel_event_probability,
    claimed_level,
    clopper_pearson,
    command_runner,
    default_pair,
    detectable_excess,
    runner_of,
)
from localpriv.cli.main import app
from localpriv.mechanisms.portable import PORTABLE_MEMOIZED, PORTABLE_SAMPLERS, ChaCha20Source, parse_portable
from localpriv.utils.validation import LocalPrivError

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ROOT / "tests" / "audit_clients.py"

#: every portable mechanism at a small and a large level (small spaces, few hash seeds, so that
#: events repeat at these trial counts)
SPECS = {
    "krr": ("krr(k=4,eps=0.5)", "krr(k=4,eps=4.0)"),
    "oue": ("oue(k=3,eps=0.5)", "oue(k=3,eps=4.0)"),
    "sue": ("sue(k=3,eps=0.5)", "sue(k=3,eps=4.0)"),
    "olh": ("olh(k=4,eps=0.5,n_seeds=4)", "olh(k=4,eps=4.0,n_seeds=4)"),
    "blh": ("blh(k=4,eps=0.5,n_seeds=4)", "blh(k=4,eps=4.0,n_seeds=4)"),
    "ss": ("ss(k=4,eps=0.5)", "ss(k=4,eps=4.0)"),
    "hr": ("hr(k=4,eps=0.5)", "hr(k=4,eps=4.0)"),
    "geometric": ("geometric(k=4,eps=0.5,lo=-2,hi=5)", "geometric(k=4,eps=4.0)"),
    "duchi": ("duchi(k=4,eps=0.5)", "duchi(k=4,eps=4.0)"),
    "pm": ("pm(k=3,eps=0.5)", "pm(k=3,eps=4.0)"),
    "sw": ("sw(k=4,eps=0.5)", "sw(k=4,eps=4.0)"),
    "planar-geometric": ("planar-geometric(eps=0.5,nrows=2,ncols=2)", "planar-geometric(eps=4.0,nrows=2,ncols=2)"),
    "planar-laplace": ("planar-laplace(eps=0.5,nrows=2,ncols=2)", "planar-laplace(eps=4.0,nrows=2,ncols=2)"),
    "lgrr": ("lgrr(k=3,eps_perm=1.0,eps_1=0.5)", "lgrr(k=3,eps_perm=4.0,eps_1=2.0)"),
    "lsue": ("lsue(k=3,eps_perm=1.0,eps_1=0.5)", "lsue(k=3,eps_perm=4.0,eps_1=2.0)"),
    "loue": ("loue(k=3,eps_perm=1.0,eps_1=0.5)", "loue(k=3,eps_perm=4.0,eps_1=2.0)"),
    "lsoue": ("lsoue(k=3,eps_perm=1.0,eps_1=0.5)", "lsoue(k=3,eps_perm=4.0,eps_1=2.0)"),
    "losue": ("losue(k=3,eps_perm=1.0,eps_1=0.5)", "losue(k=3,eps_perm=4.0,eps_1=2.0)"),
    "lblh": ("lblh(k=3,eps_perm=1.0,eps_1=0.5,n_seeds=2)", "lblh(k=3,eps_perm=4.0,eps_1=2.0,n_seeds=2)"),
    "lolh": ("lolh(k=3,eps_perm=1.0,eps_1=0.5,n_seeds=2)", "lolh(k=3,eps_perm=4.0,eps_1=2.0,n_seeds=2)"),
    "rappor": ("rappor(k=3,m=4,h=1,cohorts=2)", "rappor(k=3,m=4,h=1,cohorts=2,f=0.05,p=0.1,q=0.9)"),
}


def _in_process(variant, spec, seed):
    mech = parse_portable(spec)
    src = ChaCha20Source(seed)
    domain = f"0..{mech.k - 1}"
    return mech, runner_of(lambda lines: run_variant(variant, spec, domain, lines, src))


def test_every_portable_mechanism_is_listed():
    assert set(SPECS) == set(PORTABLE_SAMPLERS) | set(PORTABLE_MEMOIZED)


@pytest.mark.filterwarnings("ignore::localpriv.mechanisms.base.LargeEpsilonWarning")
@pytest.mark.parametrize("spec", [s for pair in SPECS.values() for s in pair])
def test_correct_client_never_exceeds_its_level(spec):
    mech, run = _in_process("correct", spec, f"audit-{spec}")
    memo = mech.spec_name in PORTABLE_MEMOIZED
    res = audit(mech, run, trials=100 if memo else 400, confidence=0.999)
    assert res.claimed == pytest.approx(claimed_level(mech))
    assert res.lower_bound <= res.claimed
    assert not res.flagged
    assert res.counts["selection"] + res.counts["test"] == res.trials


def test_biased_krr_is_flagged():
    mech, run = _in_process("biased-krr", "krr(k=2,eps=1.0)", "biased")
    res = audit(mech, run, trials=2000, confidence=0.99)
    # delivered: ln((1+p)/(1-p)) = 1.86 for p = e/(1+e)
    assert res.flagged and res.lower_bound > res.claimed == pytest.approx(1.0)


@pytest.mark.parametrize("spec", ["pm(k=4,eps=1.0)", "pm(k=2,eps=4.0)"])
def test_float_pm_is_flagged_by_its_low_bits(spec):
    mech, run = _in_process("float-pm", spec, "float-pm")
    res = audit(mech, run, trials=1000, confidence=0.99)
    assert res.flagged
    assert res.view in ("low-bits", "grid-offset", "exact")
    # the same reports rounded to the nearest grid point would pass: the leak is in the low bits
    assert res.counts["event_x_prime"] == 0


def test_missing_permanent_randomization_is_flagged_over_repeated_reports():
    spec = "lgrr(k=2,eps_perm=1.0,eps_1=0.9)"
    mech, run = _in_process("no-memo", spec, "no-memo")
    res = audit(mech, run, trials=160, rounds=32, confidence=0.99)
    assert res.device_mode and res.flagged
    assert res.claimed == pytest.approx(claimed_level(mech, 32)) and res.claimed <= 1.0 + 1e-12
    mech, run = _in_process("correct", spec, "memo")
    res = audit(mech, run, trials=160, rounds=32, confidence=0.99)
    assert not res.flagged


def test_clopper_pearson_covers_at_the_stated_level():
    # exact coverage: P(p_low(X) > p) <= alpha for X ~ Bin(n, p), summed over the support
    from scipy import stats
    n, alpha = 50, 0.05
    xs = np.arange(n + 1)
    low = clopper_pearson(xs, n, alpha, upper=False)
    up = clopper_pearson(xs, n, alpha, upper=True)
    for p in (0.01, 0.2, 0.5, 0.93):
        pmf = stats.binom.pmf(xs, n, p)
        assert pmf[low > p].sum() <= alpha
        assert pmf[up < p].sum() <= alpha
    assert low[0] == 0.0 and up[n] == 1.0


def test_detectable_excess_shrinks_with_trials_and_is_inf_without_events():
    big = detectable_excess(0.5, 400, 1.0, 0.95)
    small = detectable_excess(0.5, 4000, 1.0, 0.95)
    assert 0 < small < big < math.inf
    assert detectable_excess(1e-9, 100, 1.0, 0.95) == math.inf
    assert detectable_excess(0.0, 100, 1.0, 0.95) == math.inf


def test_default_pair_is_the_most_distinguishable():
    assert default_pair(parse_portable("geometric(k=6,eps=1.0)")) == (0, 5)
    assert default_pair(parse_portable("duchi(k=5,eps=1.0)")) == (0, 4)
    x, xp = default_pair(parse_portable("krr(k=5,eps=1.0)"))
    assert x != xp


def test_claimed_level_of_rounds():
    lgrr = parse_portable("lgrr(k=3,eps_perm=2.0,eps_1=0.5)")
    assert claimed_level(lgrr) == pytest.approx(0.5, rel=1e-6)
    assert claimed_level(lgrr, 1000) <= 2.0 + 1e-12
    krr = parse_portable("krr(k=3,eps=0.5)")
    assert claimed_level(krr, 3) == pytest.approx(1.5)


def test_bounds_are_refused():
    mech, run = _in_process("correct", "krr(k=3,eps=1.0)", "bounds")
    with pytest.raises(LocalPrivError, match="trials must be in"):
        audit(mech, run, trials=MAX_TRIALS + 1)
    with pytest.raises(LocalPrivError, match="pair must be"):
        audit(mech, run, trials=10, pair=(1, 1))
    with pytest.raises(LocalPrivError, match="rounds must be"):
        audit(mech, run, trials=10, rounds=0)
    with pytest.raises(LocalPrivError, match="printed 0 lines"):
        audit(mech, lambda lines: [], trials=10)
    with pytest.raises(LocalPrivError, match="not JSON"):
        audit(mech, lambda lines: ["{" for _ in lines], trials=10)


#: a client that sends its value in the clear (no privacy at all), and one that always sends 0 (perfect
#: privacy): light commands (no localpriv import) for the command line's plumbing
ECHO = f"{sys.executable} -S -c 'import sys; sys.stdout.write(sys.stdin.read())'"
ZERO = f"{sys.executable} -S -c 'import sys; sys.stdout.write(\"\".join(\"0\\n\" for _ in sys.stdin))'"


def test_cli_flags_a_client_that_sends_values_in_the_clear(tmp_path):
    out = tmp_path / "audit.json"
    res = CliRunner().invoke(app, ["audit", "--client", ECHO, "--spec", "krr(eps=1.0)", "--domain", "5..7",
                                   "--trials", "400", "--json-out", str(out)])
    assert res.exit_code == 3, res.output
    doc = json.loads(out.read_text())
    assert doc["flagged"] is True and doc["lower_bound"] > doc["claimed"]
    assert doc["values"] in (["5", "6"], ["5", "7"], ["6", "7"])
    assert doc["power"]["detectable_excess"] > 0


def test_cli_passes_a_private_client_in_device_mode():
    res = CliRunner().invoke(app, ["audit", "--client", ZERO, "--spec", "lgrr(k=2,eps_perm=1.0,eps_1=0.5)",
                                   "--trials", "6", "--rounds", "3", "--pair", "0,1", "--jobs", "2"])
    assert res.exit_code == 0, res.output
    assert "claimed level" in res.output and "lower bound" in res.output


#: a private client that simulates devices: {rounds} zeros per input line
SIM_ZERO = (f"{sys.executable} -S -c 'import sys; r = int(sys.argv[1]); "
            f"sys.stdout.write(\"\".join(\"0\\n\" * r for _ in sys.stdin))' {{rounds}}")


def test_cli_runs_simulated_devices_many_per_run(tmp_path):
    out = tmp_path / "audit.json"
    res = CliRunner().invoke(app, ["audit", "--client", SIM_ZERO, "--spec", "lgrr(k=2,eps_perm=1.0,eps_1=0.5)",
                                   "--trials", "50", "--rounds", "3", "--json-out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["device_mode"] and doc["devices_per_run"] and doc["rounds"] == 3 and doc["lower_bound"] == 0.0
    # a client that prints one line per device where {rounds} are due is refused in one line
    res = CliRunner().invoke(app, ["audit", "--client", ZERO + " {rounds}", "--spec",
                                   "lgrr(k=2,eps_perm=1.0,eps_1=0.5)", "--trials", "10", "--rounds", "3"])
    assert res.exit_code == 1 and "printed 20 lines for 20 devices of 3 reports" in res.output


def test_cli_reports_a_failing_client_in_one_line():
    res = CliRunner().invoke(app, ["audit", "--client", f"{sys.executable} -c 'import sys; sys.exit(4)'",
                                   "--spec", "krr(k=2,eps=1.0)", "--trials", "10"])
    assert res.exit_code == 1
    assert "exit status 4" in res.output


def test_clients_module_runs_as_a_command():
    got = subprocess.run([sys.executable, str(CLIENTS), "float-pm", "pm(k=2,eps=1.0)", "--domain", "0..1",
                          "--seed", "s"], input="0\n1\n", capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src")})
    assert len(got.stdout.splitlines()) == 2


def test_docs_tables_are_rendered_from_the_json():
    """The tables of docs/audit.md and decisions 0059-0060, 0071 are tools/audit_evidence.py's rendering
    of docs/results/audit.json (`make audit`), never typed numbers."""
    import importlib.util
    import re

    spec = importlib.util.spec_from_file_location("audit_evidence", ROOT / "tools" / "audit_evidence.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    doc = json.loads((ROOT / "docs" / "results" / "audit.json").read_text())
    blocks = tool.tables(doc)
    seen = 0
    for path in tool.DOCS:
        for name, body in re.findall(r"<!-- audit-evidence:([\w-]+) -->\n(.*?)<!-- /audit-evidence -->",
                                     path.read_text(), flags=re.S):
            assert body == blocks[name], f"{path.name}: block {name} differs from the JSON's rendering"
            seen += 1
    assert seen == 7
    # every broken client is flagged and its control is not
    assert all(r["flagged"] == (r["variant"] != "correct") for r in doc["broken"])


def test_docs_tables_split_one_report_and_repeated_reports():
    """make audit's JSON: rows of one report per device go to the clients table, rows of repeated
    reports (the memo section) to the memo table."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("audit_evidence", ROOT / "tools" / "audit_evidence.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    row = {"client": "javascript", "spec": "lgrr(k=3,eps_perm=1.0,eps_1=0.5)", "claimed": 0.5, "lower_bound": 0.1,
           "flagged": False}
    doc = {"power": [], "broken": [],
           "clients": [dict(row, rounds=1), dict(row, rounds=8, claimed=1.0, lower_bound=0.25),
                       {"client": "java", "spec": row["spec"], "rounds": 8, "error": "the client failed"}],
           "params": {"trials": 10, "devices": 20, "memo_rounds": 8, "confidence": 0.95, "confidence_each": 0.99,
                      "audits": 3}}
    blocks = tool.tables(doc)
    assert "| `lgrr(k=3,eps_perm=1.0,eps_1=0.5)` | 0.5 | - | 0.1 |" in blocks["clients"]
    assert "| `lgrr(k=3,eps_perm=1.0,eps_1=0.5)` | 1 | error | 0.25 |" in blocks["memo"]
    assert "3 audits of 2 clients" in blocks["clients"] and "1 failed" in blocks["clients"]


@pytest.fixture(scope="module")
def java_build(tmp_path_factory):
    """The Java client's classes (plain javac), or a skip where no JDK is installed."""
    import shutil
    # make test installs the JDK where javac is missing; a bare pytest run elsewhere may lack it
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac is not installed (make java-client installs openjdk-17-jdk-headless)")
    out = tmp_path_factory.mktemp("audit-java")
    sources = sorted(str(p) for p in (ROOT / "clients" / "java" / "src").rglob("*.java"))
    res = subprocess.run(["javac", "--release", "17", "-d", str(out), *sources], capture_output=True, text=True,
                         timeout=180)
    assert res.returncode == 0, res.stderr
    return out


def _other_language(lang, java_build_dir):
    import shutil
    if lang == "javascript":
        # make test installs Node.js where it is missing; a bare pytest run elsewhere may lack it
        if shutil.which("node") is None:
            pytest.skip("node is not installed (make test installs it)")
        return f"node {ROOT / 'clients' / 'js' / 'bin' / 'localpriv-client.js'} {{spec}} --domain {{domain}}"
    return (f"java -Xshare:auto -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp {java_build_dir} "
            "org.localpriv.client.Main {spec} --domain {domain}")


@pytest.mark.filterwarnings("ignore::localpriv.mechanisms.base.LargeEpsilonWarning")
@pytest.mark.parametrize("lang", ["javascript", "java"])
@pytest.mark.parametrize("spec", [s for name, pair in SPECS.items() if name not in PORTABLE_MEMOIZED for s in pair])
def test_other_language_clients_never_exceed_their_level(request, lang, spec):
    """The JavaScript and Java clients, run as commands with the OS's random source, audited like
    the Python client at a small and a large level of every one-report mechanism (the memoized
    ones: the next test)."""
    build = request.getfixturevalue("java_build") if lang == "java" else None
    mech = parse_portable(spec)
    run = command_runner(_other_language(lang, build), spec=spec, domain=f"0..{mech.k - 1}", timeout=120)
    res = audit(mech, run, trials=400, confidence=0.999)
    assert res.lower_bound <= res.claimed
    assert not res.flagged


#: the memoized mechanisms' audit of the JavaScript and Java clients: one run of the client simulates
#: the devices of both values (--reports-per-device), each reporting ROUNDS_MEMO times; at 4 reports the
#: claimed level is the memo's bound eps_perm for every spec here but the small RAPPOR (2.149, below its
#: 2.197). The devices' first reports, one report of a fresh memo each, are audited at the one-report
#: level.
ROUNDS_MEMO = 4
#: devices per value tried, smallest first (:func:`_memo_devices`)
DEVICES_MEMO = (500, 1000, 1500)


def _memo_devices(mech):
    """Devices per value from the audit's power computation: the fewest of DEVICES_MEMO whose test half
    detects, with 80% power at confidence 0.999, a one-report excess of max(eps, 1) over the claimed
    level eps (a client delivering max(2 eps, eps + 1)) on the claimed channel's most informative event.
    For the specs of SPECS: 500 for lgrr, 1500 for loue(eps_1=2.0), lolh(eps_1=0.5) and
    rappor(f=0.05,p=0.1,q=0.9), 1000 for the others."""
    eps = claimed_level(mech)
    p1 = channel_event_probability(mech, default_pair(mech))
    for n in DEVICES_MEMO:
        if detectable_excess(p1, n - n // 2, eps, 0.999) <= max(eps, 1.0):
            return n
    raise AssertionError(f"{mech}: no size of {DEVICES_MEMO} has the power")


@pytest.mark.filterwarnings("ignore::localpriv.mechanisms.base.LargeEpsilonWarning")
@pytest.mark.parametrize("lang", ["javascript", "java"])
@pytest.mark.parametrize("spec", [s for name, pair in SPECS.items() if name in PORTABLE_MEMOIZED for s in pair])
def test_other_language_clients_memoized_never_exceed_their_level(request, lang, spec):
    """The JavaScript and Java clients' memoized mechanisms, at a small and a large level, through
    their commands with the OS's random source, many devices in one run (each with its own memo):
    ROUNDS_MEMO reports per device against the memo's bound, and each device's first report against
    the one-report level."""
    build = request.getfixturevalue("java_build") if lang == "java" else None
    mech = parse_portable(spec)
    command = _other_language(lang, build) + " --reports-per-device {rounds}"
    run = command_runner(command, spec=spec, domain=f"0..{mech.k - 1}", rounds=ROUNDS_MEMO, timeout=120)
    outputs: dict[tuple[str, ...], list[str]] = {}

    def once(lines):  # one client run, read by both audits (the same devices)
        if tuple(lines) not in outputs:
            outputs[tuple(lines)] = run(lines)
        return outputs[tuple(lines)]

    devices = _memo_devices(mech)
    many = audit(mech, once, trials=devices, rounds=ROUNDS_MEMO, confidence=0.999, devices_per_run=True)
    first = audit(mech, lambda lines: once(lines)[::ROUNDS_MEMO], trials=devices, confidence=0.999,
                  devices_per_run=True)
    assert len(outputs) == 1
    assert many.device_mode and many.claimed == pytest.approx(claimed_level(mech, ROUNDS_MEMO))
    assert not many.flagged and many.lower_bound <= many.claimed
    assert not first.flagged and first.lower_bound <= first.claimed == pytest.approx(claimed_level(mech))
    assert first.power["detectable_excess"] <= max(first.claimed, 1.0)


def test_simulated_devices_are_the_same_reports_in_every_client(request):
    """``--reports-per-device`` with the test stream: the JavaScript and Java commands print the
    reports of Python's perturb_devices, bit for bit (each device a fresh memo, one stream)."""
    from localpriv.mechanisms.portable import perturb_devices
    spec, lines = "lolh(k=3,eps_perm=1.0,eps_1=0.5,n_seeds=2)", ["0", "2", "2", "1"]
    want = [json.dumps(r) for r in perturb_devices(spec, "0..2", lines, 3, ChaCha20Source("devices")).reports]
    for lang in ("javascript", "java"):
        build = request.getfixturevalue("java_build") if lang == "java" else None
        run = command_runner(_other_language(lang, build) + " --reports-per-device {rounds} --seed devices",
                             spec=spec, domain="0..2", rounds=3, timeout=120)
        assert run(lines) == want, lang
