"""What `plan power` prints: the seeds each power needs, and what the declared seeds detect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner._core.text_tables import text_table
from planner._plan.seeds import more_seeds, pct


def format_power(s: dict[str, Any]) -> str:
    """The text `plan power` prints."""
    alpha = f"alpha {s['alpha']:g}"
    if s["comparison_alpha"] != s["alpha"]:
        alpha += (
            f" ({s['correction']} across {s['arms']} arms: {s['comparison_alpha']:.4g} per "
            f"comparison)"
        )
    lines = [
        f"power for {s['name']!r}: {s['test']} test on {s['metric']} ({s['mode']}), min_effect "
        f"{s['min_effect']:g}, {alpha}",
        f"  sd {s['sd']:.4g}: {s['sd_source']}",
        (
            f"  rule margin: power = P(accept) = P(CI low >= min_effect) when the true "
            f"improvement is {s['effect']:g}"
            if s.get("rule") == "margin"
            else f"  power = P(CI low > 0) when the true improvement is "
            f"{_effect_named(s)}; "
            "accept also needs the estimate >= min_effect"
        ),
        "",
    ]
    rows: list[list[object]] = []
    for key, label in (
        ("80", "for 80 % power"),
        ("90", "for 90 % power"),
        (None, "declared seeds"),
    ):
        r = s["declared"] if key is None else s["needed"][key]
        if r["seeds"] is None:
            rows.append([label, "> 100000", "", "", ""])
            continue
        rows.append([label, r["seeds"], r["trials"], pct(r["power"]), pct(r["accept_probability"])])
    lines += text_table(
        rows, header=["", "seeds/arm", "trials", "power", "P(accept)"], right=range(1, 5)
    )
    d = s["declared"]
    lines.append("")
    if d["detectable_effect_80"] is None:
        lines.append(
            f"  with the declared {d['seeds']} seeds the {s['test']} test cannot reach the level: "
            f"add seeds"
        )
    else:
        lines.append(
            f"  smallest effect the declared {d['seeds']} seeds detect with 80 % power: "
            f"{d['detectable_effect_80']:.4g}"
            f" ({d['detectable_effect_80'] / s['min_effect']:.3g} x min_effect)"
        )
        if d["accept_80_at_effect"] is not None:
            lines.append(
                f"  true effect at which accept is 80 % likely with them: "
                f"{d['accept_80_at_effect']:.4g}"
            )
    o = s.get("other_test")
    if o:
        lines.append(
            f"  the {o['test']} test would need "
            + (
                f"{o['seeds_80']} seeds per arm"
                if o["seeds_80"]
                else "more than 100000 seeds per arm"
            )
            + f" for 80 % power (sd {o['sd']:.4g}: {o['sd_source']})"
        )
    if s["underpowered"]:
        need = s["needed"]["80"]["seeds"]
        at = (
            "min_effect"
            if s.get("effect", s["min_effect"]) == s["min_effect"]
            else f"an effect of {s['effect']:g}"
        )
        lines.append(f"  UNDERPOWERED: {pct(d['power'])} power at {at}; {more_seeds(need)}")
    return "\n".join(lines)


def _effect_named(s: Mapping[str, Any]) -> str:
    """The effect a power summary plans for: min_effect by name, else its value."""
    same = s.get("effect", s["min_effect"]) == s["min_effect"]
    return "min_effect" if same else format(s["effect"], "g")
