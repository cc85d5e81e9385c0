"""What `plan log` and `plan promote` print: the project ledger's lines of work, and one promotion
or withdrawal."""

from __future__ import annotations

from typing import Any

from planner._core.text import terminal_safe


def format_log(log: dict[str, Any]) -> str:
    """The text of `plan log`."""
    out = [f"ledger {log['ledger']}"]
    if not log["lines"]:
        out.append("no line of work yet: `plan run` records each run here")
    for line in log["lines"]:
        out += ["", f"line {line['line']}"]
        now = line["in_force"]
        if now and now.get("promoted"):
            out.append(
                f"  baseline in force: arm {now['arm']} of {now['run']} (promoted {now['promoted']}"
                + (f", {now['note']!r}" if now.get("note") else "")
                + ")"
                + _unverified_text(now)
            )
        elif now:
            out.append(f"  baseline in force: arm {now['arm']} of {now['run']} ({now['note']})")
        for b in line["baselines"]:
            origin = b.get("from")
            where = (
                f"arm {origin['arm']} of {origin['run']}"
                + (" (via the line)" if origin.get("via_line") else "")
                if origin
                else f"the contract's own, first in {b['first_run']}"
            )
            out.append(f"  {b['number']}. baseline {b['arm']}: {where}")
            for x in b["experiments"]:
                factor = (x.get("factor") or {}).get("name")
                out.append(
                    f"       {x['run']}  {x['state'] or '?'}  factor {factor}"
                    + ("  (end read from the run folder)" if x["end_from"] == "run folder" else "")
                )
                for d in x["decisions"]:
                    out.append(f"         {d.get('arm')}: {d.get('decision')}{_numbers(d)}")
                for p in x["promoted"]:
                    out.append(
                        f"         promoted {p['arm']} {p['promoted']}"
                        + (f" {p['note']!r}" if p["note"] else "")
                        + (
                            f"; withdrawn {p['withdrawn']['time']} {p['withdrawn']['note']!r}"
                            if p["withdrawn"]
                            else ""
                        )
                        + _unverified_text(p)
                    )
                if x["decisions"] and not x["promoted"]:
                    accepted = any(d.get("decision") == "accept" for d in x["decisions"])
                    out.append(
                        "         accepted, not promoted: the baseline stays until `plan promote`"
                        if accepted
                        else "         nothing promoted: the baseline stays"
                    )
                if x.get("repetition"):
                    out.append(f"         ! {x['repetition']['sentence']}")
                if x.get("replicates"):
                    out.append(
                        f"         = replicates {', '.join(x['replicates'])} bit for bit "
                        "(the same contract, trainable and results: not another test)"
                    )
                if x.get("edited_after_decisions"):
                    out.append(
                        f"         ! the contract {x['name']} was edited (new sha256 "
                        f"{str(x['contract_sha256'])[:12]}) "
                        f"after {', '.join(x['edited_after_decisions'])} had reported decisions"
                    )
        for f in line["forking"]:
            if f["kind"] == "repeated_test":
                out.append(
                    f"  forking paths: factor keys {', '.join(f['factor_keys'])} tested "
                    f"{f['count']} times "
                    f"against the same baseline ({'; '.join(f['decisions'])}): family-wise alpha "
                    f"{f['family_alpha']:.3f}"
                    + (
                        f"; {', '.join(f['replications'])} repeated a counted run bit for bit "
                        "(a replication, not another test)"
                        if f.get("replications")
                        else ""
                    )
                )
            else:
                out.append(
                    f"  forking paths: contract {f['name']} ran under {len(f['hashes'])} "
                    f"different hashes "
                    f"(edited after decisions: {', '.join(f['edited_runs'])})"
                )
    for note in log["notes"]:
        out.append(f"note: {note}")
    return terminal_safe(
        "\n".join(out)
    )  # text of the ledger is shown, never obeyed by the terminal


def _unverified_text(p: dict[str, Any]) -> str:
    return (
        f"  UNVERIFIED: the ledger says it was promoted, but {p['unverified']}"
        if p.get("unverified")
        else ""
    )


def _numbers(d: dict[str, Any]) -> str:
    if d.get("effect") is None:
        return f"  ({d['reason']})" if d.get("reason") else ""

    def num(x: Any) -> str:
        return "none" if x is None else f"{x:+.4g}"

    p = "" if d.get("p_value") is None else f"  p={d['p_value']:.3g}"
    return f"  effect {num(d['effect'])}  CI [{num(d.get('ci_low'))}, {num(d.get('ci_high'))}]{p}"


def format_promotion(record: dict[str, Any]) -> str:
    if record["event"] == "withdrawn":
        now = record.get("in_force")
        after = (
            f"arm {now['arm']!r} of {now['run']}"
            if now
            else "none promoted (the contract baseline of the line's first run)"
        )
        return (
            f"withdrawn: arm {record['arm']!r} of {record['run']} (line {record['line']!r})\n"
            f"baseline in force now: {after}"
        )
    before = record.get("replaces")
    return (
        f"promoted: arm {record['arm']!r} of {record['run']} is the baseline of line "
        f"{record['line']!r}"
        + (f" (it replaces arm {before['arm']!r} of {before['run']})" if before else "")
        + f"\nstart a contract from it with  baseline: {{line: {record['line']}}}"
    )
