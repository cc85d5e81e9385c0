"""What `plan reeval` prints: the plan before it runs, each seed's row, the verdict."""

from __future__ import annotations

from typing import Any

from planner._core.text import noun, number
from planner._core.text_tables import text_table
from planner._reeval.comparison import DID_NOT_RUN, ReevalResult, SeedRow
from planner._reeval.prepare import ReevalPlan


def format_plan(plan: ReevalPlan) -> str:
    """What is about to run, and how today's identity differs from the log's."""
    seeds = ", ".join(f"{s}{' (new)' if s in plan.new_seeds else ''}" for s in plan.seeds)
    lines = [
        f"reeval {plan.reeval_number} of arm {plan.arm} in {plan.run_dir}",
        f"  config:  from {plan.config_source}"
        + (f"; params {plan.params}" if plan.params else ""),
        f"  seeds:   {seeds}",
        f"  metric:  {plan.metric} (final value), tolerance {plan.tolerance:g}",
    ]
    ledger = plan.ledger
    if ledger.get("metric"):
        cap = f" of at most {ledger['cap']}" if ledger.get("cap") is not None else ""
        lines.append(
            f"  held-out ledger: {ledger['evaluations']} evaluation(s) of {ledger['metric']}{cap} "
            f"so far; "
            f"this reeval adds {len(plan.seeds)}"
        )
    if plan.differences:
        lines.append(f"identity: {len(plan.differences)} difference(s) from the log:")
        lines += [f"  {d}" for d in plan.differences]
    elif plan.contract.trainable is None and not (plan.identity.get("code") or {}).get(
        "trainable_source_sha256"
    ):
        if plan.files_checked:  # `python -m pkg.mod`, a wrapper: what the trials read was logged
            lines.append(
                f"identity: code (the {noun('file', plan.files_checked)} its trials read), "
                "python, packages and data match the log"
            )
        else:
            lines.append(
                "identity: python, packages and data match the log; code: not recorded for a "
                "command that names no script in the contract's folder and logged no file it read "
                "(only its command line)"
            )
    else:
        lines.append("identity: code, python, packages and data match the log")
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)


def format_table(rows: list[SeedRow]) -> str:
    header = ["seed", "logged", "new", "diff", "result"]
    body = []
    for r in rows:
        if r.is_new:
            result = (
                "new seed" if r.new_status not in DID_NOT_RUN else f"{r.new_status} (did not run)"
            )
        elif r.reproduced is None:
            result = f"{r.new_status} (did not run)"
        else:
            result = "reproduced" if r.reproduced else "DIFFERS"
            if r.new_status != r.logged_status:
                result += f" (status {r.logged_status} -> {r.new_status})"
            if r.data:
                result += f" (different data: {'; '.join(r.data)})"
            if r.continued and not r.reproduced:
                result += " (logged: continued from its checkpoint)"
        logged = (
            "-"
            if r.is_new
            else (number(r.logged, 10) if r.logged is not None else str(r.logged_status))
        )
        new = number(r.new, 10) if r.new is not None else r.new_status
        body.append([str(r.seed), logged, new, number(r.diff, 3, sign=True), result])
    return "\n".join(text_table(body, header=header, right=range(4), indent=0))


def format_result(result: ReevalResult) -> str:
    plan = result.plan
    lines = [format_table(result.rows)]
    if result.new_estimate is not None:
        lines.append(f"logged {plan.metric}: {_estimate(result.logged_estimate)}")
        lines.append(f"new seeds {plan.metric}: {_estimate(result.new_estimate)}")
        c = result.comparison
        if c and "effect" in c:
            lines.append(
                f"new seeds vs the logged baseline ({c['test']}): effect {c['effect']:+.4g}  "
                f"CI [{c['ci_low']:+.4g}, {c['ci_high']:+.4g}]  p={c['p_value']:.3g}  "
                f"n={c['n_arm']} vs {c['n_baseline']}"
                + (f"  ({c['note']})" if c.get("note") else "")
            )
        elif c:
            lines.append(f"new seeds vs the logged baseline: not computed ({c['note']})")
        logged = plan.logged_effect
        if logged and logged.get("effect") is not None:
            lines.append(
                f"logged decision: {logged.get('decision')}  effect {logged['effect']:+.4g}  "
                f"CI [{logged['ci_low']:+.4g}, {logged['ci_high']:+.4g}]"
            )
    compared = [r for r in result.rows if not r.is_new]
    tolerance = "exactly" if plan.tolerance == 0 else f"within {plan.tolerance:g}"
    text = {
        "reproduced": f"reproduced: {len(compared)} of {len(compared)} logged seeds {tolerance}",
        "not_reproduced": f"NOT reproduced: {sum(r.reproduced is False for r in compared)} of "
        f"{len(compared)} "
        f"logged seeds differ (tolerance {plan.tolerance:g})",
        "failed": f"failed: {sum(r.new_status in DID_NOT_RUN for r in result.rows)} trial(s) did "
        f"not run to "
        f"the end (see trials.jsonl)",
        "new_seeds": f"new seeds only: {len(result.rows)} trial(s) ran; nothing logged to compare",
        "interrupted": "interrupted before every trial ended",
    }[result.verdict]
    lines.append(f"verdict: {text}")
    continued = [r for r in compared if r.reproduced is False and r.continued]
    if result.verdict == "not_reproduced" and continued:
        lines.append(
            f"{len(continued)} of the differing logged seeds "
            f"({', '.join(str(r.seed) for r in continued)}) "
            "continued from a checkpoint after an interruption: their later epochs saw another "
            "data "
            "order than one uninterrupted training does, so they are not expected to repeat "
            "exactly; "
            "compare with a tolerance, or on new seeds"
        )
    if result.verdict == "not_reproduced" and plan.differences:
        lines.append(
            "identity differences that may explain it: "
            + ", ".join(d.what for d in plan.differences)
        )
    lines.append(f"logged: reeval {plan.reeval_number} in {plan.run_dir / 'reevals.jsonl'}")
    return "\n".join(lines)


def _estimate(e: dict[str, Any]) -> str:
    if not e.get("n"):
        return "no values"
    sd = f" ± {e['sd']:.4g} (sd)" if e.get("sd") is not None else ""
    return f"mean {e['mean']:.6g}{sd}, n={e['n']}"
