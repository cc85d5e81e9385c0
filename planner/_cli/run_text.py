"""What `plan run` prints at its end: the run state, then the decision per arm, kept apart."""

from __future__ import annotations

from pathlib import Path

from planner._core.errors import EXIT_NO_VALUE
from planner._core.records import on_nodes
from planner._core.status import RunState
from planner._core.text import noun, shown_path, terminal_safe
from planner._dispatch.run_end import RunResult
from planner._dispatch.run_folder import resumed_said
from planner._lineage.record import forking_lines
from planner._store.live import dashboard_command
from planner._store.read import RunFolder

# the rules an invalid row names (decide.mark_invalid's `invalid_rules`) -> the summary's words
INVALID_WHY = {
    "seeds": "the seeds did not vary the run",  # _stats.decide.seeds_did_not_vary
    # _stats.decide.tuned_values_did_not_vary
    "tuned_values": "the tuned values did not vary the run",
    "budget": "the tuning budget was not matched",  # budget_not_matched
    "data": "the data broke the contract's data section",  # _data.checks.invalid_reasons
}


def invalid_why(row: dict) -> str:
    """The rules an `invalid` decision row says were broken, in the run summary's words."""
    said = [INVALID_WHY.get(rule, str(rule)) for rule in row.get("invalid_rules") or []]
    return " and ".join(said) or "the run broke the contract"


def format_result(result: RunResult) -> str:
    """The end of `plan run`: the run state, then the decision per arm, kept apart."""
    lines = [
        f"run folder: {shown_path(result.run_dir)}",
        f"run state:  {result.state} ({result.reason}); {noun('trial', result.trials_ended)} "
        f"ended in "
        f"{result.wall_time_s:.1f} s",
    ]
    if result.resumed is not None:
        lines.insert(1, resumed_said(result.resumed))
    if (dashboard := dashboard_command(result.run_dir)) is not None:
        lines.append(terminal_safe(f"studies:    {dashboard}"))
    lines += _problem_lines(result)
    lines += _decision_lines(result.decisions)
    # the CI covers seed noise only, not how far tuning searched: said beside the decisions
    if result.tuning and result.decisions:
        lines.append(f"tuning:     {result.tuning}")
    lines += [
        f"lineage:    {line}"
        for line in forking_lines(RunFolder(Path(result.run_dir)).json("lineage.json"))
    ]
    if (
        result.resume_command
    ):  # the last line: the exact command that continues the run (docs/commands.md)
        lines.append(f"to resume:  {result.resume_command}")
    return "\n".join(lines)


def _problem_lines(result: RunResult) -> list[str]:
    """What went wrong, before the decisions: failures, findings, notes, errors, held-out exposure,
    and why a completed run has no valid or whole decision."""
    lines: list[str] = []
    if result.failures:
        lines.append(
            f"failures:   {noun('trial', len(result.failures))}: "
            + ", ".join(f"{f['trial_id']} {f['status']}" for f in result.failures[:5])
            + (" ..." if len(result.failures) > 5 else "")
        )
    for finding in result.findings:
        lines.append(f"warning:    {finding['message']}")
    for group in result.notes[
        :5
    ]:  # a declared metric no row held: said, never dropped (docs/command-trainables.md)
        lines.append(
            f"warning:    {group['note']} (in {noun('trial', group['count'])}, first "
            f"{group['first']})"
        )
    for group in [g for g in result.errors if g["error"] not in result.reason][
        :5
    ]:  # fail fast's names it
        lines.append(
            f"error:      {group['error']} (in {noun('trial', group['count'])}, "
            f"first {group['first']}{on_nodes(group)})"
        )
    if result.heldout_exposures:
        lines.append(
            f"warning:    {result.heldout_exposures} tuning trial(s) reported the held-out metric "
            f"{result.heldout!r}: test exposure (one per trial; see plan status)"
        )
    if result.no_value_arms and result.state == RunState.COMPLETED:
        lines.append(
            f"no value:   arm{'s' if len(result.no_value_arms) > 1 else ''} "
            f"{', '.join(result.no_value_arms)} ended with no usable confirmation value: nothing "
            f"to "
            f"decide on (exit {EXIT_NO_VALUE})"
            + (
                f"; every failure above is {result.errors[0]['error']}"
                if len(result.errors) == 1
                else ""
            )
        )
    invalid: dict[str, list[str]] = {}  # why -> the arms it makes invalid
    for d in result.decisions:
        if d.get("decision") == "invalid":
            invalid.setdefault(invalid_why(d), []).append(d["arm"])
    if invalid and result.state == RunState.COMPLETED:
        lines.append(
            "invalid:    "
            + "; ".join(
                f"arm{'s' if len(arms) > 1 else ''} {', '.join(arms)}: the run completed, but {why}"
                for why, arms in invalid.items()
            )
            + f", so there is no valid decision (exit {EXIT_NO_VALUE})"
        )
    incomplete = [
        d["arm"]
        for d in result.decisions
        if d.get("decision") == "incomplete" and d["arm"] not in result.no_value_arms
    ]
    if incomplete and result.state == RunState.COMPLETED:
        lines.append(
            f"incomplete: arm{'s' if len(incomplete) > 1 else ''} {', '.join(incomplete)}: a "
            f"confirmation "
            "result of the arm or of the baseline is missing, failed or broke the protocol (the "
            "reason "
            f"below), so the comparison tested nothing (exit {EXIT_NO_VALUE})"
        )
    return lines


def _decision_lines(decisions: list[dict]) -> list[str]:
    """The decision per arm: its effect, CI, p and sizes, and the short why where they do not
    say it."""
    lines = ["decisions:"]
    for d in decisions:
        if d["effect"] is None:
            lines.append(f"  {d['arm']}: {d['decision']} ({d['reason']})")
        else:

            def num(x, spec):  # None: an unbounded CI, or no fixed-sample p after sequential looks
                return "none" if x is None else format(x, spec)

            looks = f"  at look {len(d['looks'])}" if d.get("looks") else ""
            p = "" if d["p_value"] is None else f"p={d['p_value']:.3g}  "
            lines.append(
                f"  {d['arm']}: {d['decision']}  effect {d['effect']:+.4g}  "
                f"CI [{num(d['ci_low'], '+.4g')}, {num(d['ci_high'], '+.4g')}]  {p}"
                f"n={d['n_arm']} vs {d['n_baseline']}{looks}"
            )
        if d["decision"] == "invalid":  # the data broke the contract's data section (docs/data.md)
            lines.append(
                f"    {d.get('invalid_reason') or d['reason']}"
            )  # the short why (_stats.decide.mark_invalid)
        elif (
            d["effect"] is not None
            and d.get("ci_low") is None
            and d.get("ci_high") is None
            and d.get("reason")
        ):
            lines.append(
                f"    {d['reason']}"
            )  # no CI (a degenerate spread): the numbers alone do not say why
    return lines
