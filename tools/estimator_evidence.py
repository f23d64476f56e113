"""Run (resumably, in chunks) and report the estimator evidence (reproductions/evidence.py).

    python tools/estimator_evidence.py run [--quick] [--chunk i/m] [--cells DIR]
    python tools/estimator_evidence.py report [--quick] [--cells DIR ...] [--out docs/results]
    python tools/estimator_evidence.py run --quick --existing-only --rerun auto default
    python tools/estimator_evidence.py run --regret; python tools/estimator_evidence.py regret

``make estimator-evidence`` runs the full grid and reports; ``make estimator-evidence-quick`` the
check of the pipeline; ``make estimator-evidence-quick-rerun-default`` the default's columns of the
quick cells again (after a change of the default); ``make default-regret`` the default's regret
(decision 0076). Several ``run --chunk i/m`` processes (i = 0..m-1) may share one cell folder.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's reproductions/
from reproductions.evidence import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
