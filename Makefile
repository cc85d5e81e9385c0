# Every target sets up its own virtualenv in .venv: nothing is assumed installed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH_VERSION := 2.13.0

.PHONY: venv demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv
	# torch first, with pip: on these machines torch==2.13.0 (the CPU build) lies on local disk and pip
	# takes it from there; any other spec, or a package that pulls torch in first, downloads a CUDA build.
	$(BIN)/python -m pip install -q torch==$(TORCH_VERSION)
	# Then the frameworks the examples train with, with pip so that they keep that torch.
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)" lightning transformers accelerate tensorboard
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -q -e ".[dev,examples,mlflow]"
	$(BIN)/python -c "import torch, sys; v = torch.__version__.split('+')[0]; sys.exit(0 if v == '$(TORCH_VERSION)' else 'torch ' + torch.__version__ + ' was installed, not $(TORCH_VERSION)')"
	touch $(STAMP)

venv: $(STAMP)

# The main job: a real contract, end to end, on an embedded local Ray.
demo: $(STAMP)
	$(BIN)/plan validate examples/digits/contract.yaml
	$(BIN)/plan run examples/digits/contract.yaml --runs-dir runs
	$(BIN)/plan report "$$(ls -d runs/digits-adamw-vs-sgd/*/ | tail -n 1)" --format md

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The unit tier: no Ray, no subprocess, no browser (under a minute).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check planner tests bench examples
	$(BIN)/ruff format --check planner tests bench examples
	$(BIN)/python -m mypy

# make bench BENCH_ARGS="--before ../other-checkout": issue 23's table, before and after side by side (docs/speed.md)
bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache
