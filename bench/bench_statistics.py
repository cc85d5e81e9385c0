"""Measure the statistics' calibration, power and sequential savings; write them as markdown tables.

    PYTHONPATH=. python bench/bench_statistics.py            # rewrites the figures block of
    docs/statistics.md PYTHONPATH=. python bench/bench_statistics.py --stdout   # prints the tables
    instead

Every figure in docs/statistics.md's "Measured figures" section comes from
this script: fixed RNG seeds, so a rerun gives the same tables. It runs for
a minute or two on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # run as a script: the repo's planner and tests

from planner._contract.model import Acceptance  # noqa: E402
from planner._stats.decide import _welch_t, adjusted_alphas, decide, verdict  # noqa: E402
from planner._stats.power import (  # noqa: E402
    accept_probability,
    detectable_effect,
    detection_power,
    draw,
    seeds_for_power,
    simulate,
)
from planner._stats.sequential import plan_design, simulate_design  # noqa: E402
from tests._percentile_bootstrap import percentile_bootstrap  # noqa: E402  (the counter-example)

ALPHA = 0.05
DOC = Path(__file__).resolve().parent.parent / "docs" / "statistics.md"
START, END = "<!-- figures:start -->", "<!-- figures:end -->"


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def binomial_bound(rate: float, sims: int) -> float:
    return stats.binom.isf(1e-3, sims, rate) / sims


def worked_example() -> str:
    """The doc's worked example: two arms against a baseline, 5 seeds, holm."""
    seeds = [0, 1, 2, 3, 4]
    results = {
        "sgd": list(zip(seeds, [0.912, 0.905, 0.918, 0.909, 0.914], strict=True)),
        "adamw": list(zip(seeds, [0.931, 0.926, 0.935, 0.924, 0.933], strict=True)),
        "lion": list(zip(seeds, [0.915, 0.908, 0.921, 0.910, 0.916], strict=True)),
    }
    acceptance = Acceptance(min_effect=0.01, alpha=0.05, test="welch", correction="holm")
    lines = [
        "```python",
        'acceptance = Acceptance(min_effect=0.01, alpha=0.05, test="welch", correction="holm")',
        "results = {",
    ]
    lines += [f"    {arm!r}: {[round(v, 3) for _, v in pairs]}," for arm, pairs in results.items()]
    lines += [
        "}  # values by seed 0..4",
        'decide(acceptance, "max", results, "sgd", planned_seeds=[0, 1, 2, 3, 4], '
        'metric="val_acc")',
        "```",
        "",
    ]
    rows = []
    for d in decide(acceptance, "max", results, "sgd", planned_seeds=seeds, metric="val_acc"):
        rows.append(
            [
                d.arm,
                d.decision,
                f"{d.effect:+.4f}",
                f"{d.ci_low:.4f}",
                f"{d.ci_high:.4f}",
                f"{d.p_value:.5f}",
                f"{d.alpha_adjusted:.4f}",
                d.reason,
            ]
        )
    return (
        "\n".join(lines)
        + "\n"
        + table(
            [
                "arm",
                "decision",
                "effect",
                "ci_low",
                "ci_high",
                "p_value",
                "alpha_adjusted",
                "reason",
            ],
            rows,
        )
    )


def a_a_table() -> str:
    sims = {"welch": 100_000, "paired": 100_000, "bootstrap": 4_000}
    rows = []
    for test in ("welch", "paired", "bootstrap"):
        for distribution in ("normal", "lognormal"):
            cells = []
            for n in (3, 5, 10):
                r = simulate(
                    test,
                    n,
                    0.0,
                    alpha=ALPHA,
                    min_effect=1e-9,
                    sims=sims[test],
                    distribution=distribution,
                    correlation=0.5 if test == "paired" else 0.0,
                    rng_seed=n,
                    permutations=1_999,
                )
                cells.append(f"{r.detected:.4f}")
            rows.append(
                [
                    test,
                    distribution,
                    sims[test],
                    *cells,
                    f"{binomial_bound(ALPHA / 2, sims[test]):.4f}",
                ]
            )
    for test in ("welch", "bootstrap"):
        cells = []
        for n in (3, 5, 10):
            r = simulate(
                test,
                n,
                0.0,
                alpha=ALPHA,
                min_effect=1e-9,
                sims=sims[test],
                rng_seed=50 + n,
                permutations=1_999,
                arm_sd_ratio=3.0,
            )
            cells.append(f"{r.detected:.4f}")
        rows.append(
            [
                test,
                "normal, arm sd x 3 (same mean)",
                sims[test],
                *cells,
                f"{binomial_bound(ALPHA / 2, sims[test]):.4f}",
            ]
        )
    rng = np.random.default_rng(14)
    for distribution in ("normal", "lognormal"):
        cells = []
        for n in (3, 5, 10):
            base, arm = draw(distribution, (4_000, n), rng), draw(distribution, (4_000, n), rng)
            _, low, _ = percentile_bootstrap(base, arm, ALPHA, 2_000, rng_seed=15)
            cells.append(f"{(low > 0).mean():.4f}")
        rows.append(
            [
                "percentile bootstrap (not used)",
                distribution,
                4_000,
                *cells,
                f"{binomial_bound(ALPHA / 2, 4_000):.4f}",
            ]
        )
    return table(["test", "noise", "experiments", "n = 3", "n = 5", "n = 10", "bound"], rows)


def power_table() -> str:
    rows = []
    for test in ("welch", "paired", "bootstrap"):
        for n in (
            (4, 5, 10) if test == "bootstrap" else (3, 5, 10)
        ):  # 3 + 3 seeds: bootstrap never detects
            effect = detectable_effect(1.0, n, ALPHA, 0.7, "welch" if test == "bootstrap" else test)
            sd, rho = (1.0, 0.5) if test == "paired" else (1.0, 0.0)
            sims = 4_000 if test == "bootstrap" else 20_000
            r = simulate(
                test,
                n,
                effect,
                alpha=ALPHA,
                min_effect=effect,
                sd=sd,
                correlation=rho,
                sims=sims,
                rng_seed=20 + n,
                permutations=1_999,
            )
            pooled = stats.nct.sf(
                stats.t.isf(ALPHA / 2, 2 * n - 2), 2 * n - 2, effect / math.sqrt(2 / n)
            )
            rows.append(
                [
                    test,
                    n,
                    f"{effect:.3f}",
                    f"{detection_power(n, effect, 1.0, ALPHA, test):.3f}",
                    f"{r.detected:.3f}",
                    f"{pooled:.3f}" if test == "welch" else "",
                    f"{accept_probability(n, effect, 1.0, ALPHA, effect, test):.3f}",
                    f"{r.accept:.3f}",
                ]
            )
    return table(
        [
            "test",
            "n",
            "true effect = min_effect (sd 1)",
            "P(CI low > 0) analytic",
            "simulated",
            "pooled-t formula",
            "P(accept) analytic",
            "simulated",
        ],
        rows,
    )


def seeds_table() -> str:
    rows = []
    for effect in (0.5, 1.0, 2.0):
        rows.append(
            [
                f"{effect:g}",
                seeds_for_power(1.0, effect, ALPHA, 0.8, "welch"),
                seeds_for_power(1.0, effect, ALPHA, 0.8, "welch", n_arms=3),
                seeds_for_power(1.0, effect, ALPHA, 0.8, "bootstrap"),
                seeds_for_power(math.sqrt(2 * (1 - 0.7)), effect, ALPHA, 0.8, "paired"),
            ]
        )
    return table(
        [
            "true effect / sd",
            "welch",
            "welch, 3 arms (holm)",
            "bootstrap",
            "paired, seed correlation 0.7",
        ],
        rows,
    )


def paired_against_welch_table() -> str:
    """The default test (paired) against Welch when the seed moves both arms alike: seeds per arm
    for 80 % power at min_effect = sd (the seeds' own sd 1) at seed correlations 0, 0.5 and 0.9,
    and the A/A false-accept rate of each test at those seeds, measured through the deciding
    code."""
    sims, effect, rows = 40_000, 1.0, []
    for rho in (0.0, 0.5, 0.9):
        for test in ("paired", "welch"):
            sd = math.sqrt(2 * (1 - rho)) if test == "paired" else 1.0
            n = seeds_for_power(sd, effect, ALPHA, 0.8, test)
            power = simulate(
                test,
                n,
                effect,
                alpha=ALPHA,
                min_effect=effect,
                correlation=rho,
                sims=sims,
                rng_seed=60 + n,
            )
            null = simulate(
                test,
                n,
                0.0,
                alpha=ALPHA,
                min_effect=1e-9,
                correlation=rho,
                sims=sims,
                rng_seed=70 + n,
            )
            rows.append(
                [
                    f"{rho:g}",
                    test,
                    n,
                    2 * n,
                    f"{power.detected:.3f}",
                    f"{null.detected:.4f} ± {math.sqrt(0.025 * 0.975 / sims):.4f}",
                ]
            )
    rows += digits_rows(sims)
    note = (
        "Confirmation runs every arm on the same seeds; the seed correlation is the share of the "
        "seed-to-seed "
        "variance a seed gives both arms alike (the data order, the split, the initialization). "
        "True effect = "
        f"min_effect = the seeds' sd; alpha {ALPHA}; {sims} experiments per cell through "
        f"planner.stats. The "
        "paired test's sd is that of the per-seed differences, sd * sqrt(2 (1 - correlation)): at "
        "correlation "
        "0 it costs a seed or so over Welch (its t has n - 1 degrees of freedom, not about 2n - "
        "2); from 0.5 on "
        "it needs fewer, at 0.9 about a quarter. Welch ignores the pairing (its standard error "
        "counts the "
        "variance the arms share), so at a correlation above 0 it is conservative: more power "
        "than planned "
        "and an A/A rate below the target. ± is one Monte Carlo standard error at 0.025. Target "
        "for the A/A "
        "rate: at most 0.025 (bound for "
        f"{sims} experiments {binomial_bound(ALPHA / 2, sims):.4f}). "
        "The examples/digits rows plan from a run of `plan run examples/digits/contract.yaml` "
        f"(read from {DIGITS_RUN}, or the run given with --digits-run): the sd of its per-seed "
        "differences of the decision metric (paired) against its pooled per-arm sd (welch) at the "
        "contract's min_effect, the seed correlation they imply, 1 - sd_diff^2 / (2 sd^2), and "
        "each test's A/A rate simulated at that sd and correlation (normal noise)."
    )
    header = [
        "seed correlation",
        "test",
        "seeds per arm (80 % power)",
        "trials (2 arms)",
        "power simulated",
        "A/A false-accept rate at those seeds",
    ]
    return note + "\n\n" + table(header, rows)


DIGITS_RUN = Path("runs/digits-adamw-vs-sgd/latest")
DIGITS = {"run": DIGITS_RUN}  # --digits-run replaces it


def digits_rows(sims: int) -> list[list]:
    """Seeds per arm for 80 % power on examples/digits, paired (the sd of the per-seed
    differences of a run's confirmation) against welch (the pooled per-arm sd), with each test's
    A/A rate at those seeds."""
    from planner._plan.pilot import read_pilot
    from planner._plan.seeds import spread_from_pilot

    run = Path(DIGITS["run"])
    if not run.exists():
        return [["examples/digits", "no run at hand", f"run `plan run {run}` first", "", "", ""]]
    run = run.resolve() if run.is_dir() else run.parent / run.read_text().strip()
    decided = json.loads((run / "decisions.json").read_text())
    pilot = read_pilot(run, decided["metric"])
    sd_diff, sd = spread_from_pilot(pilot, "paired")[0], spread_from_pilot(pilot, "welch")[0]
    rho = 1 - sd_diff**2 / (2 * sd**2)
    seeds = min(len(v) for v in pilot.values.values())
    label = (
        f"examples/digits: {rho:.2f} ({decided['metric']}, {seeds} seeds; sd of differences "
        f"{sd_diff:.4g}, per-arm sd {sd:.4g}, min_effect {decided['min_effect']:g})"
    )
    rows = []
    for test, plan_sd in (("paired", sd_diff), ("welch", sd)):
        n = seeds_for_power(plan_sd, decided["min_effect"], ALPHA, 0.8, test)
        null = simulate(
            test,
            n,
            0.0,
            alpha=ALPHA,
            min_effect=1e-9,
            sd=sd,
            correlation=min(max(rho, 0.0), 1.0),
            sims=sims,
            rng_seed=80 + n,
        )
        power = detection_power(n, decided["min_effect"], plan_sd, ALPHA, test)
        rows.append(
            [
                label,
                test,
                n,
                2 * n,
                f"{power:.3f} (planned)",
                f"{null.detected:.4f} ± {math.sqrt(0.025 * 0.975 / sims):.4f}",
            ]
        )
    return rows


def holm_table() -> str:
    rng = np.random.default_rng(40)
    sims, n, m = 20_000, 5, 3
    base = rng.standard_normal((sims, n))
    arms = [rng.standard_normal((sims, n)) for _ in range(m)]
    p = np.column_stack([_welch_t(base, arm, ALPHA)[3] for arm in arms])
    rows = []
    for correction in ("none", "bonferroni", "holm"):
        levels = np.array([adjusted_alphas(row, ALPHA, correction) for row in p])
        accepted = np.column_stack(
            [
                verdict(*_welch_t(base, arm, levels[:, j])[:3], min_effect=1e-9) == "accept"
                for j, arm in enumerate(arms)
            ]
        )
        rows.append(
            [correction, f"{accepted.any(axis=1).mean():.4f}", f"{accepted[:, 0].mean():.4f}"]
        )
    return table(["correction", "P(any of 3 A/A arms accepted)", "P(a given arm accepted)"], rows)


def sequential_a_a_table() -> str:
    sims = 40_000
    rows = []
    for test in ("welch", "paired"):
        for n_seeds, looks, spending in [
            (6, 3, "obrien_fleming"),
            (8, 4, "pocock"),
            (10, 5, "obrien_fleming"),
            (24, 4, "pocock"),
        ]:
            kwargs = dict(
                min_effect=1e-9,
                sims=sims,
                rng_seed=looks,
                correlation=0.5 if test == "paired" else 0.0,
            )
            calibrated = plan_design(n_seeds, looks, ALPHA, spending, test=test)
            t_quantile = plan_design(
                n_seeds, looks, ALPHA, spending, test=test, calibration="t_quantile"
            )
            rows.append(
                [
                    test,
                    n_seeds,
                    looks,
                    spending,
                    f"{simulate_design(calibrated, 0.0, **kwargs).detected:.4f}",
                    f"{simulate_design(t_quantile, 0.0, **kwargs).detected:.4f}",
                    f"{simulate_design(calibrated, 0.0, z_only=True, **kwargs).detected:.4f}",
                ]
            )
    note = (
        f"{sims} experiments each; bound for a calibrated design "
        f"{binomial_bound(ALPHA / 2, sims):.4f}."
    )
    return (
        note
        + "\n\n"
        + table(
            ["test", "seeds", "looks", "spending", "calibrated (used)", "t quantiles", "z bounds"],
            rows,
        )
    )


def sequential_power_table() -> str:
    sims, n_seeds = 40_000, 24
    rows = []
    for test in ("welch", "paired"):
        for power in (0.8, 0.9):
            min_effect = detectable_effect(1.0, n_seeds, ALPHA, power, test)
            sd, rho = (1 / math.sqrt(2 * (1 - 0.5)), 0.5) if test == "paired" else (1.0, 0.0)
            kwargs = dict(min_effect=min_effect, sd=sd, correlation=rho, sims=sims, rng_seed=7)
            fixed_design = plan_design(n_seeds, 1, ALPHA, test=test)
            fixed = simulate_design(fixed_design, min_effect, **kwargs)
            fixed_below = simulate_design(fixed_design, 0.8 * min_effect, **kwargs)
            fixed_null = simulate_design(fixed_design, 0.0, **kwargs)
            rows.append(
                [
                    test,
                    f"{power:g}",
                    "fixed n",
                    f"{fixed.detected:.3f}",
                    f"{fixed.accept:.3f}",
                    "1.000",
                    f"{fixed_below.accept:.3f}",
                    "1.000",
                ]
            )
            for looks, spending, futility in [
                (3, "obrien_fleming", False),
                (4, "obrien_fleming", False),
                (5, "obrien_fleming", False),
                (4, "obrien_fleming", True),
                (4, "pocock", False),
                (4, "pocock", True),
            ]:
                design = plan_design(n_seeds, looks, ALPHA, spending, futility, test=test)
                r = simulate_design(design, min_effect, **kwargs)
                below = simulate_design(design, 0.8 * min_effect, **kwargs)
                null = simulate_design(design, 0.0, **kwargs)
                name = f"{looks} looks, {spending}{', futility' if futility else ''}"
                rows.append(
                    [
                        test,
                        f"{power:g}",
                        name,
                        f"{r.detected:.3f}",
                        f"{r.accept:.3f}",
                        f"{r.expected_seeds / fixed.expected_seeds:.3f}",
                        f"{below.accept:.3f}",
                        f"{null.expected_seeds / fixed_null.expected_seeds:.3f}",
                    ]
                )
    note = (
        f"{n_seeds} seeds per arm at most; min_effect is the true effect the fixed design "
        f"detects with the "
        f"stated power; {sims} experiments per cell, the same data for every design."
    )
    return (
        note
        + "\n\n"
        + table(
            [
                "test",
                "fixed power",
                "design",
                "P(CI low > 0) at min_effect",
                "P(accept) at min_effect",
                "seeds / fixed at min_effect",
                "P(accept) at 0.8 min_effect",
                "seeds / fixed at 0",
            ],
            rows,
        )
    )


def quantized_a_a_table() -> str:
    """Issue 11 item 3: A/A false accepts on a coarse metric, every test, fixed and sequential."""
    from tests._calibration import GRID, MIN_EFFECT, SD, quantized_false_accept

    sims = 20_000
    rows = []
    for test in ("welch", "paired", "bootstrap"):
        for n in (2, 3, 5, 10):
            cells = []
            for sequential in (False, True):
                f = quantized_false_accept(
                    test, n, sequential=sequential, alpha=ALPHA, sims=sims, rng_seed=n
                )
                looks = f"{f.looks} look{'s' if f.looks > 1 else ''}"
                cells += (
                    [f"{f.rate:.4f} ± {f.mc_error:.4f}" + ("" if sequential else ""), looks]
                    if sequential
                    else [f"{f.rate:.4f} ± {f.mc_error:.4f}"]
                )
            rows.append([test, n, *cells])
    note = (
        f"Metric on a grid of {GRID} around 0.9 (accuracy on 100 examples), seed-to-seed sd {SD}, "
        f"min_effect {MIN_EFFECT}, no true effect; {sims} experiments per cell (± one Monte Carlo "
        f"standard "
        f"error). Target: at most {ALPHA / 2} (bound for {sims} experiments "
        f"{binomial_bound(ALPHA / 2, sims):.4f}). "
        "Sequential: O'Brien-Fleming with the most looks (up to 3) the seeds make; 2 seeds make "
        "only one look; "
        "the bootstrap test is monitored with Welch's t. Before the degenerate-spread rule, the "
        "fixed paired "
        "test at 2 seeds accepted 0.057 and paired in 3 looks of 6 seeds 0.074."
    )
    return (
        note
        + "\n\n"
        + table(["test", "seeds", "fixed: P(accept)", "sequential: P(accept)", "looks"], rows)
    )


def edges_a_a_table() -> str:
    """Issue 20 item 6: A/A false accepts with diverged seeds, ties and a large offset, every test,
    fixed."""
    from tests._calibration import (
        EDGES,
        LEVEL,
        MIN_EFFECT,
        OFFSET_SD,
        SD,
        edge_false_accept,
    )

    sims = 40_000
    rows = []
    for case in EDGES:
        for test in ("welch", "paired", "bootstrap"):
            cells = []
            for n in (2, 3, 5, 8, 10):
                f = edge_false_accept(case, test, n, alpha=ALPHA, sims=sims, rng_seed=n)
                cells.append(f"{f.rate:.4f} ± {f.mc_error:.4f}")
            rows.append([case, test, *cells])
    note = (
        f"No true effect; {sims} experiments per cell (± one Monte Carlo standard error); target "
        f"at most "
        f"{ALPHA / 2} (bound for {sims} experiments {binomial_bound(ALPHA / 2, sims):.4f}). "
        f"Values around "
        f"{LEVEL} with seed-to-seed sd {SD} and min_effect {MIN_EFFECT}, except at the offset (sd "
        f"and min_effect "
        f"{OFFSET_SD}). Diverged: each seed of either arm diverges with that chance and counts as "
        "failures.diverged_value 0.0; before an all-diverged side counted as degenerate, the "
        "2-seed A/A rate was "
        "0.047 at 30 % and 0.066 at 50 %. Ties: the metric on a grid of 0.03 (accuracy on about "
        "33 examples), "
        "so most seeds tie. Welch's t assumes roughly normal noise, and a metric that is 0.0 on "
        "a third or half of the seeds is far from it: its diverged cells at 8-10 seeds are above "
        "the bound. The paired test (the default) decides a confirmation with a diverged seed by "
        "the exact sign-flip test, and an exact shift by the sign rule over seeds; the bootstrap "
        "(permutation) test is exact under no effect too. Before the sign-flip test, paired was "
        "0.0274 at 30 % and 0.0275 at 50 % divergence with 10 seeds."
    )
    return (
        note + "\n\n" + table(["case", "test", "n = 2", "n = 3", "n = 5", "n = 8", "n = 10"], rows)
    )


def offset_table() -> str:
    """Issue 20 item 6: a real spread far from 0 is no degenerate spread; the same data at offset 0
    and 1e10."""
    from tests._calibration import OFFSET, OFFSET_SD, offset_check

    sims = 20_000
    rows = []
    for test in ("welch", "paired", "bootstrap"):
        for n in (2, 3, 5, 10):
            for effect in (0.0, 2 * OFFSET_SD):
                c = offset_check(test, n, effect=effect, alpha=ALPHA, sims=sims, rng_seed=n)
                rows.append(
                    [
                        test,
                        n,
                        f"{effect:g}",
                        f"{c.accept_at_0:.4f}",
                        f"{c.accept_at_offset:.4f}",
                        c.degenerate_at_offset,
                        c.changed,
                    ]
                )
    note = (
        f"{sims} experiments per row, decided twice: as drawn (sd {OFFSET_SD}, min_effect "
        f"{OFFSET_SD}) and with "
        f"{OFFSET:g} added to every value. A float step at {OFFSET:g} is "
        f"{np.spacing(OFFSET):.2g}, so a spread of "
        f"{OFFSET_SD} is about {OFFSET_SD / np.spacing(OFFSET):.0f} steps: not degenerate. The "
        f"rule fires only "
        "where the drawn spread itself falls within 2 float steps of the magnitude (with 2 seeds "
        "about 1 % of "
        "pairs, by chance); the other changed decisions are rounding at 1e10 (0.2 % of the sd). "
        "Before, the rule's "
        "tolerance (1024 steps, 2.3e-3 at 1e10) exceeded the spread and nearly every experiment "
        "was degenerate."
    )
    return (
        note
        + "\n\n"
        + table(
            [
                "test",
                "n",
                "true effect",
                "P(accept) at offset 0",
                f"at offset {OFFSET:g}",
                "degenerate at the offset",
                "decisions changed",
            ],
            rows,
        )
    )


def margin_table() -> str:
    """Issue 20 item 6: the estimate rule against the margin rule, welch, sd 1, min_effect 1."""
    sims, min_effect = 20_000, 1.0
    rows = []
    for rule in ("estimate", "margin"):
        for n in (5, 10, 20):
            cells = []
            for k, factor in enumerate((0.0, 0.95, 1.0, 2.0)):
                effect = factor * min_effect
                analytic = accept_probability(n, effect, 1.0, ALPHA, min_effect, "welch", rule=rule)
                r = simulate(
                    "welch",
                    n,
                    effect,
                    alpha=ALPHA,
                    min_effect=min_effect,
                    sims=sims,
                    rule=rule,
                    rng_seed=60 + 4 * n + k,
                )
                cells.append(f"{analytic:.3f} / {r.accept:.3f}")
            rows.append([rule, n, *cells])
    estimate = seeds_for_power(1.0, min_effect, ALPHA, 0.8, "welch")
    margin = {
        f: seeds_for_power(
            1.0, min_effect, ALPHA, 0.8, "welch", rule="margin", effect=f * min_effect
        )
        for f in (1.5, 2.0, 3.0)
    }
    note = (
        f"Welch, seed-to-seed sd 1, min_effect {min_effect:g}, alpha {ALPHA}; each cell analytic "
        f"/ simulated "
        f"({sims} experiments). estimate (the default): accept when the CI is above 0 and the "
        f"estimate reaches "
        "min_effect; margin: when the CI's lower end reaches min_effect. Seeds per arm for 80 %: "
        "estimate "
        f"{estimate} (P(CI low > 0) at a true effect of min_effect, what `plan power` plans); "
        f"margin, P(accept) "
        "at a true effect of "
        + ", ".join(f"{f:g} x min_effect {k}" for f, k in margin.items())
        + " (the margin rule needs a true effect above min_effect to plan for)."
    )
    return (
        note
        + "\n\n"
        + table(
            [
                "rule",
                "n",
                "P(accept) at 0",
                "at 0.95 x min_effect",
                "at min_effect",
                "at 2 x min_effect",
            ],
            rows,
        )
    )


SECTIONS = [
    ("Worked example", worked_example),
    (
        "A/A false-accept rate: P(CI low > 0) with no true effect, alpha 0.05 (target <= 0.025)",
        a_a_table,
    ),
    (
        "Power at a true effect of exactly min_effect (fixed design, sd 1; bootstrap at Welch's "
        "70 % effect)",
        power_table,
    ),
    ("Seeds per arm for 80 % power (alpha 0.05, sd 1)", seeds_table),
    (
        "The default (paired) against Welch: seeds for 80 % power and A/A rate, by seed "
        "correlation",
        paired_against_welch_table,
    ),
    (
        "Family-wise false accepts: 3 A/A arms against one baseline, welch, 5 seeds, 20,000 "
        "experiments",
        holm_table,
    ),
    ("Sequential: A/A false-accept rate of the per-look thresholds", sequential_a_a_table),
    (
        "Quantized metric: A/A false-accept rate with ties (degenerate-spread rule), fixed and "
        "sequential",
        quantized_a_a_table,
    ),
    (
        "At the edges: A/A false-accept rate with diverged seeds, ties and a large offset (fixed "
        "design)",
        edges_a_a_table,
    ),
    ("A large offset: the same experiments at 0 and at 1e10", offset_table),
    ("The acceptance rules: P(accept) under estimate and margin", margin_table),
    ("Sequential against fixed n: power, accepts and seeds", sequential_power_table),
]


def render() -> str:
    parts = [
        START,
        "",
        "_Written by `PYTHONPATH=. python bench/bench_statistics.py`; do not edit by hand._",
        "",
    ]
    for title, make in SECTIONS:
        began = time.perf_counter()
        body = make()
        print(f"{title}: {time.perf_counter() - began:.1f} s", file=sys.stderr)
        parts += [f"#### {title}", "", body, ""]
    parts.append(END)
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stdout", action="store_true", help="print the tables instead of updating the doc"
    )
    parser.add_argument(
        "--digits-run",
        type=Path,
        default=DIGITS_RUN,
        help="a run folder of examples/digits/contract.yaml to plan its rows from",
    )
    args = parser.parse_args()
    DIGITS["run"] = args.digits_run
    block = render()
    if args.stdout:
        print(block)
        return
    text = DOC.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{DOC} has no {START} ... {END} block to fill")
    DOC.write_text(
        re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    )
    print(f"updated {DOC}", file=sys.stderr)


if __name__ == "__main__":
    main()
