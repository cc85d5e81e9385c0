"""`planner.LightningCallback`: a Lightning Trainer that trains inside a function trainable.

A function trainable (`train(config, trial)`) adds the callback to its Trainer:

    callback = planner.LightningCallback(trial)          # seeds everything with trial.seed
    trainer = L.Trainer(max_epochs=callback.max_epochs, callbacks=[callback])
    trainer.fit(model, datamodule=data, ckpt_path=callback.ckpt_path)
    trainer.test(model, datamodule=data)                 # metric.heldout, outside tuning

- At each training epoch's end (after its validation, and after the
  LightningModule's own `on_train_epoch_end`, so what it logs there is in
  the epoch's report), the scalars in `trainer.callback_metrics` are
  reported as `trial.report(epoch + 1, ...)`. In an epoch that did not
  validate (`check_val_every_n_epoch: 2`), the validation's metrics are left
  out (Lightning keeps the last ones: they are not this epoch's), and the
  first report waits for the first validation when the epoch lacks the
  contract's metric.
  A scheduler's stop (ASHA) is raised from that report, through Lightning's
  own interrupt handling (loggers finalized, teardown run), so the trial
  stops in-process.
- Before each report, Lightning's full checkpoint (weights, optimizer,
  schedulers, loops, callbacks' state) is written to
  `trial.dir/checkpoints/epoch=E-step=S.ckpt` (written aside, then renamed;
  the older one removed). When the trial's previous attempt was cut short,
  `ckpt_path` is the newest one, and the trial's record says which
  (`resumed_from`: its path inside the run folder, sha256, what it held).
- Outside tuning, when the contract names `metric.heldout` and the epochs
  did not log it, the last epoch's report waits for `trainer.test()`, whose
  metrics join it (a report's steps strictly increase: the test has no step
  of its own). During tuning the test's metrics are not reported.

Lightning is imported when this module is (`planner.LightningCallback` on
first use): `import planner` loads neither torch nor Lightning.
"""

from __future__ import annotations

import functools
import numbers
import os
import re
import stat
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.model_helpers import is_overridden

from planner._core.contract_terms import EPOCH_UNITS
from planner._core.errors import TrialProtocolError
from planner._core.records import stored_metric
from planner._trial import checkpoints
from planner._trial.shortfall import WAITING_FOR_TEST

FOLDER = "checkpoints"  # inside trial.dir
_NAME = re.compile(r"^epoch=(\d+)-step=(\d+)\.ckpt$")


class LightningCallback(pl.Callback):
    """Reports a Trainer's epochs to a planner trial, and saves and restores its checkpoints in
    `trial.dir`."""

    def __init__(self, trial: Any, *, seed: bool = True, checkpoints: bool = True):
        super().__init__()
        self.trial = trial
        self.checkpoints = checkpoints
        self._held: dict[str, Any] | None = (
            None  # the last epoch's report, waiting for trainer.test()
        )
        self._last: dict[str, Any] | None = None  # the last report this callback made, or restored
        self._history: list[
            dict[str, Any]
        ] = []  # every report of this training, restored ones first
        self._reported = False  # a report was made in this attempt
        self._ckpt_path: str | None = None
        self._looked = False
        self._after_module = (
            False  # the module has its own on_train_epoch_end: the report follows it
        )
        self._validated: int | None = None  # the last epoch (Lightning's count) a validation ran in
        self._val_keys: set[str] = (
            set()
        )  # what validation logs: not an epoch's own when it did not validate
        self._before_val: dict[str, float] = {}
        if seed:
            pl.seed_everything(trial.seed, workers=True, verbose=False)

    @property
    def max_epochs(self) -> int:
        """The trial's budget, in epochs: pass it as `Trainer(max_epochs=...)`."""
        return int(self.trial.budget)

    @property
    def folder(self) -> Path:
        return Path(self.trial.dir) / FOLDER

    @property
    def ckpt_path(self) -> str | None:
        """The newest checkpoint in trial.dir when the previous attempt was cut short, else None (a
        fresh start)."""
        if not self._looked:
            self._looked = True
            if getattr(self.trial, "resumed", False) and self.checkpoints:
                newest = newest_checkpoint(self.folder)
                self._ckpt_path = str(newest) if newest is not None else None
        return self._ckpt_path

    # -- Lightning's hooks
    # --------------------------------------------------------------------------------

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.world_size > 1:
            raise TrialProtocolError(
                f"LightningCallback runs one process a trial; this Trainer runs "
                f"{trainer.world_size} "
                "(devices=1, or one node and one device per trial)"
            )
        unit = getattr(self.trial, "unit", None)
        if isinstance(unit, str) and unit.strip().lower() not in EPOCH_UNITS:
            raise TrialProtocolError(
                f"budget.unit is {unit!r}, but LightningCallback counts epochs: it reports "
                "trial.report(epoch + 1, ...) and its max_epochs is the budget "
                f"({self.max_epochs} epochs); write budget.unit: epoch, with exposure in epochs"
            )
        if is_overridden("on_train_epoch_end", pl_module, parent=pl.LightningModule):
            self._follow_module_epoch_end(pl_module)
        if trainer.max_epochs != self.max_epochs:
            raise TrialProtocolError(
                f"Trainer(max_epochs={trainer.max_epochs}) but the trial's budget is "
                f"{self.max_epochs} epochs: pass max_epochs=callback.max_epochs"
            )

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Everything is restored by now: say on the trial which checkpoint it continues from."""
        restored = getattr(trainer, "ckpt_path", None)
        if (
            restored
            and self._ckpt_path
            and os.path.abspath(restored) == os.path.abspath(self._ckpt_path)
        ):
            resumed = describe(Path(self._ckpt_path), self.trial.dir)
            resumed["reports"] = (
                self._held_reports()
            )  # what this trial reported before (held_reports)
            self.trial.resumed_from = resumed

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._before_val = scalars(trainer.callback_metrics)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """After the module's own validation hooks: what the validation logged (new, or changed)."""
        if trainer.sanity_checking:
            return
        before = self._before_val
        self._val_keys |= {
            k for k, v in scalars(trainer.callback_metrics).items() if before.get(k) != v
        }
        self._validated = trainer.current_epoch

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self._after_module:
            self._epoch_end(trainer)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """The module's own on_train_epoch_end back as it was (the report no longer follows it)."""
        if getattr(vars(pl_module).get("on_train_epoch_end"), "_planner_follows", False):
            del vars(pl_module)["on_train_epoch_end"]
        self._after_module = False

    def _follow_module_epoch_end(self, pl_module: pl.LightningModule) -> None:
        """Report after the module's own on_train_epoch_end, where epoch metrics are often computed
        and logged (a torchmetrics `compute()`): Lightning calls a callback's on_train_epoch_end
        before the module's (only EarlyStopping and ModelCheckpoint after), which reported them one
        epoch late."""
        own: Any = pl_module.on_train_epoch_end  # may be a wrapper of ours, with __wrapped__
        while getattr(
            own, "_planner_follows", False
        ):  # a wrapper an earlier fit left (its teardown never ran)
            own = own.__wrapped__

        @functools.wraps(own)
        def on_train_epoch_end(*args: Any, **kwargs: Any) -> Any:
            out = own(*args, **kwargs)
            self._epoch_end(pl_module.trainer)
            return out

        on_train_epoch_end._planner_follows = True  # type: ignore[attr-defined]
        vars(pl_module)["on_train_epoch_end"] = on_train_epoch_end
        self._after_module = True

    def _epoch_end(self, trainer: pl.Trainer) -> None:
        if trainer.sanity_checking:
            return
        step = trainer.current_epoch + 1
        metrics = scalars(trainer.callback_metrics)
        validated = self._validated == trainer.current_epoch
        if not validated:  # what Lightning still holds of the last validation is not this epoch's
            metrics = {k: v for k, v in metrics.items() if k not in self._val_keys}
        if self.checkpoints:
            self._save(trainer, step, metrics)
        every = trainer.check_val_every_n_epoch
        if (
            not validated
            and not self._reported
            and isinstance(every, int)
            and every > 1
            and getattr(self.trial, "metric", None) not in metrics
        ):
            # the first report waits for the first validation (Trial.report wants the metric in it)
            return
        self._epoch_report(step, metrics)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """A continuation from the full budget's checkpoint trains no epoch: its restored last
        report is made again."""
        last = self._last
        if not self._reported and last is not None and last["step"] == self.max_epochs:
            self._epoch_report(last["step"], dict(last["metrics"]))

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        held, self._held = self._held, None
        if held is None or self.trial.phase == "tune":
            return
        notes = getattr(self.trial, "notes", None)
        if isinstance(notes, list) and _WAITING in notes:
            notes.remove(_WAITING)
        self._report(held["step"], {**held["metrics"], **scalars(trainer.callback_metrics)})

    def state_dict(self) -> dict[str, Any]:
        return {"last": self._last, "reports": list(self._history)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._last = state_dict.get("last")
        history = state_dict.get("reports")
        self._history = (
            [r for r in history if isinstance(r, dict)] if isinstance(history, list) else []
        )

    def _held_reports(self) -> list[dict[str, Any]]:
        """The reports the restored checkpoint's training made: its epochs before the last, then
        the last one's (saved before its report was made), as a record stores them (non-finite
        values as "nan"/"inf")."""
        last = self._last
        held = [r for r in self._history if last is None or r.get("step", 0) < last.get("step", 0)]
        held += [last] if last is not None else []
        return [
            {
                "step": int(r["step"]),
                "metrics": {
                    k: stored_metric(float(v))
                    for k, v in dict(r.get("metrics") or {}).items()
                    if isinstance(v, numbers.Real)
                },
            }
            for r in held
            if isinstance(r.get("step"), int)
        ]

    # -- reporting and saving
    # -------------------------------------------------------------------------------

    def _epoch_report(self, step: int, metrics: dict[str, float]) -> None:
        heldout = getattr(self.trial, "heldout", None)
        if (
            step == self.max_epochs
            and self.trial.phase != "tune"
            and heldout
            and heldout not in metrics
        ):
            self._held = {"step": step, "metrics": metrics}
            self._last, self._reported = {"step": step, "metrics": metrics}, True
            notes = getattr(self.trial, "notes", None)
            if isinstance(notes, list) and _WAITING not in notes:
                notes.append(
                    _WAITING
                )  # gone once trainer.test() has run: else it says why the last step is missing
            return
        self._report(step, metrics)

    def _report(self, step: int, metrics: dict[str, float]) -> None:
        self._last, self._reported = {"step": step, "metrics": metrics}, True
        if not self._history or self._history[-1]["step"] < step:
            self._history.append({"step": step, "metrics": dict(metrics)})
        self.trial.report(step, **metrics)

    def _save(self, trainer: pl.Trainer, step: int, metrics: dict[str, float]) -> None:
        """Lightning's full checkpoint of the epoch that ended, written aside and renamed; the
        older ones removed."""
        folder = self.folder
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise TrialProtocolError(
                f"{folder} is not a folder of the trial's own (a link or a file): "
                "no checkpoint is written through it"
            )
        folder.mkdir(parents=True, exist_ok=True)
        self._last = {"step": step, "metrics": metrics}  # saved in the checkpoint
        name = f"epoch={trainer.current_epoch}-step={trainer.global_step}.ckpt"
        partial = folder / f".{name}.partial"
        trainer.save_checkpoint(str(partial))
        os.replace(partial, folder / name)
        for old in folder.iterdir():
            if old.name != name and (_NAME.match(old.name) or old.name.endswith(".ckpt.partial")):
                old.unlink()  # a link is removed as a link


_WAITING = WAITING_FOR_TEST


def scalars(metrics: Any) -> dict[str, float]:
    """The one-number values of `trainer.callback_metrics` (tensors of one element, Python numbers)
    as floats."""
    out = {}
    for name, value in dict(metrics).items():
        if hasattr(value, "numel") and value.numel() == 1:
            out[str(name)] = float(value.detach().cpu().item())
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            out[str(name)] = float(value)
    return out


def newest_checkpoint(folder: Path) -> Path | None:
    """The checkpoint of the latest epoch among `epoch=E-step=S.ckpt` in `folder` (regular files,
    no link)."""
    if not folder.is_dir() or folder.is_symlink():
        return None
    found = []
    for path in folder.iterdir():
        match = _NAME.match(path.name)
        if match and stat.S_ISREG(os.lstat(path).st_mode):
            found.append(((int(match.group(1)), int(match.group(2))), path))
    return max(found)[1] if found else None


def describe(path: Path, trial_dir: str | os.PathLike) -> dict[str, Any]:
    """What a trial's record says of the checkpoint it continued from
    (`_trial.checkpoints.describe`: path in the run folder, sha256), with `held` read from the name
    Lightning's ModelCheckpoint gives it: `step` is planner's step (epochs completed: the last
    report it held), `epoch` and `global_step` as Lightning counts."""
    described = checkpoints.describe(path, trial_dir)
    match = _NAME.match(path.name)
    if match:
        described["held"] = {
            "step": int(match.group(1)) + 1,
            "epoch": int(match.group(1)),
            "global_step": int(match.group(2)),
        }
    return described
