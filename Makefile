# localpriv: every target creates or refreshes the virtual environment from the pinned locks.
# `make demo` installs the core lock only (the library, the command line, the demo); the tests, the
# quality gates, the reproductions and the benchmarks also install the optional groups' locks
# (fast, service, spark, geo, test), each resolved on top of the core lock (-c requirements.lock).
# Each stamp depends on its locks: a changed lock refreshes the environment at the next target.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
FULL_STAMP  := $(VENV)/.full-installed
EXTRA_LOCKS := requirements-fast.lock requirements-service.lock requirements-spark.lock requirements-geo.lock requirements-test.lock
BENCH_STAMP := $(VENV)/.bench-installed
DOCS_STAMP  := $(VENV)/.docs-installed
# the headless browser of the dashboard and map tests: Debian's chromium, pinned to the version apt
# offered when the test was written, and Debian's Leaflet (the map test runs offline, so the page's
# Leaflet is loaded from it); each installed only where it is missing (needs root)
BROWSER_STAMP := $(VENV)/.browser-installed
CHROMIUM_VERSION := 150.0.7871.100-1~deb12u1
LEAFLET_VERSION := 1.7.1~dfsg-7

.PHONY: lint demo test browser reproduce bench bench-cost bench-planar-certified bench-report bench-rappor bench-rappor-accuracy bench-vocab bench-em bench-service service-ledger-evidence numeric-evidence bench-memory bench-uncertainty bench-import bench-spark coverage coverage-docs docs-numbers estimator-evidence docs venv clean vectors accounting-evidence docs-outputs figure-evidence venv-size

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

$(FULL_STAMP): $(STAMP) $(EXTRA_LOCKS)
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock $(addprefix -r ,$(EXTRA_LOCKS))
	touch $(FULL_STAMP)

$(BENCH_STAMP): $(FULL_STAMP) requirements-bench.lock
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -r requirements-bench.lock
	touch $(BENCH_STAMP)

$(DOCS_STAMP): $(STAMP) requirements-docs.lock
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -r requirements-docs.lock
	touch $(DOCS_STAMP)

# the documentation site (mkdocs-material; API reference from the docstrings) -> site/
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site
	$(PY) tools/check_site.py site

demo: $(STAMP)
	$(VENV)/bin/localpriv demo --out out/demo

$(BROWSER_STAMP): $(STAMP)
	@if [ ! -x /usr/bin/chromium ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium=$(CHROMIUM_VERSION) chromium-common=$(CHROMIUM_VERSION); fi
	@if [ ! -f /usr/share/javascript/leaflet/leaflet.js ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    libjs-leaflet=$(LEAFLET_VERSION); fi
	touch $(BROWSER_STAMP)

browser: $(BROWSER_STAMP)

test: $(FULL_STAMP) $(BROWSER_STAMP)
	$(PY) -m pytest -n 2 -q --durations=25

# the size of a fresh virtual environment of the core lock (what `make demo` installs), built in a
# temporary folder, per package (-> docs/results/venv-size.json; one build, its time is one sample)
venv-size:
	$(PYTHON) tools/venv_size.py --lock requirements.lock --out docs/results/venv-size.json

# ruff (rules in pyproject.toml) over the whole tree and mypy over the package: zero findings
lint: $(FULL_STAMP)
	$(VENV)/bin/ruff check --no-cache .
	$(VENV)/bin/mypy

# every reproduction of the README's table with its defaults (hours on 2 cores), then the
# table between the README's markers rewritten from their JSON (docs/results/repro/*.json)
reproduce: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) tools/reproduce_all.py --out docs/results/repro

# every benchmark of run_all.py (~30 min on a quiet 2-core machine; run it when nothing else
# runs), then RESULTS.md rendered from benchmarks/results*.json; bench-report only re-renders
bench: $(BENCH_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py
	$(PY) benchmarks/report.py

# the cost of every registered estimator through localpriv.estimate(obs, method), set-up included,
# against distinct reports, mechanisms (1..10^3) and n (10^4..10^8), the stopping rule beside every
# number (-> benchmarks/results-cost_curves.json; run it on a quiet machine)
bench-cost: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/cost_curves.py --out benchmarks/results-cost_curves.json > /dev/null

# the certified planar MLE against the loose stop, 300 x 300 and 1000 x 1000, through localpriv.estimate
# (-> benchmarks/results-planar_certified*.json; decision 0067; run it on a quiet machine)
bench-planar-certified: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/planar_certified.py --side 300 --out benchmarks/results-planar_certified.json > /dev/null
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/planar_certified.py --side 1000 --every 20 --out benchmarks/results-planar_certified-1000.json > /dev/null

bench-report: $(FULL_STAMP)
	$(PY) benchmarks/report.py

bench-memory: $(FULL_STAMP)
	$(PY) benchmarks/run_all.py memory
	$(PY) benchmarks/report.py

bench-uncertainty: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py uncertainty
	$(PY) benchmarks/report.py

# DuckDB path vs hand-written SQL vs Spark local[2] at 10^7 and 10^8 reports, EM on Spark
# (-> benchmarks/results-spark.json, read by docs/scale.md; run it on a quiet machine)
bench-spark: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py spark
	$(PY) benchmarks/report.py

# the numbers in docs/numeric.md (Adult age and hours-per-week; minutes on one core)
# the portable client protocol's conformance vectors (clients/vectors/vectors-v1.json; seconds)
vectors: $(STAMP)
	$(PY) tools/portable_vectors.py

numeric-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/numeric_evidence.py

# the collector service's load test: SQLite and PostgreSQL, 3 interleaved rounds, SIGKILL in each
bench-service: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) benchmarks/service.py --both --rounds 3 --out benchmarks/results-service.json
	$(PY) benchmarks/report.py

# the collector's ledger and rate-limit measurements (correctness only, seconds; -> docs/results/service-ledger.json)
service-ledger-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/service_ledger_evidence.py

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
bench-import: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py import_time
	$(PY) benchmarks/report.py

# the calibration of the intervals (hours on 2 cores; the JSON/PNG the docs quote are committed in docs/results)
coverage: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce coverage -o docs/results
	$(PY) -c "from reproductions.coverage import rewrite_docs; rewrite_docs()"

# docs/uncertainty.md's coverage table from the committed docs/results/coverage.json
coverage-docs: $(FULL_STAMP)
	$(PY) -c "from reproductions.coverage import rewrite_docs; rewrite_docs()"

# the measured numbers of docs/convergence.md, docs/regularized.md and docs/uncertainty.md
# (house rule: numbers in the docs come from this JSON; about 10 minutes on one core)
docs-numbers: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce docs-numbers -o docs/results

# the measurements of docs/accounting.md and decisions 0051-0052 (correctness only, seconds):
# docs/results/accounting.json, then the tables between the docs' accounting-evidence markers
accounting-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/accounting_evidence.py

# the evidence for the default estimator (hours on one core; the committed JSON was run in pieces and merged)
estimator-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) -c "from reproductions import run_experiment; \
	from reproductions.accuracy import EVIDENCE; \
	run_experiment('estimator-accuracy', 'docs/results', overrides=EVIDENCE)"

# the command outputs and figures that docs/getting-started.md and docs/heavy-hitters.md show, rerun
# in one shell session per page and rewritten between their markers (minutes on one core; the
# Gowalla file is read from ../shared/data)
docs-outputs: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/docs_outputs.py

# the figures' merged cells against the truth (-> docs/results/figures.json and the table of
# docs/decisions/0047; a few minutes on one core)
figure-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) -m reproductions.figures

clean:
	rm -rf $(VENV) out site
