PYTHON ?= python3

.PHONY: test lit lint types format bench bench-aot docs

# Everything: the unit tests and, through test/unit/test_lit.py, the lit suite.
test:
	$(PYTHON) -m pytest

# Only the lit (FileCheck) suite.
lit:
	$(PYTHON) -c "import lit.main; lit.main.main()" -v test/lit

lint:
	$(PYTHON) -m ruff check dlc tools test
	$(PYTHON) -m ruff format --check dlc tools test

# The type checker on dlc/ ([tool.mypy] in pyproject.toml; a cold run takes minutes).
types:
	$(PYTHON) -m mypy dlc

format:
	$(PYTHON) -m ruff format dlc tools test

# dlc against NumPy on the BENCHMARKS.md workloads (a few minutes).
bench:
	$(PYTHON) tools/bench.py

# Ahead-of-time libraries: export time, one call from C next to one from Python.
bench-aot:
	$(PYTHON) tools/bench_aot.py

# The documentation site (mkdocs.yml) into site/, warnings as errors.
docs:
	$(PYTHON) -m mkdocs build --strict
