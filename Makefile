# localpriv: every target creates or refreshes the virtual environment from the pinned lock.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed
DOCS_STAMP  := $(VENV)/.docs-installed
# the headless browser of the dashboard test: Debian's chromium, pinned to the version apt
# offered when the test was written; installed only where /usr/bin/chromium is missing (needs root)
BROWSER_STAMP := $(VENV)/.browser-installed
CHROMIUM_VERSION := 150.0.7871.100-1~deb12u1

.PHONY: lint demo test browser reproduce bench bench-report bench-rappor bench-rappor-accuracy bench-vocab bench-em bench-service numeric-evidence bench-memory bench-uncertainty bench-import bench-spark coverage coverage-small coverage-docs docs-numbers estimator-evidence docs venv clean

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP) requirements-bench.lock
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-bench.lock
	touch $(BENCH_STAMP)

$(DOCS_STAMP): $(STAMP) requirements-docs.lock
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-docs.lock
	touch $(DOCS_STAMP)

# the documentation site (mkdocs-material; API reference from the docstrings) -> site/
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

demo: $(STAMP)
	$(VENV)/bin/localpriv demo --out out/demo

$(BROWSER_STAMP): $(STAMP)
	@if [ ! -x /usr/bin/chromium ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium=$(CHROMIUM_VERSION) chromium-common=$(CHROMIUM_VERSION); fi
	touch $(BROWSER_STAMP)

browser: $(BROWSER_STAMP)

test: $(STAMP) $(BROWSER_STAMP)
	$(PY) -m pytest -n 2 -q --durations=25

# ruff (rules in pyproject.toml) over the whole tree and mypy over the package: zero findings
lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache .
	$(VENV)/bin/mypy

# every reproduction of the README's table with its defaults (hours on 2 cores), then the
# table between the README's markers rewritten from their JSON (docs/results/repro/*.json)
reproduce: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) tools/reproduce_all.py --out docs/results/repro

# every benchmark of run_all.py (~30 min on a quiet 2-core machine; run it when nothing else
# runs), then RESULTS.md rendered from benchmarks/results*.json; bench-report only re-renders
bench: $(BENCH_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py
	$(PY) benchmarks/report.py

bench-report: $(STAMP)
	$(PY) benchmarks/report.py

bench-memory: $(STAMP)
	$(PY) benchmarks/run_all.py memory
	$(PY) benchmarks/report.py

bench-uncertainty: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py uncertainty
	$(PY) benchmarks/report.py

# DuckDB path vs hand-written SQL vs Spark local[2] at 10^7 and 10^8 reports, EM on Spark
# (-> benchmarks/results-spark.json, read by docs/scale.md; run it on a quiet machine)
bench-spark: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py spark
	$(PY) benchmarks/report.py

# the numbers in docs/numeric.md (Adult age and hours-per-week; minutes on one core)
numeric-evidence: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/numeric_evidence.py

# the collector service's load test: SQLite and PostgreSQL, 3 interleaved rounds, SIGKILL in each
bench-service: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) benchmarks/service.py --both --rounds 3 --out benchmarks/results-service.json
	$(PY) benchmarks/report.py

# Hadamard response / count-mean sketches and heavy hitters against pure-LDP 1.2.0, on
# Gowalla place ids (-> benchmarks/results-large_domains.json, results-heavy_hitters.json)
bench-vocab: $(BENCH_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/large_domains.py
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/heavy_hitters.py
	$(PY) benchmarks/report.py

# EM overhead at k = 100, batched GIBU, the planar real-FFT block (-> benchmarks/results-em.json)
bench-em: $(BENCH_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/em_suite.py
	$(PY) benchmarks/report.py

# RAPPOR against pure-LDP 1.2.0's RAPPOR on Gowalla places (-> benchmarks/results-rappor.json)
bench-rappor: $(BENCH_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/rappor.py --rounds 20
	$(PY) benchmarks/report.py

# RAPPOR's accuracy arms only, no timing, 60 rounds (-> benchmarks/results-rappor-accuracy.json;
# paired comparisons with sign tests; may run on a busy machine)
bench-rappor-accuracy: $(BENCH_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/rappor.py --accuracy-only
	$(PY) benchmarks/report.py

# start-up cost of `import localpriv` and `localpriv --help` (target: under 0.25 s of CPU)
bench-import: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py import_time
	$(PY) benchmarks/report.py

# the calibration of the intervals (hours on 2 cores; the JSON/PNG the docs quote are committed in docs/results)
coverage: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce coverage -o docs/results
	$(PY) -c "from reproductions.coverage import rewrite_docs; rewrite_docs()"

# the small-n calibration (k-RR, OUE, geometric; MLE and EMS; n = 10, 100, 1,000; 100 runs per cell;
# hours of CPU, mostly the geometric rows), then both tables of docs/uncertainty.md
coverage-small: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce coverage-small -o docs/results
	$(PY) -c "from reproductions.coverage import rewrite_docs; rewrite_docs()"

# docs/uncertainty.md's coverage table from the committed docs/results/coverage.json
coverage-docs: $(STAMP)
	$(PY) -c "from reproductions.coverage import rewrite_docs; rewrite_docs()"

# the measured numbers of docs/convergence.md, docs/regularized.md and docs/uncertainty.md
# (house rule: numbers in the docs come from this JSON; about 10 minutes on one core)
docs-numbers: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce docs-numbers -o docs/results

# the evidence for the default estimator (hours on one core; the committed JSON was run in pieces and merged)
estimator-evidence: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) -c "from reproductions import run_experiment; \
	from reproductions.accuracy import EVIDENCE; \
	run_experiment('estimator-accuracy', 'docs/results', overrides=EVIDENCE)"

clean:
	rm -rf $(VENV) out site
