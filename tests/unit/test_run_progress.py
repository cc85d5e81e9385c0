"""Live progress: counts per arm and phase, best so far, failures; plain lines when not a
terminal."""

import io

from planner._dispatch.progress import (
    LineDisplay,
    LiveDisplay,
    Progress,
    QuietDisplay,
    make_display,
)


def rec(tid, phase, arm, status, value=None, metric="acc"):
    reports = [] if value is None else [{"step": 3, "metrics": {metric: value}, "time_s": 1.0}]
    return {
        "trial_id": tid,
        "phase": phase,
        "arm": arm,
        "status": status,
        "exposure": 3,
        "reports": reports,
    }


def progress(mode="max"):
    return Progress(
        ["a", "b"],
        {("tune", "a"): 3, ("tune", "b"): 3, ("confirm", "a"): 2, ("confirm", "b"): 2},
        metric="acc",
        mode=mode,
        decision_metric="test",
        max_wall_time_s=3600,
    )


def test_counts_best_and_failures_per_arm_and_phase():
    p = progress()
    for _ in range(3):
        p.started("tune", "a")
    p.ended(rec("t0", "tune", "a", "completed", 0.5))
    p.ended(rec("t1", "tune", "a", "completed", 0.7))
    p.ended(rec("t2", "tune", "a", "failed"))
    p.ended(rec("c0", "confirm", "b", "diverged", float("nan"), metric="test"), was_running=False)
    cell = p.cell("tune", "a")
    assert (cell.ended, cell.running, cell.failed, cell.best) == (3, 0, 1, 0.7)
    assert p.cell("confirm", "b").diverged == 1
    assert p.totals() == (4, 10)
    assert "4/10 trials ended" in p.header() and "of 1:00:00" in p.header()


def test_best_follows_the_mode():
    p = progress("min")
    p.ended(rec("t0", "tune", "a", "completed", 0.5), was_running=False)
    p.ended(rec("t1", "tune", "a", "completed", 0.2), was_running=False)
    assert p.cell("tune", "a").best == 0.2


def test_plain_lines_when_not_a_terminal_and_nothing_when_quiet():
    p = progress()
    stream = io.StringIO()
    display = make_display(p, quiet=False, stream=stream)
    assert isinstance(display, LineDisplay)
    record = rec("tune-a-s1-t000", "tune", "a", "completed", 0.5)
    p.ended(record, was_running=False)
    display.update(record)
    display.note("selected for a: tune-a-s1-t000")
    lines = stream.getvalue().splitlines()
    assert "tune-a-s1-t000 completed acc=0.5" in lines[0] and "1/10 ended" in lines[0]
    assert lines[1].endswith("selected for a: tune-a-s1-t000")
    assert isinstance(make_display(p, quiet=True, stream=stream), QuietDisplay)


def test_the_live_table_renders_every_arm_and_phase():
    from rich.console import Console

    p = progress()
    p.ended(rec("t0", "tune", "b", "early_stopped", 0.1), was_running=False)
    display = LiveDisplay(p)
    console = Console(file=io.StringIO(), width=120)
    console.print(display._render())
    text = console.file.getvalue()
    for fragment in ("arm", "phase", "tune", "confirm", "0/3", "1/3", "early"):
        assert fragment in text


def _rendered(p, width=80) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width)
    console.print(LiveDisplay(p)._render())
    return console.file.getvalue()


def test_the_live_table_fits_80_columns_without_cutting_its_headers():
    long = "an-arm-with-a-rather-long-descriptive-name"
    p = Progress(
        ["base", long],
        {
            ("tune", "base"): 120,
            ("tune", long): 120,
            ("confirm", "base"): 30,
            ("confirm", long): 30,
        },
        metric="val_acc",
        mode="max",
        decision_metric="val_acc",
        max_wall_time_s=36000,
    )
    for i in range(100):
        p.ended(
            rec(f"t{i}", "tune", long, "completed", 0.123456789 + i, metric="val_acc"),
            was_running=False,
        )
    p.notes.append(
        "selected for " + long + ": tune-x-s100-t003 {'optimizer.lr': 0.0012345678901234} " * 2
    )
    text = _rendered(p)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    header = next(line for line in lines if line.lstrip().startswith("arm"))
    assert header.split() == [
        "arm",
        "phase",
        "ended",
        "running",
        "failed",
        "diverged",
        "early",
        "value",
    ], text
    assert "100/120" in text and "best 99.12" in text and "an-arm-with-a-r…" in text


def test_confirmation_rows_show_the_mean_so_far_tuning_rows_the_best():
    p = progress()
    p.ended(rec("t0", "tune", "a", "completed", 0.5), was_running=False)
    p.ended(rec("t1", "tune", "a", "completed", 0.7), was_running=False)
    p.ended(rec("c0", "confirm", "a", "completed", 0.6, metric="test"), was_running=False)
    p.ended(rec("c1", "confirm", "a", "completed", 0.8, metric="test"), was_running=False)
    from planner._dispatch.progress import table_rows

    rows = {(r[0], r[1]): r for r in table_rows(p)}
    assert rows[("a", "tune")][-1] == "best 0.7"
    assert rows[("a", "confirm")][-1] == "mean 0.7"  # (0.6 + 0.8) / 2, not the maximum 0.8
    assert rows[("b", "confirm")][-1] == "-"
    assert "mean 0.7" in _rendered(p)
