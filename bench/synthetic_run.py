"""Write realistic synthetic run folders to the format of docs/run-folder.md.

For tests and benchmarks of everything that reads run folders (results, status,
report) while `plan run` is being built. Deterministic for a given `rng_seed`.

    from bench.synthetic_run import make_run
    run_dir = make_run(tmp_path / "run", arms=("sgd", "adam"), seeds=5,
                       tune_trials=12, reports_per_trial=20, with_failures=True)

The first arm is the baseline. With `with_failures`, the first tuning seed of
the first treatment arm holds, in order after the regular trials: one trial that
failed on both attempts (a traceback each), one that diverged (its metric stored
as "nan", as `plan run` writes non-finite values), one protocol error (a report
past the budget: not stored, named in the error) and one completed trial that reported
the held-out metric during tuning (a `heldout_in_tuning` violation). One
confirmation trial of the baseline needed a retry.

Command line: `python bench/synthetic_run.py OUT_DIR --trials 10000 --reports 100`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import yaml

CREATED = datetime(2026, 11, 29, 18, 17, 0, tzinfo=UTC)
# True improvement of each treatment arm over the baseline, cycled: accept, reject, inconclusive.
DEFAULT_EFFECTS = (0.03, 0.002, 0.012)
_REPORT = '{"step": %d, "metrics": {"val_acc": %.6f, "loss": %.6f}, "time_s": %.3f}'
_REPORT_HELDOUT = (
    '{"step": %d, "metrics": {"val_acc": %.6f, "loss": %.6f, "test_acc": %.6f}, "time_s": %.3f}'
)
_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/home/user/project/train.py", line 42, in train\n'
    "    loss = step(batch)\n"
    '  File "/home/user/project/train.py", line 17, in step\n'
    '    raise RuntimeError("CUDA error: an illegal memory access was encountered")\n'
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n")


def _wall_hours(
    arms: tuple[str, ...], seeds: list[int], tune_seeds: list[int], tune_trials: int, exposure: int
) -> int:
    """A wall-time budget the synthetic run fits in: 12 h, or more for a big run (2 slots, 0.5 s a
    step)."""
    trials = len(arms) * (len(seeds) + len(tune_seeds) * tune_trials)
    return max(12, math.ceil(trials * exposure * 0.5 / 2 * 1.5 / 3600))


def contract_dict(
    arms: tuple[str, ...],
    seeds: list[int],
    tune_seeds: list[int],
    tune_trials: int,
    exposure: int,
    heldout: bool,
    name: str = "optimizer-compare",
) -> dict[str, Any]:
    """The frozen contract (every default written out) of a synthetic run."""
    from planner._contract.model import Contract

    base, *treatments = arms
    raw = {
        "version": 1,
        "name": name,
        "hypothesis": (
            f"Tuned at the same budget, {', '.join(treatments)} reach a higher held-out accuracy "
            f"than {base} on the digits MLP at {exposure} epochs."
        ),
        "trainable": "examples.digits.train:train",
        "config": {"dir": "conf", "name": "digits", "overrides": ["model=mlp"]},
        "factor": {"name": "optimizer", "keys": ["optimizer"]},
        "baseline": {"name": base, "overrides": [f"optimizer={base}"]},
        "arms": [{"name": a, "overrides": [f"optimizer={a}"]} for a in treatments],
        "metric": {"name": "val_acc", "mode": "max", "heldout": "test_acc" if heldout else None},
        "acceptance": {"min_effect": 0.01, "alpha": 0.05, "test": "welch", "correction": "holm"},
        "seeds": seeds,
        "budget": {
            "unit": "epoch",
            "exposure": exposure,
            "max_wall_time": f"{_wall_hours(arms, seeds, tune_seeds, tune_trials, exposure)}h",
            "max_heldout_evaluations": 4 * len(arms) * len(seeds),
        },
        "tuning": {
            "trials_per_arm": tune_trials,
            "seeds": tune_seeds,
            "sampler": {"name": "tpe", "seed": 0},
            "space": {
                "optimizer.lr": {"log_uniform": [1.0e-4, 1.0]},
                "model.dropout": {"uniform": [0.0, 0.5]},
            },
            "early_stop": {"rule": "asha", "grace": max(1, exposure // 10), "reduction_factor": 3},
        },
        "failures": {"retries": 1},
        "data": {"fingerprint": ["data/digits.npz"]},
    }
    return Contract.model_validate(raw).frozen()


def _arm_config(arm: str, index: int) -> dict[str, Any]:
    optimizer: dict[str, Any] = {"name": arm, "lr": round(0.05 / (1 + 10 * index), 6)}
    if index == 0:
        optimizer["momentum"] = 0.9
    else:
        optimizer["betas"] = [0.9, 0.999]
        optimizer["weight_decay"] = 0.01 * (index % 2)
    return {
        "optimizer": optimizer,
        "model": {"name": "mlp", "width": 128, "layers": 2, "dropout": 0.1},
        "data": {"batch_size": 64, "split_seed": 0},
        "epochs": 30,
    }


class _Writer:
    """Lays trials out on two slots in time and writes their records."""

    def __init__(self, run_dir: Path, exposure: int, rng: np.random.Generator, sha: str):
        self.run_dir, self.exposure, self.rng, self.sha = run_dir, exposure, rng, sha
        self.slots = [0.0, 0.0]
        self.lines: list[str] = []
        self.events: list[str] = []
        self.step_s = 0.5

    def curve(
        self, quality: float, steps: np.ndarray, noise: float
    ) -> tuple[np.ndarray, np.ndarray]:
        e = self.exposure
        acc = (
            quality
            - (quality - 0.1) * np.exp(-4.0 * steps / e)
            + self.rng.normal(0, noise, steps.size)
        )
        loss = (
            2.3 * np.exp(-3.0 * steps / e) + (1 - quality) + self.rng.normal(0, noise, steps.size)
        )
        return np.clip(acc, 0.0, 1.0), np.abs(loss)

    def trial(
        self,
        *,
        trial_id: str,
        phase: str,
        arm: str,
        seed: int,
        index: int,
        params: dict,
        config: dict,
        status: str,
        reports: str,
        n_steps: int,
        attempts: int = 1,
        errors: list | None = None,
        violations: list | None = None,
    ) -> None:
        slot = int(np.argmin(self.slots))
        duration = round(max(n_steps, 1) * self.step_s * attempts + 0.2, 3)
        start = CREATED + timedelta(seconds=5 + self.slots[slot])
        self.slots[slot] += duration + 0.05
        record = {
            "trial_id": trial_id,
            "phase": phase,
            "arm": arm,
            "seed": seed,
            "index": index,
            "params": params,
            "config": config,
            "status": status,
            "exposure": n_steps,
            "reports": "@REPORTS@",
            "attempts": attempts,
            "errors": errors or [],
            "violations": violations or [],
            "started": _iso(start),
            "ended": _iso(start + timedelta(seconds=duration)),
            "duration_s": duration,
            "host": f"worker-{slot}",
            "pid": 4100 + slot,
            "contract_sha256": self.sha,
        }
        self.events.append(
            json.dumps(
                {
                    "event": "trial_started",
                    "time": _iso(start),
                    "trial_id": trial_id,
                    "arm": arm,
                    "phase": phase,
                    "seed": seed,
                }
            )
        )
        self.events.append(
            json.dumps(
                {
                    "event": "trial_ended",
                    "time": record["ended"],
                    "trial_id": trial_id,
                    "status": status,
                    "exposure": n_steps,
                }
            )
        )
        self.lines.append(json.dumps(record).replace('"@REPORTS@"', reports))

    def reports(
        self,
        acc: np.ndarray,
        loss: np.ndarray,
        first_step: int = 1,
        heldout: np.ndarray | None = None,
    ) -> str:
        n = acc.size
        steps = np.arange(first_step, first_step + n)
        times = steps * self.step_s + self.rng.uniform(0, 0.05, n)
        if heldout is None:
            values = np.column_stack([steps, acc, loss, times]).ravel()
            return "[" + ", ".join([_REPORT] * n) % tuple(values.tolist()) + "]"
        values = np.column_stack([steps, acc, loss, heldout, times]).ravel()
        return "[" + ", ".join([_REPORT_HELDOUT] * n) % tuple(values.tolist()) + "]"


def make_run(
    path: str | os.PathLike,
    *,
    arms: tuple[str, ...] | list[str] = ("sgd", "adam"),
    seeds: int | list[int] = 5,
    tune_trials: int = 8,
    tune_seeds: tuple[int, ...] | list[int] = (1000,),
    reports_per_trial: int = 20,
    with_failures: bool = True,
    heldout: bool = True,
    state: str = "completed",
    effects: tuple[float, ...] = DEFAULT_EFFECTS,
    torn: bool = False,
    early_stopped: float = 0.4,
    rng_seed: int = 0,
) -> Path:
    """Write a complete run folder at `path` (created) and return it.

    `early_stopped` is the share of regular tuning trials the scheduler stops
    early. `state="running"` writes a run stopped mid-tuning: a lock, about 60 % of the
    tuning trials, no selection or decisions. `torn=True` ends trials.jsonl with
    half a record, as a crash mid-write would.
    """
    run_dir = Path(path)
    (run_dir / "configs").mkdir(parents=True, exist_ok=True)
    arms = tuple(arms)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    exposure = reports_per_trial
    rng = np.random.default_rng(rng_seed)
    frozen = contract_dict(arms, seed_list, list(tune_seeds), tune_trials, exposure, heldout)
    (run_dir / "contract.yaml").write_text(yaml.safe_dump(frozen, sort_keys=False))
    sha = hashlib.sha256(
        json.dumps(frozen, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    run_id = run_dir.name
    _write_json(
        run_dir / "run.json",
        {
            "run_id": run_id,
            "name": frozen["name"],
            "contract_sha256": sha,
            "created": _iso(CREATED),
            "planner_version": "0.1.0",
            "contract_path": "/home/user/project/contract.yaml",
        },
    )
    _write_json(
        run_dir / "identity.json",
        {
            "contract_sha256": sha,
            "code": {
                "repo": "git@example.com:lab/digits.git",
                "commit": "3f1c2a9d8e7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a",
                "dirty": True,
                "diff_sha256": "9" * 64,
                "trainable": "examples.digits.train:train",
                "trainable_source_sha256": "a" * 64,
            },
            "python": "3.11.7",
            "packages": {
                "ray": "2.60.0",
                "optuna": "5.0.0",
                "torch": "2.9.1",
                "numpy": "2.3.4",
                "planner": "0.1.0",
                "scikit-learn": "1.7.2",
            },
            "host": {
                "hostname": "gpu-box-01",
                "platform": "Linux-6.8.0-x86_64-with-glibc2.36",
                "cpus": 2,
                "memory_bytes": 25_275_957_248,
            },
            "data": {"data/digits.npz": "b" * 64},
            "env": {"CUDA_VISIBLE_DEVICES": "0"},
        },
    )
    configs = {arm: _arm_config(arm, i) for i, arm in enumerate(arms)}
    for arm, config in configs.items():
        (run_dir / "configs" / f"{arm}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    quality = {
        arm: 0.90 + (0.0 if i == 0 else effects[(i - 1) % len(effects)])
        for i, arm in enumerate(arms)
    }
    best_lr = {arm: 10 ** (-1.3 - 1.5 * (i > 0)) for i, arm in enumerate(arms)}
    w = _Writer(run_dir, exposure, rng, sha)
    planned_tune, planned_confirm = [], []
    grace = frozen["tuning"]["early_stop"]["grace"]
    rungs = [r for r in (grace, grace * 3, grace * 9) if r < exposure]
    selection: dict[str, Any] = {}
    heldout_name = frozen["metric"]["heldout"]

    for a, arm in enumerate(arms):
        for ts in tune_seeds:
            best, n_full = None, 0
            for t in range(tune_trials):
                tid = f"tune-{arm}-s{ts}-t{t:03d}"
                planned_tune.append(
                    {"trial_id": tid, "phase": "tune", "arm": arm, "seed": ts, "index": t}
                )
                lr = float(10 ** rng.uniform(-4, 0))
                dropout = float(rng.uniform(0, 0.5))
                params = {"optimizer.lr": round(lr, 8), "model.dropout": round(dropout, 4)}
                config = json.loads(json.dumps(configs[arm]))
                config["optimizer"]["lr"], config["model"]["dropout"] = (
                    params["optimizer.lr"],
                    params["model.dropout"],
                )
                q = (
                    quality[arm]
                    - 0.04 * (math.log10(lr) - math.log10(best_lr[arm])) ** 2
                    - 0.05 * (dropout - 0.1) ** 2
                )
                special = None
                if with_failures and a == 1 and ts == tune_seeds[0] and t >= tune_trials - 4:
                    special = ("failed", "diverged", "protocol_error", "heldout")[
                        t - (tune_trials - 4)
                    ]
                if special is None:
                    stop = (
                        rungs[int(rng.integers(len(rungs)))]
                        if rungs and rng.random() < early_stopped
                        else exposure
                    )
                    acc, loss = w.curve(q, np.arange(1, stop + 1), 0.004)
                    status = "completed" if stop == exposure else "early_stopped"
                    w.trial(
                        trial_id=tid,
                        phase="tune",
                        arm=arm,
                        seed=ts,
                        index=t,
                        params=params,
                        config=config,
                        status=status,
                        reports=w.reports(acc, loss),
                        n_steps=stop,
                    )
                    n_full += status == "completed"
                    if status == "completed" and (best is None or acc[-1] > best[2]):
                        best = (tid, params, float(acc[-1]))
                else:
                    _special_trial(w, special, tid, arm, ts, t, params, config, q, heldout_name)
            if best is not None:
                selection[arm] = {
                    "arm": arm,
                    "trial_id": best[0],
                    "params": best[1],
                    "score": round(best[2], 6),
                    "candidates": n_full,
                    "trials": tune_trials,
                    "reason": "best final val_acc",
                }

    finals: dict[str, list[float]] = {arm: [] for arm in arms}
    for a, arm in enumerate(arms):
        sel = selection.get(arm, {"trial_id": None, "params": {}})
        for s in seed_list:
            tid = f"confirm-{arm}-s{s}"
            planned_confirm.append(
                {"trial_id": tid, "phase": "confirm", "arm": arm, "seed": s, "index": 0}
            )
            config = json.loads(json.dumps(configs[arm]))
            acc, loss = w.curve(quality[arm], np.arange(1, exposure + 1), 0.004)
            test = np.full(exposure, np.nan)
            test_final = float(np.clip(acc[-1] - 0.01 + rng.normal(0, 0.006), 0, 1))
            test[-1] = test_final
            finals[arm].append(test_final if heldout else float(acc[-1]))
            retried = with_failures and a == 0 and s == seed_list[0]
            errors = (
                [
                    {
                        "attempt": 1,
                        "type": "RuntimeError",
                        "message": "CUDA error: an illegal memory access was encountered",
                        "traceback": _TRACEBACK,
                    }
                ]
                if retried
                else []
            )
            reports = w.reports(acc[:-1], loss[:-1])[:-1]
            last = w.reports(
                acc[-1:], loss[-1:], first_step=exposure, heldout=test[-1:] if heldout else None
            )[1:]
            reports = (reports + ", " + last) if exposure > 1 else "[" + last
            w.trial(
                trial_id=tid,
                phase="confirm",
                arm=arm,
                seed=s,
                index=0,
                params=sel["params"],
                config=config,
                status="completed",
                reports=reports,
                n_steps=exposure,
                attempts=2 if retried else 1,
                errors=errors,
            )

    planned = planned_tune + planned_confirm
    _write_json(
        run_dir / "plan.json",
        {
            "planned_count": len(planned),
            "exposure": exposure,
            "max_trials": None,
            "phases": [
                {"phase": "tune", "count": len(planned_tune), "trials": planned_tune},
                {"phase": "confirm", "count": len(planned_confirm), "trials": planned_confirm},
            ],
        },
    )
    n_tune = sum(1 for line in w.lines if '"phase": "tune"' in line)
    lines = w.lines
    if state == "running":
        lines = w.lines[: int(n_tune * 0.6)]
    with open(run_dir / "trials.jsonl", "w") as f:
        for line in lines:
            f.write(line + "\n")
        if torn:
            f.write(w.lines[len(lines) % len(w.lines)][:150])
    wall = round(max(w.slots) + 5, 3)
    with open(run_dir / "events.jsonl", "w") as f:
        f.write(
            json.dumps({"event": "run_started", "time": _iso(CREATED), "run_id": run_id}) + "\n"
        )
        for line in w.events[: 2 * len(lines) + (1 if state == "running" else 0)]:
            f.write(line + "\n")
    reason = {
        "completed": "all planned trials ended",
        "running": "tuning",
        "budget_exhausted": f"budget.max_wall_time ({frozen['budget']['max_wall_time']}) reached",
        "interrupted": "stopped by SIGINT",
        "failed": "the planner could not go on",
    }.get(state, state)
    _write_json(
        run_dir / "state.json",
        {
            "state": state,
            "updated": _iso(CREATED + timedelta(seconds=wall)),
            "reason": reason,
            "budget": {"wall_time_s": wall, "trials_ended": len(lines)},
        },
    )
    if state == "running":
        _write_json(
            run_dir / "lock", {"pid": 31337, "host": "gpu-box-01", "started": _iso(CREATED)}
        )
        return run_dir
    _write_json(
        run_dir / "selection.json",
        {"rule": "final", "k": None, "metric": "val_acc", "mode": "max", "arms": selection},
    )
    _write_json(run_dir / "decisions.json", decide(frozen, finals, state))
    return run_dir


def _special_trial(
    w: _Writer,
    kind: str,
    tid: str,
    arm: str,
    ts: int,
    t: int,
    params: dict,
    config: dict,
    q: float,
    heldout_name: str | None,
) -> None:
    e = w.exposure
    common = {
        "trial_id": tid,
        "phase": "tune",
        "arm": arm,
        "seed": ts,
        "index": t,
        "params": params,
        "config": config,
    }
    if kind == "failed":
        n = max(1, e // 3)
        acc, loss = w.curve(q, np.arange(1, n + 1), 0.004)
        errors = [
            {
                "attempt": i,
                "type": "RuntimeError",
                "message": "CUDA error: an illegal memory access was encountered",
                "traceback": _TRACEBACK,
            }
            for i in (1, 2)
        ]
        w.trial(
            **common,
            status="failed",
            reports=w.reports(acc, loss),
            n_steps=n,
            attempts=2,
            errors=errors,
        )
    elif kind == "diverged":
        n = max(1, e // 2)
        acc, loss = w.curve(q, np.arange(1, n + 1), 0.004)
        reports = [
            {
                "step": i + 1,
                "metrics": {"val_acc": float(acc[i]), "loss": float(loss[i])},
                "time_s": round((i + 1) * w.step_s, 3),
            }
            for i in range(n)
        ]
        reports[-1]["metrics"] = {
            "val_acc": "nan",
            "loss": "inf",
        }  # JSON has no NaN: stored as strings
        w.trial(
            **common,
            status="diverged",
            reports=json.dumps(reports),
            n_steps=n,
            violations=[{"kind": "diverged", "step": n, "message": f"val_acc is nan at step {n}"}],
        )
    elif kind == "protocol_error":
        # The runner stops the trial at the bad report: it is not stored, the error says it.
        acc, loss = w.curve(q, np.arange(1, e + 1), 0.004)
        message = f"trial.report: step {e + 1} is past the budget of {e}"
        errors = [
            {
                "attempt": 1,
                "type": "TrialProtocolError",
                "message": message,
                "traceback": 'Traceback (most recent call last):\n  File "train.py", line 51, in '
                "train\n"
                "    trial.report(epoch, val_acc=acc)\n"
                f"planner.TrialProtocolError: {message}\n",
            }
        ]
        w.trial(
            **common,
            status="protocol_error",
            reports=w.reports(acc, loss),
            n_steps=e,
            errors=errors,
        )
    elif kind == "heldout":
        acc, loss = w.curve(q, np.arange(1, e + 1), 0.004)
        step = min(3, e)
        parts = json.loads(w.reports(acc, loss))
        if heldout_name:
            parts[step - 1]["metrics"][heldout_name] = round(float(acc[step - 1]) - 0.01, 6)
        violations = (
            [{"kind": "heldout_in_tuning", "step": step, "metric": heldout_name}]
            if heldout_name
            else []
        )
        w.trial(
            **common,
            status="completed",
            reports=json.dumps(parts),
            n_steps=e,
            violations=violations,
        )


def decide(frozen: dict[str, Any], finals: dict[str, list[float]], state: str) -> dict[str, Any]:
    """Welch's test with Holm's correction, the rule of CONTRACT.md, for the synthetic
    decisions.json.

    Student's t quantiles by the Cornish-Fisher expansion (good to about 1e-4 for
    df >= 3), so that writing a synthetic run does not pay for importing scipy.
    """
    acc = frozen["acceptance"]
    base_name = frozen["baseline"]["name"]
    base = np.asarray(finals[base_name])
    rows = []
    for arm in [a["name"] for a in frozen["arms"]]:
        x = np.asarray(finals[arm])
        va, vb = x.var(ddof=1) / x.size, base.var(ddof=1) / base.size
        df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (base.size - 1))
        t = (x.mean() - base.mean()) / math.sqrt(va + vb)
        rows.append({"arm": arm, "x": x, "df": df, "p": _t_two_sided_p(abs(float(t)), df)})
    order = sorted(range(len(rows)), key=lambda i: rows[i]["p"])
    m = len(rows)
    decisions = []
    for rank, i in enumerate(order):
        r = rows[i]
        alpha_adj = acc["alpha"] / (m - rank)
        x = r["x"]
        effect = float(x.mean() - base.mean())
        se = math.sqrt(x.var(ddof=1) / x.size + base.var(ddof=1) / base.size)
        half = _t_quantile(1 - alpha_adj / 2, r["df"]) * se
        lo, hi = effect - half, effect + half
        if lo > 0 and effect >= acc["min_effect"]:
            decision, reason = "accept", "the CI is above 0 and the effect reaches min_effect"
        elif hi < acc["min_effect"]:
            decision, reason = "reject", "the CI lies below min_effect"
        else:
            decision, reason = "inconclusive", "the CI straddles min_effect"
        decisions.append(
            {
                "arm": r["arm"],
                "decision": decision,
                "effect": round(effect, 6),
                "ci_low": round(lo, 6),
                "ci_high": round(hi, 6),
                "p_value": float(f"{r['p']:.6g}"),
                "alpha_adjusted": round(alpha_adj, 6),
                "n_baseline": int(base.size),
                "n_arm": int(x.size),
                "reason": reason,
            }
        )
    decisions.sort(key=lambda d: [a["name"] for a in frozen["arms"]].index(d["arm"]))
    metric = frozen["metric"]["heldout"] or frozen["metric"]["name"]
    return {
        "run_state": state,
        "metric": metric,
        "test": acc["test"],
        "alpha": acc["alpha"],
        "correction": acc["correction"],
        "min_effect": acc["min_effect"],
        "decisions": decisions,
    }


def _t_quantile(p: float, df: float) -> float:
    from statistics import NormalDist

    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _t_two_sided_p(t: float, df: float) -> float:
    lo, hi = 0.5, 1.0 - 1e-12
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_quantile(mid, df) < t else (lo, mid)
    return 2 * (1 - lo)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the run folder to create")
    parser.add_argument("--trials", type=int, default=200, help="about this many trials in all")
    parser.add_argument(
        "--reports", type=int, default=30, help="reports per complete trial (the exposure)"
    )
    parser.add_argument("--arms", nargs="+", default=["sgd", "adam", "adamw"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--state", default="completed")
    args = parser.parse_args(argv)
    tune_trials = max(5, (args.trials - len(args.arms) * args.seeds) // len(args.arms))
    make_run(
        args.out,
        arms=tuple(args.arms),
        seeds=args.seeds,
        tune_trials=tune_trials,
        reports_per_trial=args.reports,
        state=args.state,
    )
    print(args.out)


if __name__ == "__main__":
    main()
