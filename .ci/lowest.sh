#!/usr/bin/env bash
# The e2e smoke with the lowest versions pyproject.toml admits for ray, optuna, hydra-core, pandas and
# pydantic, in a venv of its own (.venv-lowest), so that pyproject's lower bounds are versions CI ran.
# The bounds are read from pyproject.toml itself: raising one there is the whole change.
#
#     bash .ci/lowest.sh            # the install, then the smoke
#     bash .ci/lowest.sh install    # .ci/run: the install only, beside `make lint`'s own
#     bash .ci/lowest.sh smoke      # .ci/run: the smoke only, after `make test`
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-lowest
PYTHON=${PYTHON:-python3}
TORCH_VERSION=$(sed -n 's/^TORCH_VERSION := //p' Makefile)
STEP=${1:-all}
case "$STEP" in
  all | install | smoke) ;;
  *) echo "lowest.sh: no step $STEP (all, install or smoke)" >&2; exit 2 ;;
esac
start=$(date +%s)

if [ "$STEP" != smoke ]; then
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip uv
# torch first, with pip, as the Makefile installs it: torch==$TORCH_VERSION (the CPU build) lies on local
# disk and pip takes it from there; any other spec, or a package that pulls torch in first, downloads a
# CUDA build. Not byte-compiled here (most of the install's time): the smoke compiles what it imports,
# once (below).
"$VENV/bin/python" -m pip install -q --no-compile "torch==$TORCH_VERSION"

# `name==lower bound` for each package of the five, from pyproject's dependencies.
pins=$("$VENV/bin/python" - <<'EOF'
import re
import tomllib

LOWEST = ("ray", "optuna", "hydra-core", "pandas", "pydantic")
with open("pyproject.toml", "rb") as handle:
    dependencies = tomllib.load(handle)["project"]["dependencies"]
found = {}
for spec in dependencies:
    match = re.match(r"\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)", spec)
    name, extras, ranges = match.group(1), match.group(2) or "", match.group(3)
    low = re.search(r">=\s*([^,;\s]+)", ranges)
    if name in LOWEST and low:
        found[name] = f"{name}{extras}=={low.group(1)}"
missing = [name for name in LOWEST if name not in found]
if missing:
    raise SystemExit(f"lowest.sh: pyproject.toml gives no lower bound for {', '.join(missing)}")
print(" ".join(found[name] for name in LOWEST))
EOF
)
echo "lowest: $pins"
# shellcheck disable=SC2086 # one argument a pin
# planner's dependencies only (read from pyproject.toml, nothing built): the install may run beside
# `make`'s, whose editable install of planner writes planner.egg-info in this tree; the smoke step
# installs planner itself, alone.
"$VENV/bin/uv" pip install --python "$VENV/bin/python" -q $pins -r pyproject.toml "pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.5"
"$VENV/bin/python" -c "import torch, sys; v = torch.__version__.split('+')[0]; sys.exit(0 if v == '$TORCH_VERSION' else 'torch ' + torch.__version__ + ' was installed, not $TORCH_VERSION')"
"$VENV/bin/python" -m pip list 2>/dev/null | grep -iE '^(ray|optuna|hydra-core|omegaconf|pandas|pydantic|numpy|torch) '
echo "lowest: installed in $(($(date +%s) - start)) s"
fi
[ "$STEP" != install ] || exit 0
"$VENV/bin/uv" pip install --python "$VENV/bin/python" -q --no-deps -e .

# The smoke: the private names' check, a resumed sweep's study (OptunaSearch), validate's composing
# (Hydra, pydantic) and plan run end to end (Ray Tune, Optuna, pandas): tuning with each sampler and
# early-stopping rule, a decision, a resumed sweep.
# On both cores: these tests share no run (each makes its own folder), so each may go to either
# worker, and a worker's Ray serves every test it gets.
# Bytecode is written as it is first compiled, whatever the environment asks: with
# PYTHONDONTWRITEBYTECODE set (as on CI's machines), every Ray worker compiled Ray, pandas and Optuna
# from source again, twice the smoke's CPU.
unset PYTHONDONTWRITEBYTECODE
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -n 2 \
  tests/unit/test_compat.py tests/unit/test_resumed_study.py tests/e2e/test_cli_validate.py \
  tests/e2e/test_run_e2e.py -k "test_compat or test_resumed_study or test_cli_validate \
      or strong_effect or matched_budget or grid_sampler or partial_tuning_sweep or resumed_sweep_draws"
echo "lowest: done in $(($(date +%s) - start)) s"
