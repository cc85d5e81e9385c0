# Every target sets up its own virtualenv in .venv: nothing is assumed installed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH_VERSION := 2.13.0

.PHONY: venv demo test test-fast lint bench clean

# The install, one echo a step (it takes minutes). torch goes first, with pip: on these machines
# torch==$(TORCH_VERSION) (the CPU build) lies on local disk and pip takes it from there; any other
# spec, or a package that pulls torch in first, downloads a CUDA build. Then the frameworks the
# examples train with, with pip so that they keep that torch; then planner itself, editable, with uv.
# Its own sources are byte-compiled once, as an install compiles site-packages: where
# PYTHONDONTWRITEBYTECODE is set (CI's machines), every Ray worker would compile the planner modules
# and trainables it imports, and keep nothing.
$(STAMP): pyproject.toml
	@echo "make: creating the virtual environment $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@echo "make: installing pip and uv"
	@$(BIN)/python -m pip install -q --upgrade pip uv
	@echo "make: installing torch $(TORCH_VERSION) (CPU)"
	@$(BIN)/python -m pip install -q torch==$(TORCH_VERSION)
	@echo "make: installing lightning, transformers, accelerate, tensorboard (keeping that torch)"
	@$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)" lightning transformers accelerate tensorboard
	@echo "make: installing planner with its dev, examples and mlflow extras"
	@$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -q -e ".[dev,examples,mlflow]"
	@echo "make: byte-compiling planner, tests and examples (an editable install leaves them to each process)"
	@$(BIN)/python -m compileall -q planner tests examples
	@$(BIN)/python -c "import torch, sys; v = torch.__version__.split('+')[0]; sys.exit(0 if v == '$(TORCH_VERSION)' else 'torch ' + torch.__version__ + ' was installed, not $(TORCH_VERSION)')"
	@touch $(STAMP)

venv: $(STAMP)

# The main job: a real contract, end to end, on an embedded local Ray; the report of the run it made.
demo: $(STAMP)
	@echo "make: plan validate examples/digits/contract.yaml"
	@$(BIN)/plan validate examples/digits/contract.yaml
	@echo "make: plan run examples/digits/contract.yaml --runs-dir runs"
	@$(BIN)/plan run examples/digits/contract.yaml --runs-dir runs
	@echo "make: plan report runs/digits-adamw-vs-sgd/latest"
	@$(BIN)/plan report runs/digits-adamw-vs-sgd/latest --format md

# The cluster tier first, on four workers: its nodes are real `ray start` processes on ports the OS
# picks, in temp folders of their own, and its tests mostly wait on nodes starting and dying, so
# four share the two cores, and CI runs its lowest-versions smoke beside it (.ci/run). Tests that
# share a cluster carry one `xdist_group` (`--dist loadgroup`); the others go one at a time.
# Then the unit tier on both cores (pytest-xdist: its tests share nothing); then the e2e and
# browser tiers on both cores, a module to a worker (a module's shared runs are made once, and
# each test's Ray, folders and processes are its own).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 4 --dist loadgroup tests/cluster $(PYTEST_ARGS)
	$(BIN)/python -m pytest -q -n 2 tests/unit $(PYTEST_ARGS)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests/e2e tests/browser $(PYTEST_ARGS)

# The unit tier: no Ray, no subprocess, no browser (under a minute).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests/unit $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check planner tests bench examples
	$(BIN)/ruff format --check planner tests bench examples
	$(BIN)/python -m mypy

# make bench BENCH_ARGS="--before ../other-checkout": issue 23's table, before and after side by side (docs/speed.md)
bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache
