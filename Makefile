# Developer and CI entry points. Every target runs scripts/bootstrap first, which is quick
# when nothing is missing, so a fresh Debian 12 machine needs only `make test`.

VENV := .venv
BIN := $(VENV)/bin
CHECKED := src tests bench examples
ARGS ?=
PYTEST_ARGS ?=

.PHONY: bootstrap demo test lint bench

bootstrap:
	scripts/bootstrap

demo: bootstrap
	$(BIN)/ordo demo $(ARGS)

lint: bootstrap
	$(BIN)/ruff check $(CHECKED)
	$(BIN)/ruff format --check . # the docs' Python blocks too
	$(BIN)/mypy $(CHECKED)

# CI runs more Hypothesis examples than the `dev` default; override with HYPOTHESIS_PROFILE=dev.
# The 20 slowest tests are listed at the end, so a CI log shows where its minutes went.
test: export HYPOTHESIS_PROFILE ?= ci
test: lint
	$(BIN)/pytest --durations=20 $(PYTEST_ARGS)

bench: bootstrap
	@set -e; for script in $(sort $(wildcard bench/*.py)); do \
		echo "bench: $$script" >&2; \
		$(BIN)/python "$$script"; \
	done
