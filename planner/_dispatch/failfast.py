"""Fail fast: stop a run whose first trials can only fail, instead of spending its budget.

Two signs, each over the first trials of the run (`FAIL_FAST_K` of them, docs/running.md):

- the first K trials that ended (at least, and at least one of every arm, the baseline included) all
  failed with one error (grouped by `_core/records.error_groups`: paths, numbers, hex ids and trial
  ids normalized) and no trial succeeded: one arm that crashes while the baseline runs is no such
  sign;
- the first `METRIC_K` tuning trials to report reported no selection metric in their first
  `FIRST_REPORTS` reports, and no trial reported it at all (`val_accuracy` reported, `val_acc`
  declared): seen within seconds, long before those trials end.

What ended is kept; `plan run --keep-going` turns this off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner._core.records import error_groups, on_nodes
from planner._core.status import TrialStatus
from planner._core.text import noun

FAIL_FAST_K = 3  # trials: the first K ended trials, or the first K to report
METRIC_K = 2  # trials: the first to report (two slots see it at once)
FIRST_REPORTS = 2  # reports: a metric logged only every few steps is not missing
KEEP_GOING = "plan run --keep-going runs every trial"
# The trainable's own failures: a raise, a broken protocol. A limit's verdict (timeout, oom)
# depends on the budget the contract sets and is no sign that the trainable can only fail.
OWN_FAILURES = frozenset({TrialStatus.FAILED, TrialStatus.PROTOCOL_ERROR})


@dataclass
class FailFast:
    """The run's first trials, watched for the two signs; `reason` is set once one is seen."""

    metric: str
    arms: frozenset[str] = frozenset()  # every arm of the contract, the baseline included
    enabled: bool = True
    k: int = FAIL_FAST_K
    reason: str | None = None
    ended: list[dict] = field(default_factory=list)  # the trials that ended in this run, in order
    first: dict[str, list[frozenset[str]]] = field(
        default_factory=dict
    )  # trial -> its first reports' metrics
    reported: bool = False  # some trial reported the metric

    def should_stop(self) -> str | None:
        return self.reason

    def trial_ended(self, record: dict) -> None:
        self.ended.append(record)
        if not self.enabled or self.reason is not None:
            return
        groups = error_groups(self.ended)
        if record.get("status") not in OWN_FAILURES or len(groups) > 1:
            self.enabled = (
                False  # a trial that did not fail (or hit a limit), or another error: not one cause
            )
            return
        if len(self.ended) >= self.k and self.arms <= {r.get("arm") for r in self.ended}:
            g, n = groups[0], len(self.ended)
            self.reason = (
                f"the first {noun('trial', n)} all failed with one error and none succeeded: "
                f"{g['error']} (in {noun('trial', g['count'])}, first {g['first']}{on_nodes(g)}); "
                "stopped instead "
                f"of spending the budget, every ended trial is kept ({KEEP_GOING})"
            )

    def trial_reported(self, trial_id: str, metrics) -> None:
        """A tuning trial's report (its metric names)."""
        if not self.enabled or self.reason is not None or self.reported:
            return
        names = frozenset(metrics)
        if self.metric in names:
            self.reported = True
            return
        seen = self.first.setdefault(trial_id, [])
        if len(seen) < FIRST_REPORTS:
            seen.append(names)
        full = [t for t, reports in self.first.items() if len(reports) >= FIRST_REPORTS]
        if len(full) >= METRIC_K:
            got = sorted(set().union(*(n for t in full for n in self.first[t])))
            self.reason = (
                f"the first {noun('trial', len(full))} to report never reported the metric "
                f"{self.metric!r} in their first {FIRST_REPORTS} reports (they report "
                f"{', '.join(got) or 'nothing'}): the metric's name differs between the contract "
                f"and the trainable; stopped instead of spending the budget, every ended trial is "
                f"kept ({KEEP_GOING})"
            )
