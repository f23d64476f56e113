"""advise skips a metric mechanism too large to simulate before calibrating its parameter."""
import pytest

from localpriv import advise, parse_domain
from localpriv.advice import advisor

GRID = parse_domain("bbox(40.70,-74.02,40.73,-73.98,1)")  # 4 x 4 cells of 1 km


def test_unaffordable_metric_mechanism_is_not_calibrated(monkeypatch):
    calibrated = []
    real = advisor._parameter

    def spy(name, *args):
        calibrated.append(name)
        return real(name, *args)

    monkeypatch.setattr(advisor, "_parameter", spy)
    monkeypatch.setattr(advisor, "CHANNEL_BUDGET", 100)  # 16 x 16 = 256 entries: above it
    monkeypatch.setattr(advisor, "GRID_FFT_BUDGET", 100)  # 9 x 16 = 144 FFT points: above it too
    adv = advise(GRID, eps_ldp=1.0, n=200, goal="tv", rng=1, runs=2, mechanisms=["krr", "planar-geometric"])
    assert calibrated == ["krr"]
    assert adv.skipped == {"planar geometric": "too large to simulate quickly (k=16); use method='simulation' "
                                               "to force it"}
    assert [r.spec for r in adv.rows] == ["krr(eps=1.0)"]


def test_forced_simulation_still_calibrates(monkeypatch):
    monkeypatch.setattr(advisor, "CHANNEL_BUDGET", 100)
    adv = advise(GRID, eps_ldp=1.0, n=200, goal="tv", rng=1, runs=2, mechanisms=["planar-geometric"],
                 method="simulation")
    assert not adv.skipped and adv.rows[0].eps_ldp == pytest.approx(1.0, rel=1e-3)
