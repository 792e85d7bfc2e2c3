# groupfit: `make run` serves the API on embedded defaults, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test demo demo-check bench openapi clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' -e 'clients/python[kafka]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/groupfit serve

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/groupfit demo

demo-check: $(STAMP)
	$(BIN)/groupfit demo --check 240

openapi: $(STAMP)
	$(BIN)/groupfit openapi --out openapi/openapi.json

bench: $(STAMP)
	$(BIN)/python bench/algorithms.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
