"""The measurements behind docs/multiattr.md's multi-attribute section and decision 0061
(correctness only, seconds on one core): the computed levels of SPL, SMP, RS+FD and RS+RFD (whole
report and one attribute) and the sampled-attribute attack's accuracy, -> docs/results/multiattr.json."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from localpriv.data.formats import atomic_output
from localpriv.domains import IntegerDomain, ProductDomain
from localpriv.mechanisms import parse
from localpriv.multiattr.attribute_attack import sampled_attribute_attack

OUT = Path("docs/results/multiattr.json")
EPS = (0.5, 1.0, 2.0, 4.0)
DOMAINS = {"equal 5x5x5": (5, 5, 5), "unequal 3x2x4": (3, 2, 4)}
SKEW = np.array([0.6, 0.25, 0.1, 0.04, 0.01])
N_ATTACK = 50_000


def main() -> int:
    levels = []
    for label, shape in DOMAINS.items():
        dom = ProductDomain([IntegerDomain(0, s - 1) for s in shape], [f"a{j}" for j in range(len(shape))])
        prior = "[" + ",".join(str([round(1.0 / s, 12)] * s).replace(" ", "") for s in shape) + "]"
        for eps in EPS:
            for spec in (f"spl(krr(eps={eps}))", f"smp(krr(eps={eps}))", f"rsfd(krr(eps={eps}))",
                         f"rsrfd(krr(eps={eps}),prior={prior})"):
                mech = parse(spec, dom)
                levels.append({"domain": label, "spec": spec.split(",prior")[0] + (")" if "prior" in spec else ""),
                               "eps": eps, "whole_report": mech.epsilon_ldp(),
                               "one_attribute": mech.epsilon_attribute()})
    dom = ProductDomain([IntegerDomain(0, 4)] * 3, ["a", "b", "c"])
    rng = np.random.default_rng(2026)
    x = dom.ravel(rng.choice(5, size=(N_ATTACK, 3), p=SKEW))
    prior = "[" + ",".join([str(SKEW.tolist()).replace(" ", "")] * 3) + "]"
    attacks = []
    for eps in EPS:
        for name, spec in (("rsfd", f"rsfd(krr(eps={eps}))"), ("rsrfd", f"rsrfd(krr(eps={eps}),prior={prior})")):
            res = sampled_attribute_attack(parse(spec, dom), x, rng)
            attacks.append({"protocol": name, "eps": eps, "accuracy": res.accuracy, "baseline": res.baseline,
                            "advantage": res.advantage, "n": res.n})
    payload = {"levels": levels, "attack": {"domain": "5x5x5", "marginal": SKEW.tolist(), "prior": "the marginal",
                                            "results": attacks}}
    with atomic_output(OUT) as tmp:
        Path(tmp).write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
