"""What `plan estimate` prints: each phase's trials and exposure, and the wall time a pilot
forecasts."""

from __future__ import annotations

from typing import Any

from planner._core.text import format_duration


def format_estimate(summary: dict[str, Any]) -> str:
    unit = summary["unit"]
    lines = [
        f"estimate for {summary['name']!r}: {summary['trials_planned']} trials planned, "
        f"{summary['steps_planned']} {unit}s of exposure at most ({summary['exposure']} per trial)"
    ]
    for p in summary["phases"]:
        head = f"  {p['phase']:<8} {p['trials']:>5} trials  {p['steps_planned']:>7} {unit}s planned"
        if p.get("steps_expected") is not None and p["steps_expected"] != p["steps_planned"]:
            head += f", {p['steps_expected']:.0f} expected (saves {100 * p['saving']:.0f} %)"
        elif p.get("steps_range"):
            low, high = p["steps_range"]
            head += (
                f", {low}-{high} expected (saves 0-{100 * p['saving_range'][1]:.0f} %, "
                f"data-dependent)"
            )
        if "wall_s" in p:
            head += f"; about {format_duration(p['wall_s'])}"
        lines.append(head)
        lines.append(f"           {p['note']}")
        if p.get("steps_synchronous") is not None:
            lines.append(
                f"           (synchronous successive halving would use "
                f"{p['steps_synchronous']:.0f}; "
                f"expected trials reaching each rung per sweep: "
                f"{', '.join(f'{r:.2f}' for r in p['reaching_per_sweep'])})"
            )
    if "wall_s" in summary:
        t = summary["timing"]
        startup = f", start-up {t['startup_s']:.3g} s" if t.get("startup_s") else ""
        lines.append(
            f"wall time: about {format_duration(summary['wall_s'])} on {summary['slots']} "
            f"slot(s), from the pilot's "
            f"{t['time_per_step_s']:.3g} s per {unit}, {t['overhead_s']:.3g} s overhead per trial, "
            f"{t['cold_start_s']:.3g} s cold start per phase{startup} (pilot ran {t['slots']} at "
            f"once)"
        )
        limit = summary.get("max_wall_time_s")
        if limit:
            fits = "fits within" if summary["wall_s"] <= limit else "EXCEEDS"
            lines.append(f"           {fits} budget.max_wall_time ({format_duration(limit)})")
    else:
        lines.append(f"wall time: give --pilot RUN_DIR for a forecast ({summary['slots']} slot(s))")
    return "\n".join(lines)
