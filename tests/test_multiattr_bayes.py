"""GreedyBayes, structure metrics, synthesis, table quality."""
import numpy as np
import pytest

from localpriv.multiattr import load_network
from localpriv.multiattr.bayesnet import (
    CachedJoint,
    ancestral_sample,
    conditional_mi,
    fit_conditionals,
    greedy_bayes,
    mutual_information,
    prune_skeleton,
    structure_metrics,
    table_js,
    table_l1,
)
from localpriv.utils.validation import LocalPrivError


@pytest.fixture(scope="module")
def asia():
    net = load_network("asia")
    rec = net.sample(100_000, np.random.default_rng(2024))
    return net, rec, CachedJoint(lambda a: rec.table(list(a), True))


@pytest.mark.parametrize("first", ["asia", "tub", "lung", "either", "xray"])
def test_greedy_bayes_recovers_the_asia_skeleton(asia, first):
    net, rec, J = asia
    cards = dict(zip(net.names, net.cards))
    g = greedy_bayes(J, net.names, 2, first=first, penalty="bic", n=rec.n, cards=cards)
    assert prune_skeleton(g, J, rec.n, cards) == net.skeleton()


def test_thesis_greedy_bayes_gives_exactly_k_parents(asia):
    net, rec, J = asia
    g = greedy_bayes(J, net.names, 2, first="asia")
    assert [len(pi) for _, pi in g] == [0, 1] + [2] * 6
    # with k=1 (Chow-Liu tree) the first pair chosen has the largest mutual information
    t = greedy_bayes(J, net.names, 1, first="either")
    mis = {a: mutual_information(J((a, "either"))) for a in net.names if a != "either"}
    assert t[1] == (max(mis, key=mis.get), ("either",))
    with pytest.raises(LocalPrivError):
        greedy_bayes(J, net.names, 2)  # random start needs an rng


def test_mutual_information_known_values():
    assert mutual_information(np.array([[0.5, 0], [0, 0.5]])) == pytest.approx(1.0)
    assert mutual_information(np.outer([0.3, 0.7], [0.2, 0.8])) == pytest.approx(0.0, abs=1e-12)
    J = CachedJoint(lambda a: np.outer([0.3, 0.7], [0.2, 0.8]) if a == (0, 1) else None)
    assert conditional_mi(J, 0, 1) == pytest.approx(0.0, abs=1e-12)


def test_structure_metrics_conventional_counts():
    attrs = ["a", "b", "c"]
    m = structure_metrics({("a", "b"), ("b", "c")}, {("a", "b"), ("a", "c")}, attrs)
    assert (m["TP"], m["FP"], m["FN"], m["TN"], m["L"]) == (1, 1, 1, 3, 6)
    assert m["sens"] == 0.5 and m["spec"] == 0.75 and m["acc"] == pytest.approx(4 / 6)
    u = structure_metrics({("a", "b")}, {("b", "a")}, attrs, directed=False)
    assert u["acc"] == 1.0


def test_synthesis_reproduces_the_network(asia):
    net, rec, J = asia
    order = [(v, tuple(net.parents[v])) for v in net.order()]
    cpts = fit_conditionals(order, J)
    syn = ancestral_sample(order, cpts, net.names, 100_000, np.random.default_rng(1))
    for attrs in [["smoke", "bronc"], ["either", "xray"]]:
        a, b = syn.table(attrs, True), rec.table(attrs, True)
        # two samples of 1e5: 5 sigma of the difference of proportions
        assert np.all(np.abs(a - b) < 5 * np.sqrt(2 * 0.25 / 1e5))
    assert table_js(a, b) < 1e-3 and table_l1(a, a, 100) == 0.0


def test_js_is_finite_with_subnormal_cells():
    assert table_js(np.array([0.5, 0.5, 0.0]), np.array([0.5, 0.5, 5e-324])) == 0.0
