"""The experiment contract, version 1, as pydantic models (schema: docs/contract.md).

These models check shape, types and ranges of single fields. Rules that need
several fields at once or the composed configs (matching, seeds disjoint, grid
sampler, ...) live in `planner._contract.rules`, which reports them with stable codes.
Every model forbids unknown keys.
"""

# No `from __future__ import annotations` here: with it pydantic evaluates every field's annotation
# from its text as the classes are made, a cost on every `plan validate`; the return annotations
# that name their own class, not made yet, are quoted.
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    StringConstraints,
    Tag,
    field_validator,
    model_serializer,
    model_validator,
)

from planner._core.contract_terms import decision_mode
from planner._core.text import parse_duration

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
TRAINABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
ArmName = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
]
# Numbers are numbers as YAML wrote them: `"0.01"` or `true` where a number goes is a P102 (an
# integer is a number)
Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]  # NaN and infinities refused (P420)
Count = Annotated[
    int, Strict()
]  # an integer, never a bool (`exposure: true`) or a string (`looks: "2"`)
SEED_MAX = (
    2**32 - 1
)  # numpy's legacy seeding takes 0..2**32-1: a larger seed would be cut modulo 2**32 into another
SEED_RANGE = (
    f"0 to {SEED_MAX} (2**32 - 1), the range numpy's seeding takes: a larger or negative seed "
    f"would be "
    "cut into that range, into another seed's draws"
)  # said by validation (P103) and plan reeval --seeds
Seed = Annotated[
    int, Strict(), Field(ge=0, le=SEED_MAX)
]  # seed's draws, a tuning seed into a confirmation one's
DottedKey = Annotated[
    str, StringConstraints(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")
]


# The URI schemes pyarrow's `FileSystem.from_uri` opens; a plain absolute path is a local one (a
# mount every node has).
STORAGE_SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss", "file")
_CREDENTIAL_KEYS = ("access_key", "secret_key", "session_token")


def storage_problem(uri: str) -> str | None:
    """What is wrong with a trials' storage URI (the contract's `storage:` or `plan run
    --storage`), or None: a scheme pyarrow opens (or an absolute path), a bucket or path after it,
    and no credentials in it (those come from each node's environment, never from a file that is
    kept in the run folder)."""
    text = uri.strip()
    if "://" not in text:
        if not text.startswith("/"):
            return (
                f"{text!r} is neither a URI ({', '.join(s + '://' for s in STORAGE_SCHEMES[:3])}"
                "...) nor an absolute path: a relative path is another folder on every node"
            )
        return None
    scheme, _, rest = text.partition("://")
    if scheme.lower() not in STORAGE_SCHEMES:
        return f"{scheme}:// is not a storage pyarrow opens ({', '.join(STORAGE_SCHEMES)})"
    where, _, query = rest.partition("?")
    if ":" in where.split("/", 1)[0].rpartition("@")[0]:
        return "the URI holds credentials (user:secret@): give them in each node's environment"
    keys = {part.split("=", 1)[0].lower() for part in query.split("&") if part}
    if keys & set(_CREDENTIAL_KEYS):
        found = sorted(keys & set(_CREDENTIAL_KEYS))[0]
        return f"the URI holds credentials ({found}=): give them in each node's environment"
    if not where.strip("/") and scheme.lower() != "file":
        return f"{scheme}:// names no bucket or folder"
    return None


def _no_items() -> list[Any]:
    """An empty list: `default_factory=list` as a Python function. pydantic reads the signature of
    each default factory when it compiles a model, and the builtin `list`'s is parsed from its text
    signature with `tokenize`, whose first use compiles tokenize's patterns, on every `plan
    validate` (docs/speed.md)."""
    return []


def parse_memory(text: str | int) -> int:
    """'512M', '2G', '2GiB', 1048576 -> bytes (binary units)."""
    if isinstance(text, bool):
        raise ValueError("a memory size is a number of bytes or a string like '2G'")
    if isinstance(text, int):
        if text <= 0:
            raise ValueError("a memory size must be positive")
        return text
    match = _MEMORY.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise ValueError(
            f"{text!r} is not a memory size: write a number with K, M, G or T, like '2G'"
        )
    unit = (match.group(2) or "B").upper()[:1]
    factor = {"B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}[unit]
    return int(float(match.group(1)) * factor)


class _Model(BaseModel):
    # defer_build: a model compiles its validator when first used, so a contract compiles once as a
    # whole instead of every nested model compiling its own at import (`plan validate` starts
    # faster). For the same reason a nested model's default is `Field(default_factory=dict,
    # validate_default=True)`: the parent's validator makes it from `{}` (the same value as calling
    # the class, and the same JSON Schema), where calling the class would compile that model's own
    # validator apart
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class ConfigSource(_Model):
    """The base config: a Hydra config directory and name, or an inline mapping."""

    dir: str | None = None
    name: str | None = None
    overrides: list[str] = Field(default_factory=_no_items)
    values: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _exactly_one_source(self) -> "ConfigSource":
        has_dir = self.dir is not None or self.name is not None
        if has_dir and self.values is not None:
            raise ValueError(
                "give either `dir` and `name` (a Hydra config directory) or `values` (an inline "
                "mapping), not both"
            )
        if not has_dir and self.values is None:
            raise ValueError(
                "give either `dir` and `name` (a Hydra config directory) or `values` (an inline "
                "mapping)"
            )
        if has_dir and (self.dir is None or self.name is None):
            missing = "name" if self.name is None else "dir"
            raise ValueError(
                f"a Hydra config directory needs both `dir` and `name`; `{missing}` is missing"
            )
        return self


class Factor(_Model):
    name: Annotated[str, StringConstraints(min_length=1)]
    keys: list[DottedKey] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _default_keys(self) -> "Factor":
        if self.keys is None:
            object.__setattr__(self, "keys", [self.name])
        return self


class Arm(_Model):
    name: ArmName
    overrides: list[str] = Field(default_factory=_no_items)


class BaselineRef(_Model):
    """A baseline from earlier work (docs/lineage.md): one arm of a finished run, or a line's
    promoted arm.

    `from_run` (a run folder, relative to the contract's folder) with `arm`, or `line` (a line of
    work in the project ledger, resolved to its promoted arm when validated). The effective config
    is the arm's logged config with its selected tuned values; it is read by the caller of
    validate, not here.
    """

    from_run: Annotated[str, StringConstraints(min_length=1)] | None = None
    arm: ArmName | None = None
    line: Annotated[str, StringConstraints(pattern=NAME_PATTERN)] | None = None
    name: ArmName | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "BaselineRef":
        if (self.from_run is None) == (self.line is None):
            raise ValueError(
                "a baseline from earlier work gives either `from_run` (a run folder) with `arm`, "
                "or "
                "`line` (a line of work), not both"
            )
        if self.from_run is not None and self.arm is None:
            raise ValueError(
                "`from_run` needs `arm`: the arm of that run whose config becomes the baseline"
            )
        if self.line is not None and self.arm is not None:
            raise ValueError("`arm` goes with `from_run`; a `line` names its promoted arm itself")
        if self.name is None:
            object.__setattr__(self, "name", self.arm or "baseline")
        return self

    @property
    def overrides(self) -> list[str]:
        """None: the baseline is the logged config, exactly (a changed recipe is a new named
        control)."""
        return []


def _baseline_kind(value: Any) -> str:
    if isinstance(value, BaselineRef) or (
        isinstance(value, dict) and ({"from_run", "line"} & set(value))
    ):
        return "BaselineRef"
    return "Arm"


def _line_shorthand(value: Any) -> Any:
    """`baseline: NAME` is `baseline: {line: NAME}`."""
    return {"line": value} if isinstance(value, str) else value


class Metric(_Model):
    name: Annotated[str, StringConstraints(min_length=1)]
    mode: Literal["max", "min"]
    heldout: Annotated[str, StringConstraints(min_length=1)] | None = None
    # the held-out metric's own direction, when it is not `mode`'s (tune on val_loss, min; decide
    # on test_acc, max)
    heldout_mode: Literal["max", "min"] | None = None

    @property
    def decision_metric(self) -> str:
        """The metric the decision uses: `heldout` when given, else `name`."""
        return self.heldout or self.name

    @property
    def decision_mode(self) -> str:
        """The direction the decision reads `decision_metric` in: `heldout_mode` when given, else
        `mode`."""
        return decision_mode(self.mode, self.heldout, self.heldout_mode)


class Acceptance(_Model):
    min_effect: Finite = Field(gt=0)
    alpha: Finite = Field(default=0.05, gt=0, le=0.5)
    # the arms run on the same seeds: paired by design (welch and bootstrap stay available by name)
    test: Literal["welch", "paired", "bootstrap"] = "paired"
    correction: Literal["holm", "bonferroni", "none"] = "holm"
    # margin: accept only when the CI's lower end reaches min_effect. The default stays out of the
    # frozen copy, so a contract that does not set it keeps the hash (contract_sha256) it had
    # before the field.
    rule: Literal["estimate", "margin"] = Field(
        default="estimate", exclude_if=lambda rule: rule == "estimate"
    )


class Resources(_Model):
    cpu: Finite = Field(default=1, ge=0)
    gpu: Finite = Field(default=0, ge=0)
    custom: dict[str, Finite] = Field(default_factory=dict)


class Budget(_Model):
    unit: Annotated[str, StringConstraints(min_length=1)] = "step"
    exposure: Count = Field(ge=1)
    max_trials: Count | None = Field(default=None, ge=1)
    max_wall_time: str | float | None = None
    max_trial_time: str | float | None = None
    max_trial_memory: str | int | None = None
    max_heldout_evaluations: Count | None = Field(default=None, ge=1)
    resources: Resources = Field(default_factory=dict, validate_default=True)

    @field_validator("max_wall_time", "max_trial_time")
    @classmethod
    def _duration(cls, value):
        if value is not None:
            parse_duration(value)
        return value

    @field_validator("max_trial_memory")
    @classmethod
    def _memory(cls, value):
        if value is not None:
            parse_memory(value)
        return value

    @property
    def max_wall_time_s(self) -> float | None:
        return None if self.max_wall_time is None else parse_duration(self.max_wall_time)

    @property
    def max_trial_time_s(self) -> float | None:
        return None if self.max_trial_time is None else parse_duration(self.max_trial_time)

    @property
    def max_trial_memory_bytes(self) -> int | None:
        return None if self.max_trial_memory is None else parse_memory(self.max_trial_memory)


_KINDS = {"log_uniform": "log_uniform", "uniform": "uniform", "int": "integer", "choice": "choice"}


class Dimension(_Model):
    """One search dimension: exactly one of the four kinds."""

    log_uniform: tuple[Finite, Finite] | None = None
    uniform: tuple[Finite, Finite] | None = None
    integer: tuple[int, int] | None = Field(default=None, alias="int")
    choice: list[Any] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> "Dimension":
        given = [k for k in _KINDS if getattr(self, _KINDS[k]) is not None]
        if len(given) != 1:
            raise ValueError(
                "a dimension is exactly one of log_uniform: [lo, hi], uniform: [lo, hi], int: "
                "[lo, hi], choice: [...]"
            )
        kind = given[0]
        if kind != "choice":
            lo, hi = getattr(self, _KINDS[kind])
            if not lo < hi:
                raise ValueError(f"{kind}: [lo, hi] needs lo < hi, got [{lo}, {hi}]")
            if kind == "log_uniform" and lo <= 0:
                raise ValueError(f"log_uniform needs a positive lower bound, got {lo}")
        return self

    @model_serializer(mode="wrap")
    def _only_the_given_kind(self, handler):
        return {key: value for key, value in handler(self).items() if value is not None}

    @property
    def kind(self) -> str:
        return next(k for k in _KINDS if getattr(self, _KINDS[k]) is not None)

    @property
    def bounds(self) -> tuple[Any, Any] | list[Any]:
        """[lo, hi] for a range, the options for a choice."""
        return getattr(self, _KINDS[self.kind])


class Sampler(_Model):
    name: Literal["tpe", "random", "grid"] = "tpe"
    seed: Seed = 0


class EarlyStop(_Model):
    rule: Literal["none", "asha", "median"] = "none"
    grace: Count | None = Field(default=None, ge=1)
    reduction_factor: Finite | None = Field(default=None, gt=1)

    @model_validator(mode="after")
    def _defaults(self) -> "EarlyStop":
        if self.rule == "none":
            if self.grace is not None or self.reduction_factor is not None:
                raise ValueError(
                    "`grace` and `reduction_factor` only apply with rule asha or median"
                )
            return self
        if self.rule == "median" and self.reduction_factor is not None:
            raise ValueError("`reduction_factor` only applies with rule asha")
        if self.grace is None:
            object.__setattr__(self, "grace", 1)
        if self.rule == "asha" and self.reduction_factor is None:
            object.__setattr__(self, "reduction_factor", 3.0)
        return self


class Selection(_Model):
    rule: Literal["final", "mean_last_k"] = "final"
    k: Count | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _k_with_mean_last_k(self) -> "Selection":
        if self.rule == "mean_last_k" and self.k is None:
            raise ValueError(
                "selection rule mean_last_k needs `k`, the number of last reports to average"
            )
        if self.rule == "final" and self.k is not None:
            raise ValueError("`k` only applies with selection rule mean_last_k")
        return self


class Tuning(_Model):
    trials_per_arm: Count = Field(ge=1)
    seeds: list[Seed] = Field(min_length=1)
    sampler: Sampler = Field(default_factory=dict, validate_default=True)
    space: dict[DottedKey, Dimension] = Field(min_length=1)
    arm_space: dict[str, dict[DottedKey, Dimension]] = Field(default_factory=dict)
    early_stop: EarlyStop = Field(default_factory=dict, validate_default=True)
    selection: Selection = Field(default_factory=dict, validate_default=True)

    def space_for(self, arm: str) -> dict[str, Dimension]:
        """{dotted key: Dimension} for `arm`: the shared space, then the arm's own ranges
        (`arm_space`)."""
        return {**self.space, **self.arm_space.get(arm, {})}


class Failures(_Model):
    retries: Count = Field(default=0, ge=0, le=100)
    diverged_value: float | None = None


SplitName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


class Independent(_Model):
    """Split pairs that must share nothing, by unit and by each named group (docs/data.md)."""

    pairs: list[tuple[SplitName, SplitName]] = Field(min_length=1)
    by: list[SplitName] = Field(default_factory=lambda: ["unit"], min_length=1)


class Data(_Model):
    fingerprint: list[str] = Field(default_factory=_no_items)
    unit: SplitName = "unit"  # what one id is, for the report: "3,000 distinct images"
    independent: Independent | None = None
    matched: bool = True
    fixed: list[SplitName] = Field(default_factory=_no_items)
    require: list[SplitName] = Field(default_factory=_no_items)


class Confirmation(_Model):
    """Sequential confirmation: seeds run in `looks` planned batches (group-sequential design)."""

    looks: Count = Field(default=1, ge=1, le=10)
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"
    futility: bool = False


class MlflowTracking(_Model):
    tracking_uri: str | None = None
    experiment: str | None = None


class Tracking(_Model):
    mlflow: MlflowTracking | None = None


class MetricsFile(_Model):
    """Where a command's script already logs its metrics (docs/command-trainables.md): a file in its
    output folder, or (`format: stdout`) the lines it prints, matched by `pattern`."""

    # required for every format but stdout; a printed line's pattern is the other way
    file: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] | None = Field(
        default=None, exclude_if=lambda file: file is None
    )
    format: Literal["csv", "jsonl", "hf_trainer_state", "tensorboard", "stdout"]
    # the column (or key) of the step; for stdout the pattern's named group, `step`
    step: Annotated[str, StringConstraints(min_length=1)] = "step"
    names: dict[
        Annotated[str, StringConstraints(min_length=1)],
        Annotated[str, StringConstraints(min_length=1)],
    ] = Field(default_factory=dict)
    step_base: Literal[0, 1] | None = None  # None: 1, the step column counts exposure from 1
    # a flat JSON results file (a Trainer's save_metrics `test_results.json`), read for
    # metric.heldout at the end
    heldout_file: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] | None = (
        None
    )
    # format: stdout: a regular expression searched in each printed line; its named groups are the
    # columns
    pattern: Annotated[str, StringConstraints(min_length=1)] | None = Field(
        default=None, exclude_if=lambda pattern: pattern is None
    )
    stream: Literal["stdout", "stderr"] | None = Field(
        default=None, exclude_if=lambda stream: stream is None
    )

    @model_validator(mode="after")
    def _file_or_pattern(self) -> "MetricsFile":
        if self.format == "stdout":
            if self.pattern is None:
                raise ValueError(
                    "format: stdout reads the lines the script prints: give `pattern`, a regular "
                    "expression with a named group `step` and one per metric, like "
                    r"'step (?P<step>\d+): .*val loss (?P<val_loss>[\d.]+)'"
                )
            if self.file is not None or self.heldout_file is not None:
                raise ValueError("format: stdout reads printed lines, not a file: remove `file`")
        else:
            if self.file is None:
                raise ValueError(f"format: {self.format} needs `file`, the log's path or glob")
            if self.pattern is not None or self.stream is not None:
                raise ValueError(
                    "`pattern` and `stream` are for format: stdout (lines the script prints)"
                )
        return self

    def columns(self, metric: str, heldout: str | None) -> dict[str, str]:
        """Planner metric name -> the file's column: `names`, else the contract's metrics under
        their own names."""
        if self.names:
            return dict(self.names)
        return {name: name for name in (metric, heldout) if name}


class Checkpoint(_Model):
    """Where a command's script saves its checkpoints, the config key it resumes from, what is kept
    after."""

    file: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1)
    ]  # a glob: files or folders
    resume_key: DottedKey | None = (
        None  # set to the newest checkpoint when a cut-short trial runs again
    )
    keep: Literal["all", "last", "none"] = "all"  # what stays once the trial has ended
    # continuation by flags: the key of the folder the script saves to (set to the output folder of
    # the attempt that saved the newest checkpoint), and the settings that make it resume from there
    folder_key: DottedKey | None = Field(default=None, exclude_if=lambda key: key is None)
    resume_flags: dict[DottedKey, Any] | None = Field(
        default=None, exclude_if=lambda flags: flags is None
    )

    @model_validator(mode="after")
    def _one_way_to_resume(self) -> "Checkpoint":
        if self.resume_flags and not self.folder_key:
            raise ValueError(
                "resume_flags go with folder_key, the key of the folder the script resumes from"
            )
        if self.folder_key and self.resume_key:
            raise ValueError(
                "give resume_key (the checkpoint's path) or folder_key with resume_flags, not both"
            )
        return self


class CommandSpec(_Model):
    """`command:` as a mapping: the command line, how the config is passed, the config keys for
    seed and budget, the metrics file, the checkpoints."""

    run: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    # how the config reaches the script: Hydra overrides, or --key=value flags; left out of the
    # frozen copy when it is the default, so a contract without it keeps its hash
    args: Literal["hydra", "argparse", "literal"] = Field(
        default="hydra", exclude_if=lambda args: args == "hydra"
    )
    # the folder the command runs in, relative to the contract's folder (None: the contract's
    # folder); left out of the frozen copy when unset, so a contract without it keeps its hash
    cwd: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] | None = Field(
        default=None, exclude_if=lambda cwd: cwd is None
    )
    seed_key: DottedKey | None = None
    budget_key: DottedKey | None = None
    metrics: MetricsFile | None = None
    checkpoint: Checkpoint | None = None


class Contract(_Model):
    """One experiment: what is compared, what changes, what counts, what it may cost."""

    version: Literal[1]
    name: Name
    hypothesis: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    trainable: Annotated[str, StringConstraints(pattern=TRAINABLE_PATTERN)] | None = None
    command: (
        Annotated[
            Annotated[
                Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)], Tag("line")
            ]
            | Annotated[CommandSpec, Tag("mapping")],
            Discriminator(
                lambda v: "mapping" if isinstance(v, dict | CommandSpec) else "line"
            ),  # one form's errors only
        ]
        | None
    ) = None
    config: ConfigSource | None = None  # optional only with a baseline from earlier work
    factor: Factor
    baseline: Annotated[
        Annotated[Arm, Tag("Arm")] | Annotated[BaselineRef, Tag("BaselineRef")],
        Discriminator(_baseline_kind),
    ]
    arms: list[Arm] = Field(min_length=1)
    metric: Metric
    acceptance: Acceptance
    seeds: list[Seed] = Field(min_length=2)
    budget: Budget
    tuning: Tuning | None = None
    failures: Failures = Field(default_factory=dict, validate_default=True)
    data: Data = Field(default_factory=dict, validate_default=True)
    confirmation: Confirmation = Field(default_factory=dict, validate_default=True)
    tracking: Tracking = Field(default_factory=dict, validate_default=True)
    # where the trials keep their files for every node (docs/cluster.md); `plan run --storage`
    # overrides it. Left out of the frozen copy when unset, so a contract without it keeps its hash.
    storage: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] | None = Field(
        default=None, exclude_if=lambda uri: uri is None
    )

    @field_validator("storage")
    @classmethod
    def _storage_uri(cls, value: str | None) -> str | None:
        if value is not None and (problem := storage_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("baseline", mode="before")
    @classmethod
    def _baseline_line(cls, value):
        return _line_shorthand(value)

    @model_validator(mode="after")
    def _one_way_to_train(self) -> "Contract":
        if (self.trainable is None) == (self.command is None):
            raise ValueError(
                "give exactly one of `trainable: module.path:function` or `command: python "
                "train.py ...`"
            )
        if self.config is None and not self.baseline_from_earlier_work:
            raise ValueError(
                "`config` is required (it may be left out only when the baseline comes from a run "
                "or a line: the arms then start from the baseline's config)"
            )
        if self.command is not None and self.baseline_from_earlier_work:
            raise ValueError(
                "a baseline from a run or a line needs `trainable:`; a `command:` receives "
                "overrides, "
                "and a logged config is not a list of overrides"
            )
        return self

    @property
    def baseline_from_earlier_work(self) -> bool:
        """True when the baseline is `{from_run, arm}` or a line (docs/lineage.md)."""
        return isinstance(self.baseline, BaselineRef)

    def command_dir(self, contract_dir: str | os.PathLike) -> Path:
        """The folder a `command:` runs in: `command.cwd` resolved from the contract's folder, else
        that folder."""
        spec = self.command_spec
        return (Path(contract_dir) / (spec.cwd if spec is not None and spec.cwd else ".")).resolve()

    @property
    def command_line(self) -> str | None:
        """The command to run, from either form of `command:` (None for a `trainable:`)."""
        return self.command.run if isinstance(self.command, CommandSpec) else self.command

    @property
    def command_spec(self) -> CommandSpec | None:
        """`command:` as a mapping, the string form read as `{run: <string>}` (None for a
        `trainable:`)."""
        if self.command is None or isinstance(self.command, CommandSpec):
            return self.command
        return CommandSpec(run=self.command)

    @property
    def all_arms(self) -> list[Arm]:
        """The baseline first, then the treatment arms, in contract order."""
        # read once validate has replaced a baseline from earlier work by the arm it resolves to
        return [cast(Arm, self.baseline), *self.arms]

    def frozen(self) -> dict[str, Any]:
        """The contract with every default written out, as plain JSON-able data."""
        return self.model_dump(mode="json", by_alias=True)

    def sha256(self) -> str:
        """Hash of the normalized contract: comments and key order do not change it."""
        canonical = json.dumps(self.frozen(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def contract_from(data: Any) -> Contract:
    """`Contract.model_validate(data)` (raises pydantic's ValidationError), the contract's validator
    compiled on the first call without pydantic's plugin discovery.

    pydantic looks for plugins (its `pydantic` entry points, over every installed distribution's
    metadata) the first time it compiles a validator in a process, whatever the model. The
    contract's validator is planner's own, and nothing is meant to watch it: it is compiled with
    `PYDANTIC_DISABLE_PLUGINS` set for that call only (pydantic reads it there, and caches nothing
    when it is set), so a model of the user's compiled later still finds its plugins."""
    if not Contract.__pydantic_complete__:
        saved = os.environ.get(_NO_PLUGINS)
        os.environ[_NO_PLUGINS] = "__all__"
        try:
            Contract.model_rebuild()
        finally:
            if saved is None:
                os.environ.pop(_NO_PLUGINS, None)
            else:
                os.environ[_NO_PLUGINS] = saved
    return Contract.model_validate(data)


_NO_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


def json_schema() -> dict[str, Any]:
    """JSON Schema of the contract, for editors (yaml-language-server)."""
    schema = Contract.model_json_schema()
    baseline = schema["properties"][
        "baseline"
    ]  # anyOf: `{name: b}` fits both forms; planner tells them apart
    baseline["anyOf"] = [
        *baseline.pop("oneOf"),
        {  # `baseline: NAME`, read by a before-validator
            "type": "string",
            "pattern": NAME_PATTERN,
            "description": "a line of work: shorthand for {line: NAME}",
        },
    ]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "planner experiment contract, version 1"
    return schema
