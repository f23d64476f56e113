# localpriv: every target creates or refreshes the virtual environment from the pinned locks.
# `make demo` installs the core lock only (the library, the command line, the demo); the tests, the
# quality gates, the reproductions and the benchmarks also install the optional groups' locks
# (duckdb, parquet, plots, fast, service, spark, geo, test), each resolved on top of the core lock
# (-c requirements.lock). Without parquet and plots the demo reads and writes CSV and prints its numbers.
# Each stamp depends on its locks: a changed lock refreshes the environment at the next target.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
FULL_STAMP  := $(VENV)/.full-installed
EXTRA_LOCKS := requirements-duckdb.lock requirements-parquet.lock requirements-plots.lock requirements-fast.lock requirements-service.lock requirements-spark.lock requirements-geo.lock requirements-test.lock
BENCH_STAMP := $(VENV)/.bench-installed
DOCS_STAMP  := $(VENV)/.docs-installed
# the headless browser of the dashboard and map tests: Debian's chromium, pinned to the version apt
# offered when the test was written, and Debian's Leaflet (the map test runs offline, so the page's
# Leaflet is loaded from it); each installed only where it is missing (needs root)
BROWSER_STAMP := $(VENV)/.browser-installed
CHROMIUM_VERSION := 150.0.7871.100-1~deb12u1
LEAFLET_VERSION := 1.7.1~dfsg-7
# the JavaScript client's tests (clients/js): Node.js from Debian where /usr/bin/node or npm is
# missing (the versions apt offered when the client was written), then `npm ci` from the committed
# lockfile (playwright-core, which drives the chromium above; no browser download, no install scripts)
NODEJS_VERSION := 18.20.4+dfsg-1~deb12u3
NPM_VERSION := 9.2.0~ds1-1
CLIENTS_STAMP := clients/js/node_modules/.installed
# the Java client's compiler: Debian's openjdk-17-jdk-headless, pinned to the version apt offered
# when the client was written; installed only where javac is missing (needs root)
JDK_STAMP := $(VENV)/.jdk-installed
JDK_VERSION := 17.0.21.1+2-1~deb12u1
JAVA_BUILD := clients/java/build
.PHONY: lint demo test browser jdk java-client bench-java-client reproduce bench bench-report bench-rappor bench-rappor-accuracy bench-vocab bench-em bench-service service-ledger-evidence numeric-evidence bench-memory bench-uncertainty bench-import bench-spark coverage coverage-docs docs-numbers estimator-evidence docs venv clean vectors accounting-evidence docs-outputs figure-evidence venv-size clients bench-clients-js bench-service-mixed bench-service-profile bench-default bench-default-accuracy estimator-evidence-report estimator-evidence-quick estimator-accuracy-evidence multiattr-evidence audit multiattr-queries-evidence multiattr-queries-quick bench-clients-all bench-cost bench-cost-linear bench-planar-certified coverage-small bench-advise coverage-estimators numeric-default-evidence estimator-evidence-quick-rerun-default default-regret bench-service-interleaved bench-service-interleaved-0075 default-tv-bootstrap demo-plots bench-grid-default coverage-small-plugin multiattr-queries-cells multiattr-queries-profile

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

# the demo with its figure (out/demo/demo.png): the core lock and the plots group (matplotlib)
PLOTS_STAMP := $(VENV)/.plots-installed
$(PLOTS_STAMP): $(STAMP) requirements-plots.lock
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -r requirements-plots.lock
	touch $(PLOTS_STAMP)

demo-plots: $(PLOTS_STAMP)
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

$(JDK_STAMP): $(STAMP)
	@if ! command -v javac >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    openjdk-17-jdk-headless=$(JDK_VERSION) openjdk-17-jre-headless=$(JDK_VERSION); fi
	touch $(JDK_STAMP)

jdk: $(JDK_STAMP)

# the Java client (clients/java): plain javac, then every conformance vector (prints "N passed, 0 failed")
java-client: $(JDK_STAMP)
	rm -rf $(JAVA_BUILD)
	javac --release 17 -Xlint:all -Werror -d $(JAVA_BUILD) $$(find clients/java/src clients/java/test -name '*.java' | sort)
	java -cp $(JAVA_BUILD) org.localpriv.client.VectorsTest clients/vectors/vectors-v1.json
	java -cp $(JAVA_BUILD) org.localpriv.client.LedgerTest clients/vectors/vectors-v1.json clients/vectors/ledger-v1.json

# the Java client's throughput on one core (-> benchmarks/results-java-client.json; a quiet machine)
bench-java-client: $(JDK_STAMP)
	$(PY) benchmarks/java_client.py --out benchmarks/results-java-client.json
	$(PY) benchmarks/report.py

$(CLIENTS_STAMP): clients/js/package.json clients/js/package-lock.json
	@if [ ! -x /usr/bin/node ] || ! command -v npm >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    nodejs=$(NODEJS_VERSION) npm=$(NPM_VERSION); fi
	cd clients/js && npm ci --prefer-offline --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(CLIENTS_STAMP)

clients: $(CLIENTS_STAMP)

test: $(FULL_STAMP) $(BROWSER_STAMP) $(CLIENTS_STAMP) $(JDK_STAMP)
	$(PY) -m pytest -n 2 -q --durations=25

# the size of a fresh virtual environment of the core lock (what `make demo` installs), built in a
# temporary folder, per package, with the demo run in it, then with the groups parquet and plots
# on top (the demo again, with its figure) (-> docs/results/venv-size.json; one build, its time is one sample)
venv-size:
	$(PYTHON) tools/venv_size.py --lock requirements.lock --out docs/results/venv-size.json \
	  --smoke "localpriv demo --out demo-out" --groups parquet,plots

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

# decision 0083's check of slopes: the full reports and mechanisms axes of the four estimators that
# were superlinear there (-> benchmarks/results-cost_curves-linear.json; a minute of CPU, any machine:
# its times show slopes, the timings themselves come from bench-cost on a quiet machine)
bench-cost-linear: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/cost_curves.py --methods inv-n-m,inv-p-m,ibu-m,dirichlet --axes reports,mechanisms --out benchmarks/results-cost_curves-linear.json > /dev/null

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
# the portable client protocol's conformance vectors (clients/vectors/vectors-v1.json) and the
# ledger written by Python that the clients read (clients/vectors/ledger-v1.json); seconds
vectors: $(STAMP)
	$(PY) tools/portable_vectors.py

# the JavaScript client's throughput on one core, per mechanism (-> benchmarks/results-clients_js.json;
# timings: run on a quiet machine; `node benchmarks/clients_js.mjs --quick` is a smoke run)
bench-clients-js: $(CLIENTS_STAMP)
	node benchmarks/clients_js.mjs --rounds 5

# every client (Python portable, Python vectorized, JavaScript, Java) side by side on one core, one run
# (-> benchmarks/results-clients-all.json, RESULTS.md and the table of docs/clients.md; a quiet machine, ~2-5 min)
bench-clients-all: $(FULL_STAMP) $(CLIENTS_STAMP) $(JDK_STAMP)
	$(PY) benchmarks/clients_all.py --out benchmarks/results-clients-all.json
	$(PY) benchmarks/report.py

numeric-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/numeric_evidence.py

# the collector service's load test: SQLite and PostgreSQL, 3 interleaved rounds, SIGKILL in each
bench-service: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) benchmarks/service.py --both --rounds 3 --out benchmarks/results-service.json
	$(PY) benchmarks/report.py

# the collector under mixed load for 5 minutes (8 ingest clients, 2 analysts, 2 SIGKILLs) and the
# one-process SQLite floor of the same batches (-> benchmarks/results-service-mixed.json and the
# table of docs/service.md); run it on a quiet machine
bench-service-mixed: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=$(CURDIR)/src $(PY) benchmarks/service_mixed.py --out benchmarks/results-service-mixed.json --docs
	$(PY) benchmarks/report.py

# CPU per batch of each step of the ingest path, the commit before decision 0065's changes
# (PROFILE_BASE, exported to a temporary folder) against the working tree, at 1,000 and 10,000
# reports per batch (-> benchmarks/results-service-ingest-profile.json and decision 0065's table)
PROFILE_BASE ?= aa9619f
bench-service-profile: $(FULL_STAMP)
	rm -rf .profile-base && mkdir -p .profile-base && git archive $(PROFILE_BASE) src | tar -x -C .profile-base
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=$(CURDIR)/.profile-base/src $(PY) benchmarks/service_ingest_profile.py --label before --commit $(PROFILE_BASE)
	rm -rf .profile-base
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=$(CURDIR)/src $(PY) benchmarks/service_ingest_profile.py --label after
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=$(CURDIR)/src $(PY) benchmarks/service_ingest_profile.py --label after-10k --size 10000 --batches 40
	$(PY) benchmarks/service_ingest_profile.py --docs-only

# the server's CPU per batch of 1,000 reports, the commit before decision 0075's changes
# (INTERLEAVE_BASE) against the working tree and the one-process SQLite floor, interleaved by
# blocks of batches in one run (-> benchmarks/results-service-ingest-interleaved.json and decision
# 0075's table); run it on a quiet machine
INTERLEAVE_BASE ?= 039eaf1
bench-service-interleaved-0075: $(FULL_STAMP)
	rm -rf .interleave-base && mkdir -p .interleave-base && git archive $(INTERLEAVE_BASE) src | tar -x -C .interleave-base
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=$(CURDIR)/src $(PY) benchmarks/service_ingest_profile.py --interleave $(CURDIR)/.interleave-base/src --commit $(INTERLEAVE_BASE) --label full --batches 400 --rounds 3
	rm -rf .interleave-base

# the server's CPU per batch of 1,000 reports: the commit before decision 0082 (BODIES_BASE, JSON body,
# h11) against the working tree with the JSON body, with the binary body the Python client sends by
# default, and with the binary body under --http h11, and the one-process SQLite floor, interleaved by
# blocks of batches in one run (-> benchmarks/results-service-ingest-bodies.json and decision 0082's
# table); run it on a quiet machine
BODIES_BASE ?= 0db7cb9
bench-service-interleaved: $(FULL_STAMP)
	rm -rf .interleave-base && mkdir -p .interleave-base && git archive $(BODIES_BASE) src | tar -x -C .interleave-base
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=$(CURDIR)/src $(PY) benchmarks/service_ingest_profile.py --bodies $(CURDIR)/.interleave-base/src --commit $(BODIES_BASE) --label full --batches 400 --rounds 3
	rm -rf .interleave-base

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

# the default estimator's CPU time against the certified MLE on the same observations, set-up
# included (-> benchmarks/results-default-cost.json; target: default <= 2 x MLE + 50 ms; run it on
# a quiet machine; `--quick` is a smoke run, `--old` adds the former default: minutes per call)
bench-default: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/default_cost.py --rounds 5

# the default estimator's accuracy against the former default, the MLE and the post-processings
# (errors only, no timings: may run on a busy machine; -> benchmarks/results-default-accuracy.json)
bench-default-accuracy: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/default_accuracy.py --runs 5
	$(PY) benchmarks/default_accuracy.py --render docs/decisions/0037-fast-default-estimator.md

# start-up cost of `import localpriv` and `localpriv --help` (target: under 0.25 s of CPU)
bench-import: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py import_time
	$(PY) benchmarks/report.py

# the calibration of the intervals (hours on 2 cores; the JSON/PNG the docs quote are committed in docs/results)
coverage: $(FULL_STAMP) coverage-estimators
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce coverage -o docs/results
	$(PY) -c "from reproductions.coverage import rewrite_docs; rewrite_docs()"

# every kind of estimator's cell intervals on sparse Zipf truths (k-RR; the MLE, the default, the
# post-processings; anchored, profile and bootstrap intervals): docs/results/coverage-estimators.json
# and its table in docs/uncertainty.md (about an hour of CPU, mostly the k = 200 setting's profiles)
coverage-estimators: $(FULL_STAMP)
	rm -f docs/results/coverage-estimators.json
	OPENBLAS_NUM_THREADS=1 $(PY) -m reproductions.coverage_estimators
	$(PY) -c "from reproductions.coverage_estimators import rewrite_docs; rewrite_docs()"

# which mean --stat mean reports for pm, hm, duchi, sw: MSE and coverage of every estimator's mean at
# eps 0.5 to 4, n = 10^4, 20 paired runs: docs/results/numeric-default.json, its table in docs/numeric.md
numeric-default-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) -m reproductions.numeric_default
	$(PY) -c "from reproductions.numeric_default import rewrite_docs; rewrite_docs()"

# the small-n calibration (k-RR, OUE, geometric; MLE and EMS; n = 10, 100, 1,000; 100 runs per cell;
# hours of CPU, mostly the geometric rows), then both tables of docs/uncertainty.md
coverage-small: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce coverage-small -o docs/results
	$(PY) -c "from reproductions.coverage import rewrite_docs; rewrite_docs()"

# the share of the small-n misses of the mean and median due to the inverse's plug-in covariance:
# the same data sets' intervals with the covariance read from the reports and exact under the truth
# (OUE and geometric at n = 10, 100 runs each): docs/results/coverage-small-plugin.json
coverage-small-plugin: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce coverage-small-plugin -o docs/results

# docs/uncertainty.md's coverage table from the committed docs/results/coverage.json
coverage-docs: $(FULL_STAMP)
	$(PY) -c "from reproductions.coverage import rewrite_docs; rewrite_docs()"
	$(PY) -c "from reproductions.coverage_estimators import rewrite_docs; rewrite_docs()"

# the measured numbers of docs/convergence.md, docs/regularized.md and docs/uncertainty.md
# (house rule: numbers in the docs come from this JSON; about 10 minutes on one core)
docs-numbers: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce docs-numbers -o docs/results

# the measurements of docs/accounting.md and decisions 0051-0052 (correctness only, seconds):
# docs/results/accounting.json, then the tables between the docs' accounting-evidence markers
accounting-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/accounting_evidence.py

# the audits of docs/audit.md and decisions 0059-0060, 0071 (correctness only; every client through
# its command, memoized mechanisms as simulated devices): builds the Java client, then
# docs/results/audit.json and the tables between the docs' audit-evidence markers. More clients:
# AUDIT_WITH='--with NAME=CMD' (CMD with {spec} and {domain}, and {rounds} if it simulates devices)
audit: $(FULL_STAMP) $(CLIENTS_STAMP) java-client
	OPENBLAS_NUM_THREADS=1 $(PY) tools/audit_evidence.py $(AUDIT_WITH)

# the computed levels of the multi-attribute protocols and the sampled-attribute attack (correctness
# only, seconds): docs/results/multiattr.json (docs/multiattr.md, decision 0061)
multiattr-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/multiattr_evidence.py

# marginals and ranges on Adult (reproductions/multiattr_queries.py; decision 0063; correctness only):
# the full run (n up to 1e6, 5 runs) and the reduced one (n 1e4..1e5, 1 run; elapsed_seconds in its JSON), each
# followed by the table of docs/multiattr.md. Resumable: each (eps, n, run) cell is a file in
# out/multiattr-queries-cells/ (out/multiattr-queries-quick-cells/), a rerun skips the cells there;
# `make multiattr-queries-cells MAQ_CHUNK=i/m` runs chunk i of m only (m processes share the grid), and
# multiattr-queries-evidence then runs what is left and writes the record from the cells
MAQ_CHUNK ?= 0/1
multiattr-queries-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/multiattr_queries_cells.py run --out docs/results
	$(PY) tools/multiattr_queries_table.py

multiattr-queries-cells: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) tools/multiattr_queries_cells.py run --chunk $(MAQ_CHUNK)

# where one cell's CPU goes (cProfile; eps 1, n 1e6): out/multiattr-cell-profile.json (timings: a quiet machine)
multiattr-queries-profile: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(PY) benchmarks/multiattr_cell_profile.py

multiattr-queries-quick: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/localpriv reproduce multiattr-queries --quick -o docs/results
	$(PY) tools/multiattr_queries_table.py

# the evidence for the default estimator (reproductions/evidence.py; decision 0040): every registered
# frequency estimator and default_estimator on six data sets, 5 mechanisms, eps 0.5..4, n 1e4..1e6,
# 20 runs. Resumable: each cell is a file in out/estimator-evidence-cells/; EVIDENCE_CHUNK=i/m runs one
# of m chunks (start m processes, then `make estimator-evidence-report`). Many CPU hours: the estimate
# is in docs/results/estimator-evidence-quick.json (results.cpu); run it on a quiet machine.
EVIDENCE_CHUNK ?= 0/1
estimator-evidence: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) tools/estimator_evidence.py run --chunk $(EVIDENCE_CHUNK)
	$(PY) tools/estimator_evidence.py report

estimator-evidence-report: $(FULL_STAMP)
	$(PY) tools/estimator_evidence.py report

# the check of the pipeline: n 1e4 and 1e5, 5 runs (-> docs/results/estimator-evidence-quick.*, labelled a quick run)
estimator-evidence-quick: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) tools/estimator_evidence.py run --quick --chunk $(EVIDENCE_CHUNK)
	$(PY) tools/estimator_evidence.py report --quick

# after a change of the default under its name: its columns computed again in the quick cells there
estimator-evidence-quick-rerun-default: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) tools/estimator_evidence.py run --quick --existing-only --rerun auto default --chunk $(EVIDENCE_CHUNK)
	$(PY) tools/estimator_evidence.py report --quick

# a parametric bootstrap of the categorical candidates' TV risk against the default's rule (decision 0089;
# errors only, no timings: may run on a busy machine; -> benchmarks/results-default-tv-bootstrap.json)
default-tv-bootstrap: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/default_tv_bootstrap.py

# the default's regret (decisions 0076, 0087, 0089): 20 runs on the cells where it was behind in the quick run
# (reproductions/evidence.py REGRET_CELLS; -> docs/results/default-regret.* and the blocks of 0076 and 0087)
default-regret: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) tools/estimator_evidence.py run --regret --chunk $(EVIDENCE_CHUNK)
	$(PY) tools/estimator_evidence.py regret
	$(PY) tools/estimator_evidence.py regret --regret-doc docs/decisions/0087-default-on-categorical-data-by-a-tv-bound.md
	$(PY) tools/estimator_evidence.py regret --regret-doc docs/decisions/0089-power-by-gauss-legendre.md

# the evidence of decision 0001 (docs/results/estimator-accuracy.*; hours on one core; the committed
# JSON was run in pieces and merged)
estimator-accuracy-evidence: $(FULL_STAMP)
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

# the CPU of `localpriv advise` on its reference questions (k=100; the 2,352-cell grid, with and without a
# metric target) and, with --profile, where it goes (-> benchmarks/results-advise-cost.json; a quiet machine;
# `python benchmarks/advise_cost.py --quick` is a smoke run)
bench-advise: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/advise_cost.py --profile

# the default estimator on the metric mechanisms of the 2,352-cell grid (stated budgets against none:
# choice, evaluations, EMD, CPU), their FFT blocks against the dense channels, and OLH's analytic
# model against per-user simulation (-> benchmarks/results-grid-default.json; CPU needs a quiet
# machine; `python benchmarks/grid_default.py --quick` is a smoke run)
bench-grid-default: $(FULL_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/grid_default.py
