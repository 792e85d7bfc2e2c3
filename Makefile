# groupfit: `make run` serves the API on embedded defaults, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet

.PHONY: run test check docs demo demo-check bench fuzz fuzz-placement fuzz-cores openapi clean browser

# One virtualenv; each target installs what it needs on top (a stamp per set, redone when a pyproject changes).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

# The compiled core (native/, Rust via maturin; release build, cargo from ~/.cargo/bin); its build
# directory is kept, so a change rebuilds only what changed.
NATIVE := native/Cargo.toml native/Cargo.lock native/pyproject.toml $(wildcard native/src/*.rs)
export PATH := $(HOME)/.cargo/bin:$(PATH)

$(VENV)/.native: $(NATIVE) | $(BIN)/python
	CARGO_TARGET_DIR=$(CURDIR)/native/target $(PIP) ./native
	touch $@

$(VENV)/.runtime: pyproject.toml $(VENV)/.native | $(BIN)/python
	$(PIP) -e '.[local]'
	touch $@

$(VENV)/.all: pyproject.toml clients/python/pyproject.toml $(VENV)/.native | $(BIN)/python
	$(PIP) -e '.[test]' -e 'clients/python[kafka,controller]'
	touch $@ $(VENV)/.runtime

run: $(VENV)/.runtime
	$(BIN)/groupfit serve

check: $(VENV)/.all
	$(BIN)/ruff check app clients tests bench
	$(BIN)/ruff format --check app clients tests bench
	$(BIN)/mypy
	$(BIN)/mkdocs build --strict --quiet
	cd native && cargo fmt --check && cargo clippy --release --quiet -- -D warnings && cargo test --release --quiet
	$(BIN)/python -m pytest -q -m "not integration" $(PYTEST_ARGS)

# The documentation site (mkdocs.yml, docs/) into site/: offline, strict (a broken link fails it). The theme's
# banner about its successor (Zensical) is printed on every build otherwise.
export NO_MKDOCS_2_WARNING := 1
docs: $(VENV)/.all
	$(BIN)/mkdocs build --strict

test: $(VENV)/.all browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: $(VENV)/.all
	$(BIN)/groupfit demo

demo-check: $(VENV)/.all
	$(BIN)/groupfit demo --check 240

openapi: $(VENV)/.all
	$(BIN)/groupfit openapi --out openapi/openapi.json

bench: $(VENV)/.all
	$(BIN)/python bench/algorithms.py

# The fuzz campaigns (bench/fuzz.py): the whole API by its contract, replica placement (docs/placement-safety.md)
# and the two cores (below); FUZZ_SECONDS each, a seed from the clock. The suites in `make test` are deterministic.
FUZZ_SECONDS ?= 600
fuzz: $(VENV)/.all
	$(BIN)/python bench/fuzz.py --target all --seconds $(FUZZ_SECONDS) --cases $(FUZZ_CASES)

fuzz-placement: $(VENV)/.all
	$(BIN)/python bench/fuzz.py --target placement --seconds $(FUZZ_SECONDS)

# The differential fuzz of the two cores on extreme numbers (docs/compiled-core.md): FUZZ_CASES requests per
# algorithm, a seed from the clock (`make test` runs the same test on a fixed seed).
FUZZ_CASES ?= 2000
fuzz-cores: $(VENV)/.all
	$(BIN)/python bench/fuzz.py --target cores --cases $(FUZZ_CASES)

# The browser tests drive Debian's chromium (Playwright's own builds cannot be downloaded here); needs root.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache site
