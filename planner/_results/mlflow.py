"""Optional MLflow tracking: copy a finished run folder into MLflow (docs/mlflow.md).

Off by default; a contract turns it on with `tracking: {mlflow: {...}}` and the
planner calls `log_run_to_mlflow` when `plan run` ends. MLflow is an extra
(`pip install 'planner[mlflow]'`) and is imported only here, only when used.

The run folder stays the record; MLflow gets a copy that people can browse:

- one parent MLflow run per planner run (run name = run id), tagged with the
  run's identity, state and every arm's decision; effects and CIs as metrics;
- one child run per trial (run name = trial id): the trial's effective config as
  params (dotted paths), each report as metrics at its step, and tags carrying
  the identity (contract sha256, run id, commit, dirty, host, seed, arm, phase,
  status) and the arm's decision.

Logging the same run folder again adds only what is new (trials are found by
their `planner.trial_id` tag) and refreshes the tags that can change: the run
state and the decisions. A trial whose logging was cut short is logged again.

While `plan run` goes, `LiveMlflow` logs each trial as it ends (the parent run first, with the
contract's params); at the end `log_run_to_mlflow` adds what is left: the decisions, and the HTML
report and decisions.json as the parent run's artifacts. The experiment is tagged a classic
(model-training) experiment, so that MLflow 3 opens it in its runs view, not its GenAI view.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from planner._contract.paths import flatten
from planner._core.errors import MlflowTrackingError
from planner._core.status import RunState, TrialStatus
from planner._store import facts
from planner._store import read as rf

TAG_PREFIX = "planner."
KIND_RUN, KIND_TRIAL = "run", "trial"
_COMPLETE = "complete"
# MLflow 3's experiment tag that says which view its UI opens: a model-training experiment's runs,
# not the traces of a GenAI one (MLflow sets it itself on the experiments it makes for either kind).
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"

# planner trial status -> MLflow run status
_MLFLOW_STATUS = {  # every other status (planner._core.status.FAILED) is an MLflow FAILED run
    TrialStatus.COMPLETED: "FINISHED",
    TrialStatus.DIVERGED: "FINISHED",
    TrialStatus.EARLY_STOPPED: "KILLED",
}


@dataclass(frozen=True)
class MlflowLogSummary:
    """What one call of `log_run_to_mlflow` did."""

    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    trials_logged: int  # new MLflow runs made for trials
    trials_already_logged: int
    trials_updated: int  # existing trial runs whose decision tag changed
    lines_skipped: int  # unreadable lines of trials.jsonl
    artifacts: tuple[str, ...] = ()  # the parent run's artifacts logged by this call


def log_run_to_mlflow(
    run_dir: str | Path, tracking_uri: str | None = None, experiment: str | None = None
) -> MlflowLogSummary:
    """Log the run folder `run_dir` to MLflow; safe to call again (nothing is duplicated).

    `tracking_uri` defaults to MLflow's own resolution (MLFLOW_TRACKING_URI, ...);
    `experiment` defaults to the contract's name and is created when missing.
    """
    run = read_run_folder(run_dir)
    mlflow = _import_mlflow()
    from mlflow.exceptions import MlflowException

    try:
        return _log(mlflow, run, tracking_uri, experiment or run.name)
    except MlflowException as error:
        raise MlflowTrackingError(
            f"MLflow (tracking URI {tracking_uri or mlflow.get_tracking_uri()}) refused: "
            f"{error.message}"
        ) from None


def format_summary(summary: MlflowLogSummary) -> str:
    """What `plan export --mlflow` did, in a line or two."""
    line = (
        f"mlflow: {summary.trials_logged} trial(s) logged, {summary.trials_already_logged} already "
        f"there ({summary.trials_updated} updated) to {summary.tracking_uri}, experiment "
        f"{summary.experiment_id}, parent run {summary.parent_run_id}"
    )
    if summary.artifacts:
        line += f"; artifacts: {', '.join(summary.artifacts)}"
    if summary.lines_skipped:
        line += f"\nnote: {summary.lines_skipped} unreadable line(s) of trials.jsonl skipped"
    return line


def check_mlflow_tracking(tracking_uri: str | None, experiment: str) -> str:
    """Open the store and get or create the experiment, before any trial runs; returns its id.

    So that a store MLflow refuses fails the run at its start, not after the compute is spent.
    """
    mlflow = _import_mlflow()
    from mlflow.exceptions import MlflowException

    try:
        client = mlflow.MlflowClient(tracking_uri=tracking_uri)
        return _experiment_id(client, experiment)
    except MlflowException as error:
        raise MlflowTrackingError(
            f"MLflow (tracking URI {tracking_uri or mlflow.get_tracking_uri()}) refused: "
            f"{error.message}"
        ) from None


def _parent(client, experiment_id: str, run: MlflowRun, existing: dict) -> str:
    """The parent MLflow run of `run` (made, with the contract's params, when it is not there
    yet)."""
    from mlflow.entities import Metric, Param, RunTag

    parent = existing.pop(("run", run.run_id), None)
    if parent is not None:
        return parent.info.run_id
    parent_id = client.create_run(
        experiment_id,
        start_time=_ms(run.created),
        run_name=run.run_id,
        tags=_str_dict(run.run_tags()),
    ).info.run_id
    _log_batch(client, parent_id, RunTag, Metric, Param, params=run.contract_params())
    return parent_id


def _log(mlflow, run: MlflowRun, tracking_uri: str | None, experiment: str) -> MlflowLogSummary:
    from mlflow.entities import Metric, Param, RunTag

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    experiment_id = _experiment_id(client, experiment)
    existing = _existing_runs(client, experiment_id, run.run_id)
    parent_id = _parent(client, experiment_id, run, existing)
    _log_batch(
        client,
        parent_id,
        RunTag,
        Metric,
        Param,
        tags={**run.run_tags(), **run.decision_tags()},
        metrics=run.decision_metrics(),
    )

    logged = already = updated = 0
    for trial in run.trials:
        tags = run.trial_tags(trial)
        found = existing.get(("trial", trial["trial_id"]))
        if found is not None and found.data.tags.get(TAG_PREFIX + "logged") == _COMPLETE:
            already += 1
            changed = {k: v for k, v in tags.items() if found.data.tags.get(k) != _tag_value(v)}
            if changed:
                _log_batch(client, found.info.run_id, RunTag, Metric, Param, tags=changed)
                updated += 1
            continue
        if found is not None:  # logging was cut short last time: start that trial over
            client.delete_run(found.info.run_id)
        _log_trial(client, experiment_id, parent_id, trial, tags, RunTag, Metric, Param)
        logged += 1

    artifacts: tuple[str, ...] = ()
    if run.state != RunState.RUNNING:
        artifacts = _log_artifacts(client, parent_id, run)
        client.set_terminated(
            parent_id, status=_parent_status(run.state), end_time=_ms(run.updated)
        )
    return MlflowLogSummary(
        tracking_uri=tracking_uri or mlflow.get_tracking_uri(),
        experiment_id=experiment_id,
        parent_run_id=parent_id,
        trials_logged=logged,
        trials_already_logged=already,
        trials_updated=updated,
        lines_skipped=run.lines_skipped,
        artifacts=artifacts,
    )


def _log_artifacts(client, parent_id: str, run: MlflowRun) -> tuple[str, ...]:
    """The decisions (decisions.json as written) and the HTML report, as the parent run's
    artifacts."""
    from planner._results.render import load_for_report, render

    names = []
    if run.decisions_file:
        client.log_dict(parent_id, run.decisions_file, "decisions.json")
        names.append("decisions.json")
    client.log_text(parent_id, render(load_for_report(run.path, "html"), "html"), "report.html")
    names.append("report.html")
    return tuple(names)


class LiveMlflow:
    """Each trial logged to MLflow as it ends, while `plan run` goes (`trial_ended`); what the end
    adds (decisions, artifacts) is `log_run_to_mlflow`'s, which finds these trials by their tags."""

    def __init__(self, run_dir: str | Path, tracking_uri: str | None, experiment: str | None):
        self.mlflow = _import_mlflow()
        self.run = read_run_folder(run_dir)
        self.tracking_uri = tracking_uri
        with self._refused():
            self.client = self.mlflow.MlflowClient(tracking_uri=tracking_uri)
            self.experiment_id = _experiment_id(self.client, experiment or self.run.name)
            existing = _existing_runs(self.client, self.experiment_id, self.run.run_id)
            self.parent_id = _parent(self.client, self.experiment_id, self.run, existing)

    def trial_ended(self, record: Mapping[str, Any]) -> None:
        from mlflow.entities import Metric, Param, RunTag

        with self._refused():
            tags = self.run.trial_tags(record)
            _log_trial(
                self.client,
                self.experiment_id,
                self.parent_id,
                record,
                tags,
                RunTag,
                Metric,
                Param,
            )

    @contextlib.contextmanager
    def _refused(self):
        from mlflow.exceptions import MlflowException

        try:
            yield
        except MlflowException as error:
            uri = self.tracking_uri or self.mlflow.get_tracking_uri()
            raise MlflowTrackingError(
                f"MLflow (tracking URI {uri}) refused: {error.message}"
            ) from None


def _log_trial(client, experiment_id, parent_id, trial, tags, RunTag, Metric, Param) -> None:
    started = _ms(trial.get("started"))
    run_id = client.create_run(
        experiment_id,
        start_time=started,
        run_name=trial["trial_id"],
        tags={"mlflow.parentRunId": parent_id, **_str_dict(tags)},
    ).info.run_id
    params = {
        _mlflow_key(k): _param_value(v) for k, v in flatten(trial.get("config") or {}).items()
    }
    metrics = []
    for report in trial.get("reports") or []:
        timestamp = (started or 0) + int(1000 * float(report.get("time_s") or 0.0))
        for name, value in (report.get("metrics") or {}).items():
            metrics.append(Metric(_mlflow_key(name), float(value), timestamp, int(report["step"])))
    _log_batch(client, run_id, RunTag, Metric, Param, params=params, metric_objects=metrics)
    status = _MLFLOW_STATUS.get(trial.get("status"), "FAILED")
    client.set_tag(
        run_id, TAG_PREFIX + "logged", _COMPLETE
    )  # last: marks the trial as fully logged
    client.set_terminated(run_id, status=status, end_time=_ms(trial.get("ended")))


def _log_batch(
    client,
    run_id,
    RunTag,
    Metric,
    Param,
    *,
    tags=None,
    params=None,
    metrics=None,
    metric_objects=None,
) -> None:
    """log_batch within MLflow's limits (100 params or tags, 1000 entities per call)."""
    tag_items = [RunTag(k, _tag_value(v)) for k, v in (tags or {}).items()]
    param_items = [Param(k, v) for k, v in (params or {}).items()]
    metric_items = list(metric_objects or [])
    metric_items += [Metric(_mlflow_key(k), float(v), 0, 0) for k, v in (metrics or {}).items()]
    for chunk in _chunks(tag_items, 100):
        client.log_batch(run_id, tags=chunk)
    for chunk in _chunks(param_items, 100):
        client.log_batch(run_id, params=chunk)
    for chunk in _chunks(metric_items, 1000):
        client.log_batch(run_id, metrics=chunk)


def _chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _import_mlflow():
    try:
        import mlflow
    except ImportError:
        raise MlflowTrackingError(
            "the contract asks for MLflow tracking (tracking.mlflow), but mlflow is not installed; "
            "install it with: pip install 'planner[mlflow]'"
        ) from None
    return mlflow


def _experiment_id(client, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        if found.lifecycle_stage == "deleted":
            raise MlflowTrackingError(
                f"the MLflow experiment {name!r} is deleted; restore it, or name another in "
                f"tracking.mlflow.experiment"
            )
        if found.tags.get(EXPERIMENT_KIND_TAG) is None:  # one a user marked otherwise is theirs
            client.set_experiment_tag(found.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return found.experiment_id
    return client.create_experiment(
        name,
        artifact_location=_artifact_location(client.tracking_uri),
        tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
    )


def _artifact_location(tracking_uri: str | None) -> str | None:
    """Beside a sqlite store's file, `mlartifacts/` (as `mlflow server` keeps them): MLflow's own
    default for a sqlite store is ./mlruns of whatever folder the process runs in. None: MLflow's
    default."""
    if not tracking_uri or not tracking_uri.startswith("sqlite:///"):
        return None
    database = Path(tracking_uri[len("sqlite:///") :].split("?", 1)[0])
    if not database.name or database.name == ":memory:":
        return None
    return (database.resolve().parent / "mlartifacts").as_uri()


def _existing_runs(client, experiment_id: str, run_id: str) -> dict[tuple[str, str], Any]:
    """MLflow runs already made for this planner run, keyed by ("run", run id) or ("trial", trial
    id)."""
    out = {}
    query = f"tags.`{TAG_PREFIX}run_id` = '{run_id}'"
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=query, max_results=1000, page_token=token
        )
        for found in page:
            tags = found.data.tags
            if tags.get(TAG_PREFIX + "kind") == KIND_RUN:
                out[("run", run_id)] = found
            elif TAG_PREFIX + "trial_id" in tags:
                out[("trial", tags[TAG_PREFIX + "trial_id"])] = found
        token = page.token
        if not token:
            return out


# ------------------------------------------------------------ the run folder


@dataclass
class MlflowRun:
    """What MLflow needs from a run folder (docs/run-folder.md), as planner._store.read reads it."""

    path: Path
    run_id: str
    name: str
    contract_sha256: str
    created: str | None
    planner_version: str | None
    state: str
    updated: str | None
    identity: dict[str, Any]
    baseline: str | None
    decisions: dict[str, dict[str, Any]]
    trials: list[Mapping[str, Any]]
    lines_skipped: int
    contract: dict[str, Any]  # the frozen contract
    decisions_file: dict[str, Any] | None  # decisions.json as written

    def contract_params(self) -> dict[str, str]:
        """The frozen contract, one param per leaf by dotted path (as a trial's config is
        logged)."""
        return {_mlflow_key(k): _param_value(v) for k, v in flatten(self.contract).items()}

    def run_tags(self) -> dict[str, Any]:
        code = self.identity.get("code") or {}
        host = self.identity.get("host") or {}
        tags = {
            "kind": KIND_RUN,
            "run_id": self.run_id,
            "contract": self.name,
            "contract_sha256": self.contract_sha256,
            "planner_version": self.planner_version,
            "run_state": self.state,
            "commit": code.get("commit"),
            "dirty": code.get("dirty"),
            "host": host.get("hostname"),
            "baseline": self.baseline,
            "run_dir": str(self.path),
        }
        return {TAG_PREFIX + k: v for k, v in tags.items() if v is not None}

    def decision_tags(self) -> dict[str, Any]:
        return {
            f"{TAG_PREFIX}decision.{_mlflow_key(arm)}": d.get("decision")
            for arm, d in self.decisions.items()
            if d.get("decision") is not None
        }

    def decision_metrics(self) -> dict[str, float]:
        out = {}
        for arm, decision in self.decisions.items():
            for field in ("effect", "ci_low", "ci_high", "p_value"):
                value = decision.get(field)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    out[f"{field}.{arm}"] = float(value)
        return out

    def trial_tags(self, trial: Mapping[str, Any]) -> dict[str, Any]:
        code = self.identity.get("code") or {}
        host = self.identity.get("host") or {}
        arm = trial.get("arm")
        if arm == self.baseline:
            decision = "baseline"
        else:
            decision = (self.decisions.get(str(arm)) or {}).get("decision") or "none"
        tags = {
            "kind": KIND_TRIAL,
            "run_id": self.run_id,
            "trial_id": trial["trial_id"],
            "contract_sha256": trial.get("contract_sha256") or self.contract_sha256,
            "commit": code.get("commit"),
            "dirty": code.get("dirty"),
            "host": trial.get("host") or host.get("hostname"),
            "seed": trial.get("seed"),
            "arm": arm,
            "phase": trial.get("phase"),
            "status": trial.get("status"),
            "exposure": trial.get("exposure"),
            "attempts": trial.get("attempts"),
            "sampled": ",".join(sorted(trial.get("params") or {})),
            "decision": decision,
        }
        return {TAG_PREFIX + k: v for k, v in tags.items() if v is not None}


def read_run_folder(run_dir: str | Path) -> MlflowRun:
    """Read a run folder through the one reader; a missing run.json is an error, the rest may be
    absent or partial.

    trials.jsonl by the one JSON-lines policy (docs/run-folder.md); a trial logged twice counts
    with its last record, as for every reader. `lines_skipped` counts the lines that policy skipped.
    """
    path = Path(run_dir).resolve()
    folder = rf.RunFolder(path)
    run = folder.json("run.json")
    if run is None:
        raise MlflowTrackingError(f"{path} is not a planner run folder: it has no run.json")
    missing = [key for key in ("run_id", "name", "contract_sha256") if key not in run]
    if missing:
        raise MlflowTrackingError(
            f"{path / 'run.json'} lacks {', '.join(missing)}; is {path} a planner run folder?"
        )
    state = folder.state() or {}
    decisions_file = folder.decisions() or {}
    decisions = {
        d["arm"]: d
        for d in decisions_file.get("decisions") or []
        if isinstance(d, dict) and "arm" in d
    }
    read = folder.trials()
    by_id: dict[str, Mapping[str, Any]] = {}
    for record in read.records:
        by_id[record["trial_id"]] = (
            record  # a trial logged twice: the last record counts (docs/run-folder.md)
        )
    contract = folder.contract()
    baseline = facts.contract_get(contract, "baseline.name")
    return MlflowRun(
        path=path,
        run_id=str(run["run_id"]),
        name=str(run["name"]),
        contract_sha256=str(run["contract_sha256"]),
        created=run.get("created"),
        planner_version=run.get("planner_version"),
        state=str(state.get("state") or decisions_file.get("run_state") or "unknown"),
        updated=state.get("updated"),
        identity=folder.identity() or {},
        baseline=None if baseline is None else str(baseline),
        decisions=decisions,
        trials=list(by_id.values()),
        lines_skipped=len(read.notes),
        contract=contract if isinstance(contract, dict) else {},
        decisions_file=folder.decisions(),
    )


# ------------------------------------------------------------------ helpers


_BAD_KEY_CHARS = re.compile(r"[^\w.\- /:]")


def _mlflow_key(key: str) -> str:
    """MLflow keys allow letters, digits, `_ - . / : space`; anything else becomes `_`."""
    return _BAD_KEY_CHARS.sub("_", str(key))[:250]


def _param_value(value: Any) -> str:
    text = (
        json.dumps(value) if isinstance(value, list | dict | bool) or value is None else str(value)
    )
    return text if len(text) <= 6000 else text[:5997] + "..."


def _tag_value(value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return text if len(text) <= 8000 else text[:7997] + "..."


def _str_dict(tags: Mapping[str, Any]) -> dict[str, str]:
    return {k: _tag_value(v) for k, v in tags.items()}


def _ms(timestamp: str | None) -> int | None:
    if not timestamp:
        return None
    try:
        return int(datetime.fromisoformat(timestamp).timestamp() * 1000)
    except ValueError:
        return None


def _parent_status(state: str) -> str:
    statuses: dict[str, str] = {
        RunState.COMPLETED: "FINISHED",
        RunState.INTERRUPTED: "KILLED",
        RunState.BUDGET_EXHAUSTED: "FINISHED",
    }
    return statuses.get(state, "FAILED")
