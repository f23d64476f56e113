# localpriv: every target creates or refreshes the virtual environment from the pinned lock.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: demo test bench bench-memory bench-uncertainty venv clean

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP) requirements-bench.lock
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-bench.lock
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(VENV)/bin/localpriv demo --out out/demo

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

bench: $(BENCH_STAMP)
	$(PY) benchmarks/run_all.py

bench-memory: $(STAMP)
	$(PY) benchmarks/run_all.py memory

bench-uncertainty: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) benchmarks/run_all.py uncertainty

clean:
	rm -rf $(VENV) out
