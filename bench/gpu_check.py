"""Two trials of the Lightning example share one real GPU: what each one saw, and what the run
counted.

    PYTHONPATH=. python bench/gpu_check.py [--gpu 0] [--fraction 0.5] [--out gpu_check.json]
    PYTHONPATH=. python bench/gpu_check.py --address HEAD:6379      # on a cluster instead

For any machine with a CUDA GPU (torch with CUDA, lightning installed). It copies
examples/lightning (docs/lightning.md) into a temporary folder and runs its contract
through the real `plan run`, changed only so that the check means something:

- `trainer.accelerator=gpu` and `trainer.devices=1` for every arm (the example's
  default is `auto`), so a trial that gets no GPU fails instead of training on the CPU;
- `budget.resources: {cpu: 1, gpu: FRACTION}` (0.5: two trials on one GPU at once);
- 2 tuning trials an arm, no early stopping, seeds [0, 1]: every trial runs to the end;
- an embedded local Ray that sees one GPU (`CUDA_VISIBLE_DEVICES=GPU` in plan run's
  environment, which Ray's GPU detection honours), unless --address names a cluster;
- `command.run` is `python gpu_probe.py`: it records what the trial saw
  (CUDA_VISIBLE_DEVICES, torch's devices, the GPU's name, when it ran, the memory it
  allocated on the GPU) into the trial's folder, then runs train.py unchanged
  (runpy, so Hydra, its config and its overrides are exactly the app's).

It prints one line per trial and the run's Cost section, writes the facts to --out, and
checks: every trial completed; each saw exactly one GPU and allocated memory on it; two
trials ran at once on the same GPU (never more than 1 / FRACTION); the report counts
gpu-seconds (trial-seconds x FRACTION). Exit 0 when all hold, 1 when one does not, 2 when
there is no GPU to check. `--accelerator cpu` (with `--fraction 0`) runs the same wiring
without a GPU, to check the script itself; its GPU checks are skipped.
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from planner._store.writer import read_jsonl  # the one reader of trials.jsonl

REPO = Path(__file__).resolve().parent.parent

PROBE = '''"""What this trial saw of the GPU, then train.py unchanged (written by bench/gpu_check.py)."""
import json, os, runpy, sys, time

import torch

app = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py")
facts = {"trial_id": os.environ.get("PLANNER_TRIAL_ID"), "phase": os.environ.get("PLANNER_PHASE"),
         "pid": os.getpid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
         "cuda_available": torch.cuda.is_available(), "device_count": torch.cuda.device_count(),
         "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
         "start": time.time(), "end": None, "max_memory_allocated": None, "exit": None}
out = os.path.join(os.environ.get("PLANNER_TRIAL_DIR", "."), f"gpu-probe-{os.getpid()}.json")


def write():
    with open(out + ".tmp", "w") as f:
        json.dump(facts, f)
    os.replace(out + ".tmp", out)


write()
sys.argv[0] = app
try:
    runpy.run_path(app, run_name="__main__")
    facts["exit"] = 0
except SystemExit as stop:
    facts["exit"] = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    raise
finally:
    facts["end"] = time.time()
    if torch.cuda.is_available():
        facts["max_memory_allocated"] = int(torch.cuda.max_memory_allocated())
    write()
'''


def prepare(example: Path, work: Path, args) -> Path:
    """The example copied into `work`, its contract changed as the module docstring says."""
    app = work / "lightning"
    shutil.copytree(example, app, ignore=shutil.ignore_patterns("runs", "outputs", "__pycache__"))
    (app / "gpu_probe.py").write_text(PROBE)
    contract = yaml.safe_load((app / "contract.yaml").read_text())
    contract["name"] = "gpu-check"
    contract["command"]["run"] = "python gpu_probe.py"
    contract.setdefault("config", {})
    contract["config"]["overrides"] = [
        *contract["config"].get("overrides", []),
        f"trainer.accelerator={args.accelerator}",
        "trainer.devices=1",
    ]
    contract["seeds"] = [0, 1]
    contract["budget"]["exposure"] = args.epochs
    contract["budget"]["resources"] = {"cpu": 1, "gpu": args.fraction}
    contract["tuning"]["trials_per_arm"] = 2
    contract["tuning"].pop("early_stop", None)
    path = app / "contract.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def _env() -> dict[str, str]:
    """This environment, with this checkout's planner importable (after any PYTHONPATH given)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [*[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p], str(REPO)]
    )
    return env


def plan_run(contract: Path, work: Path, args) -> tuple[subprocess.CompletedProcess, float]:
    env = _env()
    if args.address is None and args.accelerator == "gpu":
        env["CUDA_VISIBLE_DEVICES"] = args.gpu  # the embedded Ray sees this one GPU only
    cmd = [
        sys.executable,
        "-m",
        "planner",
        "run",
        str(contract),
        "--runs-dir",
        str(work / "runs"),
        "--quiet",
    ]
    if args.address is not None:
        cmd += ["--address", args.address]
    started = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=work, env=env, capture_output=True, text=True, timeout=args.timeout
    )
    return proc, time.monotonic() - started


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most of these (start, end) intervals open at one moment."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, delta in edges:
        now += delta
        most = max(most, now)
    return most


def _lightning_saw(trial_dir: Path) -> str:
    """Lightning's own line about the accelerator, from the trial's last attempt's logs."""
    for log in sorted(trial_dir.glob("attempt-*/std*.log"), reverse=True):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("GPU available:"):
                return line.strip()
    return "-"


def summarize(run_dir: Path, args) -> tuple[dict, list[str]]:
    """The facts of the run and the checks that failed."""
    records = read_jsonl(run_dir / "trials.jsonl")
    probes = {}
    for path in run_dir.glob("trials/*/gpu-probe-*.json"):
        fact = json.loads(path.read_text())
        probes.setdefault(fact["trial_id"], []).append(fact)
    report = subprocess.run(
        [sys.executable, "-m", "planner", "report", str(run_dir), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    cost = json.loads(report.stdout)["cost"] if report.returncode == 0 else []
    markdown = subprocess.run(
        [sys.executable, "-m", "planner", "report", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    ).stdout
    cost_md = (
        "## Cost" + markdown.split("## Cost", 1)[1].split("\n## ", 1)[0]
        if "## Cost" in markdown
        else "(the report has no Cost section)"
    )
    trials = []
    for r in records:
        last = (probes.get(r["trial_id"]) or [{}])[-1]
        trials.append(
            {
                "trial_id": r["trial_id"],
                "phase": r["phase"],
                "arm": r["arm"],
                "status": r["status"],
                "duration_s": r.get("duration_s"),
                "node_id": r.get("node_id"),
                **{
                    k: last.get(k)
                    for k in (
                        "cuda_visible_devices",
                        "device_count",
                        "devices",
                        "start",
                        "end",
                        "max_memory_allocated",
                    )
                },
                "lightning": _lightning_saw(run_dir / "trials" / r["trial_id"]),
            }
        )
    spans = [(f["start"], f["end"]) for facts in probes.values() for f in facts if f.get("end")]
    facts = {
        "run_dir": str(run_dir),
        "trials": trials,
        "most_at_once": most_at_once(spans),
        "cost": cost,
        "cost_md": cost_md,
    }
    failed = [f"{t['trial_id']}: {t['status']}" for t in trials if t["status"] != "completed"]
    if not records:
        failed.append("no trial records")
    if args.accelerator == "gpu":
        failed += [
            f"{t['trial_id']} saw {t['device_count']} GPUs "
            f"(CUDA_VISIBLE_DEVICES={t['cuda_visible_devices']})"
            for t in trials
            if t["device_count"] != 1 or not t["cuda_visible_devices"]
        ]
        failed += [
            f"{t['trial_id']} allocated nothing on the GPU"
            for t in trials
            if not t["max_memory_allocated"]
        ]
        if len({t["cuda_visible_devices"] for t in trials}) != 1:
            failed.append("the trials did not all get the same GPU")
        share = round(1 / args.fraction) if args.fraction else 1
        if not 2 <= facts["most_at_once"] <= share:
            failed.append(
                f"at most {facts['most_at_once']} trials ran at once; expected 2 to {share}"
            )
        if not cost or not all(c["gpu_seconds"] > 0 for c in cost):
            failed.append(f"the report's cost has no gpu-seconds: {cost}")
    return facts, failed


def print_facts(
    facts: dict, failed: list[str], proc: subprocess.CompletedProcess, wall: float
) -> None:
    print(f"plan run exit {proc.returncode} in {wall:.0f} s; run folder {facts['run_dir']}")
    print(
        "\n| trial | phase | arm | status | s | CUDA_VISIBLE_DEVICES | GPUs seen | GPU max MiB | "
        "Lightning said |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for t in facts["trials"]:
        mib = f"{t['max_memory_allocated'] / 2**20:.1f}" if t["max_memory_allocated"] else "-"
        seen = ", ".join(t["devices"] or []) or "-"
        print(
            f"| {t['trial_id']} | {t['phase']} | {t['arm']} | {t['status']} | "
            f"{t['duration_s'] or 0:.1f} | "
            f"{t['cuda_visible_devices']} | {seen} | {mib} | {t['lightning']} |"
        )
    print(f"\nmost trials running at once: {facts['most_at_once']}\n")
    print(facts["cost_md"].rstrip())
    print("\nchecks: " + ("all held" if not failed else "FAILED\n- " + "\n- ".join(failed)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--example", type=Path, default=REPO / "examples" / "lightning")
    parser.add_argument(
        "--gpu",
        default=os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0],
        help="the one GPU the embedded Ray sees (default: the first visible)",
    )
    parser.add_argument(
        "--fraction", type=float, default=0.5, help="budget.resources.gpu of a trial"
    )
    parser.add_argument("--accelerator", choices=["gpu", "cpu"], default="gpu")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument(
        "--address", default=None, help="a Ray cluster (host:port) instead of an embedded Ray"
    )
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--out", type=Path, default=None, help="write the facts as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if not (args.example / "train.py").is_file():
        print(
            f"no Lightning example at {args.example} (examples/lightning, docs/lightning.md)",
            file=sys.stderr,
        )
        return 2
    if args.accelerator == "gpu":
        import torch

        if not torch.cuda.is_available():
            print(
                "no CUDA GPU visible to torch on this machine: nothing to check (--accelerator "
                "cpu runs the "
                "wiring without one)",
                file=sys.stderr,
            )
            return 2
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    try:
        proc, wall = plan_run(prepare(args.example, work, args), work, args)
        folders = [p for p in (work / "runs").glob("*/*") if (p / "run.json").is_file()]
        if len(folders) != 1:
            print(
                f"plan run left no run folder (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                f"{proc.stderr[-3000:]}",
                file=sys.stderr,
            )
            return 1
        facts, failed = summarize(folders[0], args)
        if proc.returncode != 0:
            failed.append(f"plan run exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        print_facts(facts, failed, proc, wall)
        if args.out is not None:
            args.out.write_text(
                json.dumps({**facts, "failed": failed, "exit": proc.returncode}, indent=2)
            )
        return 1 if failed else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
