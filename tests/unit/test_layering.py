"""The package's layering (docs/architecture.md), enforced on the source.

Each stage lives in one private subpackage with a rank; a module may import
its own subpackage and any subpackage of lower rank, never a higher one. The
leaf modules of `_core` import nothing of planner's. No import cycle between
modules, no private name imported across subpackages, and the heavy libraries
only where their boundary is. A deferred import (`lazy_import("x")`, planner._core.lazy)
counts as an import of x.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import planner

ROOT = Path(planner.__file__).parent

# Lower rank = more basic. A module imports only its own stage and lower ranks. The gaps leave room
# for new stages between two existing ones.
RANKS = {
    "_core": 0,  # errors, diagnostics, redaction, records, text: leaves
    "_stats": 10,  # decision rule, power, sequential looks, selection: pure
    "_contract": 20,  # load, model, compose, rules, validate
    "_store": 30,  # the run folder: writer, one reader, JSON lines, lock, resume, identity
    "_lineage": 35,  # the project ledger, promotion, baselines from runs, plan log
    "_plan": 40,  # planned trials, space, estimate, pilot, seeds
    "_data": 45,  # splits: counts, fingerprints, overlap and matching checks: pure
    "_trial": 50,  # the trainable protocol in the worker: attempts, limits, command
    "_results": 60,  # tables, status, reports, plots, MLflow
    "_audit": 65,  # plan audit: findings, missing evidence, the next control (reads via _store)
    "_dispatch": 70,  # the driver: Ray Tune and Optuna, confirmation, cluster, progress
    "_reeval": 80,  # re-running a logged arm (shares the driver)
    "_cli": 90,  # parses and prints
}
# Heavy or process-touching libraries, and the only stages that may import them.
BOUNDARIES = {
    "ray": {"_dispatch", "_reeval"},
    # the run's studies; a space's Optuna form (_plan); the report's parameter importance (_results)
    "optuna": {"_plan", "_results", "_dispatch"},
    "pandas": {"_results"},
    "matplotlib": set(),  # the report draws with plotly: no stage draws with matplotlib
    "plotly": {"_results"},
    "jinja2": {"_results"},
    "mlflow": {"_results"},
}
# Libraries bound to named modules, not whole stages: SciPy to the statistics and the few planning
# and audit modules that call it, Hydra and OmegaConf to composing configs (and the command
# trainable's config check), pydantic to the contract model and the code that checks data against
# it.
MODULE_BOUNDARIES = {
    "scipy": {
        "planner._stats.decide",
        "planner._stats.power",
        "planner._stats.sequential",
        "planner._plan.seeds",
        "planner._audit.findings",
    },
    "hydra": {"planner._contract.compose"},
    # rich lays out the text tables (one helper) and draws the live table of a run
    "rich": {"planner._core.text_tables", "planner._dispatch.progress"},
    "lightning": {"planner._trial.lightning"},  # planner.LightningCallback, loaded on first use
    "omegaconf": {
        "planner._contract.compose",
        "planner._contract.paths",
        "planner._trial.config_check",
    },
    "pydantic": {
        "planner._contract.model",
        "planner._contract.schema_errors",
        "planner._contract.validate",
        "planner._audit.control",  # the next control's contract, checked by the model
        "planner._reeval.prepare",
    },  # the frozen contract, loaded back by the model
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


@functools.cache
def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names imported from it, line) for every import, local and deferred ones
    included (each file parsed once: several tests read them)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "lazy_import"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, [], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, (
                f"{path}:{node.lineno}: relative import; planner uses absolute ones"
            )
            names = [a.name for a in node.names]
            base = node.module or ""
            found.append((base, names, node.lineno))
            # `from planner._x import mod` imports a module too
            found += [(f"{base}.{n}", [], node.lineno) for n in names]
    return found


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "planner" and parts[1] in RANKS else None


MODULES = _modules()


def test_every_module_lives_in_a_stage():
    loose = [
        m
        for m in MODULES
        if m.count(".") == 1
        and m not in ("planner.__main__", "planner.stats")
        and _stage(m) is None
    ]
    assert not loose, f"modules outside a stage folder: {loose}"


def test_no_upward_import_and_no_private_name_across_stages():
    problems = []
    for module, path in MODULES.items():
        own = _stage(module)
        if own is None:
            continue
        for target, names, line in _imports(path):
            other = _stage(target)
            if other is None:
                if target == "planner" and names:
                    problems.append(f"{path.name}:{line} imports from the package root: {names}")
                continue
            if own == "_core" and other is not None and other != own:
                problems.append(f"{module}:{line}: _core is a leaf, imports {target}")
            if RANKS[other] > RANKS[own]:
                problems.append(
                    f"{module}:{line}: upward import of {target} ({other} ranks above {own})"
                )
            if other != own:
                private = [n for n in names if n.startswith("_") and f"{target}.{n}" not in MODULES]
                if private:
                    problems.append(f"{module}:{line}: private names {private} from {target}")
    assert not problems, "\n".join(problems)


def test_no_import_cycle():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for target, _, _ in _imports(path):
            if target in MODULES and target != module and target != "planner":
                graph[module].add(target)
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(
                    " -> ".join(stack[stack.index(nxt) :] + [node, nxt])
                    if nxt in stack
                    else f"{node} -> {nxt}"
                )
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _outside(boundaries: dict[str, set[str]], place) -> list[str]:
    """Imports of a bound library from a module whose `place(module)` (its stage, or its name) is
    not allowed."""
    problems = []
    for module, path in MODULES.items():
        for target, _, line in _imports(path):
            top = target.split(".")[0]
            if top in boundaries and place(module) not in boundaries[top]:
                problems.append(
                    f"{module}:{line} imports {top} (allowed only in {sorted(boundaries[top])})"
                )
    return problems


def test_heavy_libraries_only_at_their_boundary():
    problems = _outside(BOUNDARIES, _stage)
    assert not problems, "\n".join(problems)


def test_scipy_hydra_pydantic_and_rich_only_in_their_modules():
    problems = _outside(MODULE_BOUNDARIES, lambda module: module)
    assert not problems, "\n".join(problems)


def test_a_deferred_import_is_seen_as_an_import():
    """The boundary tests above read `lazy_import("...")`: a deferred import cannot slip past
    them."""
    source = (ROOT / "_cli" / "main.py").read_text()
    assert (
        "import planner._dispatch" not in source and "from planner._dispatch" not in source
    )  # only deferred
    assert "planner._dispatch.driver" in {
        target for target, _, _ in _imports(ROOT / "_cli" / "main.py")
    }
