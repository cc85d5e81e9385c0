# PYTHON_ARGCOMPLETE_OK
"""The `plan` command line: it parses, calls the planner's steps, and prints.

Shell completion is argcomplete's: `eval "$(plan completion bash)"` (or zsh, fish), or
`eval "$(register-python-argcomplete plan)"`; `_main` hands the parser to argcomplete, which answers
and exits only when the shell asks (its _ARGCOMPLETE variable is set).

Exit codes come from the one table, `planner._core.errors.EXIT_CODES`: a
command returns its result's code, a PlannerError its class's `exit_code`.
No traceback reaches a user unless they ask for it with --debug or PLANNER_DEBUG=1.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import dataclasses
import gc
import json
import math
import os
import sys
import threading
from collections.abc import Sequence

from planner._core.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    PlannerError,
    UsageError,
    disk_error,
)
from planner._core.lazy import lazy_import
from planner._core.redact import Redactor, ScrubbedStream
from planner._core.text import terminal_safe
from planner._core.version import VERSION
from planner._store.files import write_atomic

# Each command's own modules, imported when that command runs: they bring Ray and Optuna (run,
# reeval), pandas (report, export), Hydra and pydantic (validate, schema, power, estimate) or SciPy
# (power, audit), and `plan validate` or `plan status` must not pay for the others'
# (tests/e2e/test_validate_imports.py).
audit = lazy_import("planner._audit.audit")
contract_model = lazy_import("planner._contract.model")
contract_validate = lazy_import("planner._contract.validate")
driver = lazy_import("planner._dispatch.driver")
lineage_log = lazy_import("planner._lineage.log")
lineage_promote = lazy_import("planner._lineage.promote")
resolve = lazy_import("planner._lineage.resolve")
plan_estimate = lazy_import("planner._plan.estimate")
plan_pilot = lazy_import("planner._plan.pilot")
plan_seeds = lazy_import("planner._plan.seeds")
reeval_prepare = lazy_import("planner._reeval.prepare")
rerun = lazy_import("planner._reeval.rerun")
results_mlflow = lazy_import("planner._results.mlflow")
results_render = lazy_import("planner._results.render")
results_report = lazy_import("planner._results.report")
results_status = lazy_import("planner._results.run_status")
results_tables = lazy_import("planner._results.tables")
store_live = lazy_import("planner._store.live")
progress = lazy_import("planner._dispatch.progress")
# the text each command prints, beside the command's own modules
audit_text = lazy_import("planner._cli.audit_text")
estimate_text = lazy_import("planner._cli.estimate_text")
lineage_text = lazy_import("planner._cli.lineage_text")
power_text = lazy_import("planner._cli.power_text")
reeval_text = lazy_import("planner._cli.reeval_text")
run_text = lazy_import("planner._cli.run_text")
validate_text = lazy_import("planner._cli.validate_text")

RUN_DIR_HELP = "a run folder (runs/<name>/<run id>), or runs/<name>/latest for the last run started"


def _finite(text: str) -> float:
    """A finite number on the command line (argparse turns the ValueError into a usage error, exit
    2)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


_finite.__name__ = "finite number"


def _run_folder(text: str) -> str:
    """A run folder argument: the folder, or the run a `latest` pointer names (the one resolver,
    planner._store.live.follow_latest); a bad pointer is a usage error with its sentence."""
    try:
        return str(store_live.follow_latest(text))
    except PlannerError as error:
        raise argparse.ArgumentTypeError(terminal_safe(str(error))) from None


_run_folder.__name__ = "run folder"


def _add_validate(sub) -> None:
    p = sub.add_parser("validate", help="check a contract and show the experiment it plans")
    p.add_argument("contract", help="the contract YAML file")
    p.add_argument("--json", action="store_true", help="print the diagnostics and summary as JSON")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.add_argument(
        "--pilot",
        metavar="RUN_DIR",
        type=_run_folder,
        help="warn when the declared seeds are underpowered, from a pilot run",
    )
    p.add_argument(
        "--runs-dir",
        default="runs",
        help="the project's runs and ledger, for a baseline from a line and "
        "the ledger's warnings (default: ./runs)",
    )
    p.set_defaults(handler=_cmd_validate)


def _add_schema(sub) -> None:
    p = sub.add_parser("schema", help="print the contract's JSON Schema (for editors)")
    p.set_defaults(handler=_cmd_schema)


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="tune, confirm and decide, through Ray")
    p.add_argument("contract", help="the contract YAML file")
    p.add_argument("--runs-dir", default="runs", help="where run folders go (default: ./runs)")
    p.add_argument(
        "--address",
        default=None,
        help="a Ray cluster address (default: RAY_ADDRESS, else an embedded local Ray)",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        type=_run_folder,
        default=None,
        help="continue a run that was stopped (its folder, or runs/<name>/latest)",
    )
    p.add_argument(
        "--storage",
        metavar="URI",
        default=None,
        help="where trials keep their files for every node (s3://, gs://, a shared path): a "
        "checkpoint saved on one node continues the trial on another; overrides the contract's "
        "`storage:`, and a --resume must keep the run's storage (docs/cluster.md)",
    )
    p.add_argument("--quiet", action="store_true", help="no live progress, only the result")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the result as JSON on standard output (no live progress; the run folder's line "
        "goes to standard error)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="run every trial even when the first ones can only fail (no fail fast)",
    )
    p.set_defaults(handler=_cmd_run)


def _add_status(sub) -> None:
    p = sub.add_parser("status", help="where a run stands")
    p.add_argument("run_dir", type=_run_folder, help=RUN_DIR_HELP)
    p.add_argument(
        "--json", action="store_true", help="print the status as JSON (with --watch: one a line)"
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="refresh in place until the run is no longer running (Ctrl-C leaves)",
    )
    p.add_argument(
        "--interval",
        type=_finite,
        default=2.0,
        help="seconds between refreshes with --watch (default: 2)",
    )
    p.set_defaults(handler=_cmd_status)


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="the run's report: decisions, curves, trials, identity")
    p.add_argument("run_dir", type=_run_folder, help=RUN_DIR_HELP)
    p.add_argument(
        "--format",
        choices=["md", "html", "json"],
        default="md",
        help="markdown (default), one self-contained HTML page, or JSON",
    )
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument(
        "--output", "-o", default=None, help="write to this file instead of standard output"
    )
    p.add_argument(
        "--force", action="store_true", help="replace an existing file that is not a report"
    )
    p.set_defaults(handler=_cmd_report)


def _add_export(sub) -> None:
    p = sub.add_parser(
        "export", help="write the run's tables (trials, reports, decisions), or log it to MLflow"
    )
    p.add_argument("run_dir", type=_run_folder, help=RUN_DIR_HELP)
    p.add_argument(
        "--format",
        choices=["parquet", "csv"],
        default="parquet",
        help="the tables' file format (default: parquet)",
    )
    p.add_argument(
        "--output", "-o", default=None, help="folder to write to (default: RUN_DIR/export)"
    )
    p.add_argument(
        "--mlflow",
        metavar="URI",
        default=None,
        help="log the run to this MLflow tracking URI instead (sqlite:///mlflow.db, http://...): "
        "a parent run with the contract, decisions and HTML report, a child run per trial",
    )
    p.add_argument(
        "--experiment",
        default=None,
        help="the MLflow experiment (default: the contract's name; created when missing)",
    )
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(handler=_cmd_export)


def _add_reeval(sub) -> None:
    p = sub.add_parser("reeval", help="re-run an arm's selected config exactly as logged")
    p.add_argument("run_dir", type=_run_folder, help=RUN_DIR_HELP)
    p.add_argument("--arm", required=True, help="the arm whose selected config runs again")
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="new seeds (default: the logged confirmation seeds)",
    )
    p.add_argument(
        "--tolerance",
        type=_finite,
        default=0.0,
        help="largest per-seed difference that still reproduces",
    )
    p.add_argument(
        "--address",
        default=None,
        help="a Ray cluster address (default: RAY_ADDRESS, else an embedded local Ray)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=_cmd_reeval)


def _add_power(sub) -> None:
    p = sub.add_parser(
        "power", help="seeds needed for the contract's min_effect, from a pilot's spread"
    )
    p.add_argument("contract", help="the contract YAML file")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--pilot",
        metavar="RUN_DIR",
        type=_run_folder,
        help="a run folder whose confirmation values give the spread",
    )
    src.add_argument(
        "--sd",
        type=_finite,
        help="the seed-to-seed sd of the decision metric (paired: of the differences)",
    )
    p.add_argument(
        "--effect",
        type=_finite,
        default=None,
        help="the true effect to plan for (default min_effect; required under acceptance.rule "
        "margin)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(handler=_cmd_power)


def _add_estimate(sub) -> None:
    p = sub.add_parser("estimate", help="planned trials, exposure and a wall-time forecast")
    p.add_argument("contract", help="the contract YAML file")
    p.add_argument(
        "--pilot",
        metavar="RUN_DIR",
        type=_run_folder,
        default=None,
        help="a finished run of this contract whose timing gives the wall-time forecast",
    )
    p.add_argument(
        "--slots",
        type=int,
        default=None,
        help="parallel trial slots (default: this machine's CPUs / cpu per trial)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(handler=_cmd_estimate)


def _cmd_validate(args: argparse.Namespace) -> int:
    if args.exits_after and not args.pilot:
        # A process that only validates: what it allocates is a few parsed files, Hydra's composes
        # and the modules it imports (all alive to the end), and it exits without a teardown
        # (`_exit_now`). The cyclic collector's passes over those imports, as they come, would
        # find nothing to free before the exit does. (A pilot's run folder is read with it on.)
        gc.disable()
    result = resolve.validate(args.contract, strict=args.strict, runs_dir=args.runs_dir)
    if args.pilot:
        result = plan_seeds.with_pilot_power(result, args.pilot, strict=args.strict)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, default=str))
    else:
        print(
            validate_text.format_result(result),
            file=sys.stderr if result.unreadable else sys.stdout,
        )
    return result.exit_code


def _cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(contract_model.json_schema(), indent=2))
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    # The result is printed (the run folder already closed and unlocked) before an embedded Ray is
    # shut down; the process exits once it is, SIGINT and SIGTERM held off from the shutdown on
    # (the result stands), to the process's exit when this is its own command line (called
    # in-process, they are restored after).
    with driver.ray_shutdown_deferred(hold_signals_to_exit=getattr(args, "exits_after", False)):
        result = driver.run(
            args.contract,
            runs_dir=args.runs_dir,
            address=args.address,
            resume=args.resume,
            quiet=args.quiet or args.json,
            resume_argv=_resume_argv(args),
            keep_going=args.keep_going,
            stream=sys.stderr if args.json else None,
            storage=args.storage,
        )
        if args.json:
            _print_json(dataclasses.asdict(result))
        else:
            print(run_text.format_result(result), flush=True)
        return result.exit_code


def _resume_argv(args: argparse.Namespace) -> list[str]:
    """The options of this `plan run` that a `--resume` of it must repeat (the contract comes
    first)."""
    out = [args.contract]
    if args.address:
        out += ["--address", args.address]
    if getattr(args, "storage", None):
        out += ["--storage", args.storage]
    if args.quiet:
        out.append("--quiet")
    if getattr(args, "keep_going", False):
        out.append("--keep-going")
    return out


def _cmd_reeval(args: argparse.Namespace) -> int:
    plan = reeval_prepare.prepare(
        args.run_dir, args.arm, seeds=args.seeds, tolerance=args.tolerance
    )
    out = sys.stderr if args.json else sys.stdout
    print(terminal_safe(reeval_text.format_plan(plan)), file=out, flush=True)
    result = rerun.run_reeval(plan, address=args.address)
    if args.json:
        _print_json(_reeval_json(result))
    else:
        print(terminal_safe(reeval_text.format_result(result)))
    return result.exit_code


def _reeval_json(result) -> dict:
    """A reeval's result as data: the verdict, each seed's row, the estimates and their
    comparison."""
    plan = result.plan
    return {
        "run_dir": str(plan.run_dir),
        "run_id": plan.run_id,
        "arm": plan.arm,
        "metric": plan.metric,
        "seeds": list(plan.seeds),
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "rows": [dataclasses.asdict(row) for row in result.rows],
        "logged_estimate": result.logged_estimate,
        "new_estimate": result.new_estimate,
        "comparison": result.comparison,
    }


def _print_json(value) -> None:
    print(json.dumps(value, indent=2, default=str))


def _cmd_power(args: argparse.Namespace) -> int:
    contract = resolve.load_contract(args.contract).contract
    if args.pilot:
        pilot = plan_pilot.read_pilot(args.pilot, contract.metric.decision_metric)
        sd, source = plan_seeds.spread_from_pilot(pilot, contract.acceptance.test)
        other = plan_seeds.other_spread(pilot, contract.acceptance.test)
    else:
        sd, source, other = args.sd, "given with --sd", None
    summary = plan_seeds.power_summary(
        contract, sd, sd_source=source, effect=args.effect, other=other
    )
    _print_json(summary) if args.json else print(power_text.format_power(summary))
    return EXIT_OK


def _cmd_estimate(args: argparse.Namespace) -> int:
    contract = resolve.load_contract(args.contract).contract
    if args.slots is not None and args.slots < 1:
        raise UsageError(f"--slots must be at least 1, got {args.slots}")
    timing = None
    if args.pilot:
        timing = plan_pilot.read_pilot(args.pilot, contract.metric.decision_metric).require_timing()
    summary = plan_estimate.estimate(
        contract, timing, args.slots or plan_estimate.default_slots(contract)
    )
    _print_json(summary) if args.json else print(estimate_text.format_estimate(summary))
    return EXIT_OK


def _write_text(path: str, text: str) -> None:
    """Write atomically with the one atomic writer (nothing left behind); an unwritable path is a
    usage error."""
    try:
        write_atomic(path, text)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None


def _print_notes(command: str, notes: list[str]) -> None:
    for note in notes:
        print(f"plan {command}: note: {terminal_safe(note)}", file=sys.stderr)


def _cmd_status(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise UsageError(f"--interval must be more than 0 seconds, got {args.interval:g}")
    if not args.watch:
        status = results_status.read_status(args.run_dir)
        _print_json(status) if args.json else print(results_status.format_status(status), end="")
        return EXIT_OK
    try:
        if args.json:
            _watch_json(args.run_dir, args.interval)
        else:
            _watch_text(args.run_dir, args.interval)
    except KeyboardInterrupt:  # leaving the watch is how it ends early: the run goes on
        pass
    return EXIT_OK


def _still_running(status) -> bool:
    return status["state"] == "running" and status.get("lock_alive") is not False


def _watch_json(run_dir: str, interval: float) -> None:
    """One JSON object a line, each refresh, until the run is no longer running."""
    while True:
        status = results_status.read_status(run_dir)
        print(json.dumps(status, default=str), flush=True)
        if not _still_running(status):
            return
        threading.Event().wait(interval)


def _watch_text(run_dir: str, interval: float) -> None:
    """The status redrawn in place until the run is no longer running."""

    def snapshot() -> tuple[str, bool]:
        status = results_status.read_status(run_dir)
        return results_status.format_status(status), _still_running(status)

    progress.follow(snapshot, interval)


@contextlib.contextmanager
def _frozen_gc():
    """What is alive now (the modules, the run just read) left out of the cyclic collector's walks
    until the block ends (gc.freeze): it lives until then, so a walk of it frees nothing. The html
    report summarizes and draws after the read; each full collection there walked every module and
    the run again."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _cmd_report(args: argparse.Namespace) -> int:
    if args.json:
        if args.format not in ("md", "json"):
            raise UsageError(f"--json and --format {args.format} ask for two formats: give one")
        args.format = "json"
    results = results_render.load_for_report(args.run_dir, args.format)
    _print_notes("report", results.notes)
    with _frozen_gc():
        text = results_render.render(results, args.format)
    if args.output:
        results_render.write_report(args.output, text, force=args.force)
        print(f"wrote {args.output}")
    else:
        if args.format == "md" and sys.stdout.isatty():  # escaped for a file, plain for a person
            text = results_report.terminal_markdown(text)
        print(text, end="")
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    if args.mlflow is not None:
        if args.output is not None:
            raise UsageError("--output writes tables; --mlflow logs to MLflow: give one of them")
        summary = results_mlflow.log_run_to_mlflow(
            args.run_dir, tracking_uri=args.mlflow, experiment=args.experiment
        )
        if args.json:
            _print_json(dataclasses.asdict(summary))
        else:
            print(terminal_safe(results_mlflow.format_summary(summary)))
        return EXIT_OK
    if args.experiment is not None:
        raise UsageError("--experiment names an MLflow experiment: give it with --mlflow URI")
    results = results_tables.load_run(args.run_dir)
    _print_notes("export", results.notes)
    out_dir = args.output or os.path.join(args.run_dir, "export")
    written = [str(p) for p in results_tables.export_tables(results, out_dir, args.format)]
    if args.json:
        _print_json({"written": written})
    else:
        for path in written:
            print(f"wrote {path}")
    return EXIT_OK


def _add_audit(sub) -> None:
    p = sub.add_parser(
        "audit", help="findings, missing evidence and the next control, from a run folder alone"
    )
    p.add_argument("run_dir", type=_run_folder, help=RUN_DIR_HELP)
    p.add_argument("--json", action="store_true", help="print the audit as JSON")
    p.add_argument(
        "--next", metavar="FILE", default=None, help="write the next control's contract to FILE"
    )
    p.add_argument("--force", action="store_true", help="replace FILE of --next when it exists")
    p.set_defaults(handler=_cmd_audit)


def _cmd_audit(args: argparse.Namespace) -> int:
    if args.next and not args.force and os.path.lexists(args.next):
        raise UsageError(
            f"{args.next} exists: it was left as it is (it may be your contract); give another "
            f"file "
            "name for --next, or pass --force to replace it"
        )
    found = audit.audit_run(args.run_dir)
    print(audit.render_json(found) if args.json else audit_text.format_audit(found), end="")
    if args.next:
        if found.next is None:
            print(f"plan audit: no next control, so {args.next} is not written", file=sys.stderr)
            return EXIT_OK
        text, notes = audit.contract_text(found, args.next)
        _print_notes("audit", notes)
        _write_text(args.next, text)
        print(f"wrote {args.next}", file=sys.stderr if args.json else sys.stdout)
    return EXIT_OK


def _add_promote(sub) -> None:
    p = sub.add_parser(
        "promote", help="make an accepted arm the baseline of its line of work (or withdraw that)"
    )
    p.add_argument(
        "run_dir", type=_run_folder, help="a completed run folder (or runs/<name>/latest)"
    )
    p.add_argument("--arm", required=True, help="the accepted arm to promote")
    p.add_argument(
        "--note", default=None, help="why (kept in the ledger); required with --withdraw"
    )
    p.add_argument("--withdraw", action="store_true", help="withdraw this arm's promotion instead")
    p.add_argument(
        "--runs-dir",
        default=None,
        help="the runs dir whose ledger to write (default: the run's own)",
    )
    p.set_defaults(handler=_cmd_promote)


def _add_completion(sub) -> None:
    p = sub.add_parser("completion", help="print the shell code that completes plan's arguments")
    p.add_argument(
        "shell",
        choices=["bash", "zsh", "fish", "tcsh", "powershell"],
        help='the shell: add `eval "$(plan completion bash)"` to ~/.bashrc',
    )
    p.set_defaults(handler=_cmd_completion)


def _cmd_completion(args: argparse.Namespace) -> int:
    import argcomplete

    print(argcomplete.shellcode(["plan"], shell=args.shell), end="")
    return EXIT_OK


def _add_log(sub) -> None:
    p = sub.add_parser(
        "log", help="the lineage: baselines, experiments, decisions, promotions, forking paths"
    )
    p.add_argument(
        "--runs-dir", default="runs", help="the runs dir whose ledger to read (default: ./runs)"
    )
    p.add_argument("--json", action="store_true", help="print the lineage as JSON")
    p.set_defaults(handler=_cmd_log)


def _cmd_promote(args: argparse.Namespace) -> int:
    if args.withdraw:
        record = lineage_promote.withdraw(args.run_dir, args.arm, args.note, runs_dir=args.runs_dir)
    else:
        record = lineage_promote.promote(args.run_dir, args.arm, args.note, runs_dir=args.runs_dir)
    print(terminal_safe(lineage_text.format_promotion(record)))
    return 0


def _cmd_log(args: argparse.Namespace) -> int:
    log = lineage_log.build_log(args.runs_dir)
    _print_json(log) if args.json else print(lineage_text.format_log(log))
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `plan` parser. With `command`, only that subcommand is built when its `_add_<command>`
    exists (argparse's cost grows with each subcommand built, and every command pays it:
    docs/speed.md); anything else gets every subcommand, for help and errors."""
    parser = argparse.ArgumentParser(
        prog="plan", description="Plan and run controlled ML training experiments."
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the full trace of an internal error"
    )
    parser.add_argument("--version", action="version", version=f"plan (planner) {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders = (
        _add_validate,
        _add_schema,
        _add_run,
        _add_status,
        _add_report,
        _add_export,
        _add_reeval,
        _add_power,
        _add_estimate,
        _add_promote,
        _add_log,
        _add_audit,
        _add_completion,
    )
    only = [add for add in adders if add.__name__ == f"_add_{command}"]
    for add in only or adders:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Every byte `plan` prints goes through the redactor (secrets of the environment, URL
    userinfo, name=value).

    Called with no `argv` (the `plan` command, `python -m planner`) the process ends here
    (`_exit_now`)."""
    saved = sys.stdout, sys.stderr
    redactor = Redactor.for_run()
    sys.stdout, sys.stderr = (
        ScrubbedStream(sys.stdout, redactor),
        ScrubbedStream(sys.stderr, redactor),
    )
    try:
        with _any_encoding(saved):
            code = _main(argv)
    finally:
        sys.stdout, sys.stderr = saved
    if argv is None:
        _exit_now(code)
    return code


@contextlib.contextmanager
def _any_encoding(streams: Sequence[object]):
    """A character the terminal's encoding lacks (`é` under `LC_ALL=C` with UTF-8 mode off, an ASCII
    `PYTHONIOENCODING`) printed as `\\xe9` rather than failing the command; restored afterwards."""
    before = []
    for stream in streams:
        errors = getattr(stream, "errors", None)
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[attr-defined]
            before.append((stream, errors))
    try:
        yield
    finally:
        for stream, errors in before:
            with contextlib.suppress(AttributeError, ValueError, OSError):
                stream.reconfigure(errors=errors)  # type: ignore[attr-defined]


def _exit_now(code: int) -> None:
    """End the process as Python's own exit does, less its teardown of every module and object.

    In the order the interpreter follows at exit: the threads that are not daemons are joined (with
    the callbacks `threading` runs first, which tell a thread pool's workers to stop), every exit
    handler runs (Ray's shutdown hook, logging's flush and close, weak-reference finalizers such as
    a temporary folder's cleanup), the standard streams are flushed; then the process ends with
    `code`. What is left out is the interpreter freeing every object of every module one by one:
    0.2 s with Ray imported and 0.5 s with Ray Tune and Optuna as well, here, spent after the
    result was printed and the run folder was closed. A Python without these functions exits the
    ordinary way."""
    shutdown_threads = getattr(threading, "_shutdown", None)
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if shutdown_threads is None or run_exit_handlers is None:
        return
    shutdown_threads()
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (
            OSError,
            ValueError,
        ):  # a closed pipe or stream: as at an ordinary exit, nothing more to say
            pass
    os._exit(code)


def _written_folder(args: argparse.Namespace) -> str | None:
    """The folder a command writes, to name in a sentence about its disk."""
    for name in ("output", "resume", "run_dir", "runs_dir"):
        value = getattr(args, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def _main(argv: Sequence[str] | None = None) -> int:
    exits_after = (
        argv is None
    )  # the process's own command line (`plan`, `python -m planner`): it exits after
    argv = list(sys.argv[1:] if argv is None else argv)
    if (
        "_ARGCOMPLETE" in os.environ
    ):  # the shell asks for completions: argcomplete answers and exits
        import argcomplete

        argcomplete.autocomplete(build_parser())
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args = parser.parse_args(argv)
    args.exits_after = exits_after
    debug = args.debug or os.environ.get("PLANNER_DEBUG") == "1"
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe is caught here, not at exit
        return code
    except PlannerError as error:
        print(f"plan {args.command}: {terminal_safe(str(error))}", file=sys.stderr)
        return error.exit_code
    except BrokenPipeError:  # `plan ... | head`: the reader left; not an error of ours
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # Python's flush at exit then succeeds
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"plan {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # an internal bug: short message, trace on request
        disk = disk_error(error, _written_folder(args)) if isinstance(error, OSError) else None
        if disk is not None:  # a full or read-only disk: a fact of the machine, not a bug
            print(f"plan {args.command}: {terminal_safe(str(disk))}", file=sys.stderr)
            return disk.exit_code
        if debug:
            raise
        print(
            f"plan {args.command}: internal error: {type(error).__name__}: {error}\n"
            "This is a bug in planner. Run again with --debug (or PLANNER_DEBUG=1) to see the "
            "trace.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
