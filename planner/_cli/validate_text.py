"""What `plan validate` prints: the findings, then the valid contract's summary."""

from __future__ import annotations

from typing import Any

from planner._contract.paths import shown_side
from planner._contract.validate import ValidationResult
from planner._core.diagnostics import errors
from planner._core.text import number


def _command_lines(command: dict[str, Any]) -> list[str]:
    # Without a key the value reaches the script only in the environment: say so, since nothing
    # here can tell whether the script reads it (a config that sets its own length does not).
    seed = f"seed -> {command['seed_key']}" if command["seed_key"] else "seed in $PLANNER_SEED only"
    budget = (
        f"exposure -> {command['budget_key']}"
        if command["budget_key"]
        else "exposure in $PLANNER_BUDGET only"
    )
    lines = [f"  command  {command['run']} ({seed}, {budget})"]
    if command.get("args") == "literal":
        lines.append(f"           the config as flags {command.get('flags') or ''}".rstrip())
    if command.get("args") == "argparse":
        lines.append(
            f"           the config as argparse flags (--key=value), "
            f"{command.get('flags') or 'not checked'}"
        )
    metrics = command["metrics"]
    if metrics is None:
        lines.append("           metrics from planner.report")
    else:
        base = ", from 0" if metrics["step_base"] == 0 else ""
        names = ", ".join(f"{name} <- {column}" for name, column in metrics["names"].items())
        source = (
            f"the {metrics['stream']} lines matching '{metrics['pattern']}'"
            if metrics["format"] == "stdout"
            else metrics["file"]
        )
        lines.append(
            f"           metrics from {source} ({metrics['format']}; step {metrics['step']}{base}; "
            f"{names})"
        )
    checkpoint = command.get("checkpoint")
    if checkpoint:
        flags = " ".join(f"{k}={v}" for k, v in (checkpoint.get("resume_flags") or {}).items())
        resume = (
            f"a cut-short trial continues with {checkpoint['resume_key']}=<the newest>"
            if checkpoint["resume_key"]
            else f"a cut-short trial continues with {checkpoint['folder_key']}=<the folder of the "
            f"newest> {flags}".rstrip()
            if checkpoint.get("folder_key")
            else "not passed to the script"
        )
        lines.append(
            f"           checkpoints {checkpoint['file']} ({resume}; keep {checkpoint['keep']})"
        )
    return lines


def format_result(result: ValidationResult) -> str:
    """The human-readable report of `plan validate` (the CLI prints it)."""
    lines = [d.format() for d in result.diagnostics]
    summary = result.summary
    if summary is None:
        count = len(errors(result.diagnostics))
        lines.append(f"{result.file}: invalid ({count} error{'s' if count != 1 else ''})")
        return "\n".join(lines)
    if lines:
        lines.append("")
    factor = summary["factor"]
    count = len(result.diagnostics)  # a valid contract's diagnostics are warnings
    noted = f" ({count} warning{'s' if count != 1 else ''})" if count else ""
    lines.append(f"{result.file}: valid contract {summary['name']!r}{noted}")
    lines.append(f"  factor   {factor['name']} (keys: {', '.join(factor['keys'])})")
    metric = summary["metric"]
    decision = (
        ""
        if metric["decision"] == metric["name"]
        else (
            f", decided on {metric['decision']}"
            if metric.get("decision_mode", metric["mode"]) == metric["mode"]
            else f"; decided on {metric['decision']}, {metric['decision_mode']}"
        )
    )
    lines.append(f"  metric   {metric['name']} ({metric['mode']}{decision})")
    if summary.get("baseline_from"):
        lines.append(f"  baseline {summary['baseline_from'].get('description', '')}")
    if summary.get("command"):
        lines.extend(_command_lines(summary["command"]))
    lines.append("  arms")
    # padded here, not through text_table: `plan validate` never loads rich (its start-up)
    width = max(len(arm["name"]) for arm in summary["arms"])
    for arm in summary["arms"]:
        if arm["baseline"]:
            lines.append(f"    {arm['name']:<{width}}  baseline")
            continue
        changes = [
            f"{d['path']}: {shown_side(d, 'baseline')} -> {shown_side(d, 'arm')}"
            for d in arm["diff"]
        ]
        lines.append(f"    {arm['name']:<{width}}  {changes[0] if changes else '(no change)'}")
        lines.extend(f"    {'':<{width}}  {change}" for change in changes[1:])
    planned = summary["planned_trials"]
    budget = summary["budget"]
    ceiling = f" (max_trials {budget['max_trials']})" if budget["max_trials"] is not None else ""
    lines.append(
        f"  trials   {planned['total']} planned: tune {planned['tune']}, confirm "
        f"{planned['confirm']}{ceiling}"
    )
    extra = (
        [f"max wall time {budget['max_wall_time']}"] if budget["max_wall_time"] is not None else []
    )
    if budget["max_trial_time"] is not None:
        extra.append(f"max trial time {budget['max_trial_time']}")
    resources = budget["resources"]
    lines.append(
        f"  budget   {budget['exposure']} {budget['unit']} per trial, {budget['planned_exposure']} "
        f"{budget['unit']} in all; cpu {number(resources['cpu'], None)}, "
        f"gpu {number(resources['gpu'], None)} per trial" + "".join(f"; {e}" for e in extra)
    )
    return "\n".join(lines)
