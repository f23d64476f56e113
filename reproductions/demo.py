"""The main job (``make demo``, ``localpriv demo``) as a reproduction: the library's demo
(:mod:`localpriv.inference.demo`) run by the experiment runner, so ``localpriv reproduce demo`` and
the tests that run it give the same record as ``localpriv demo``."""
from __future__ import annotations

from localpriv.inference.demo import DEMO_DEFAULTS, DEMO_DESCRIPTION, DEMO_REFERENCE, compute_demo, plot_demo
from reproductions.runner import Experiment, register_experiment

register_experiment(Experiment(
    name="demo",
    description=DEMO_DESCRIPTION,
    defaults=DEMO_DEFAULTS,
    compute=compute_demo,
    plot=plot_demo,
    reference=DEMO_REFERENCE,
))
