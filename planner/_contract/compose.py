"""Compose each arm's effective config: base + config.overrides + the arm's overrides.

Hydra does the composing (its config directory, defaults lists and override
grammar). A compose reads and merges the config folder, so we compose once per distinct
set of *group* overrides (`optimizer=adam`) and apply plain value overrides
(`optimizer.lr=0.1`, `+x=1`, `~x`) with OmegaConf, which is what Hydra itself
does after composition. Arms that differ only in values cost one compose in all.
Each compose is Hydra's public `hydra.compose`, so its messages are Hydra's.

Hydra's global state never leaks: `hydra.compose` runs inside
`initialize_config_dir`, which clears it on the way out, so many contracts can
be composed in one process.

Contracts are data: an interpolation that calls a resolver (`${oc.env:HOME}`,
`${oc.decode:...}`, any custom one) is refused, so composing never reads the
environment or runs code. Plain references (`${model.width}`) are resolved.
One resolver is let through, for a `command:` app only: Hydra's own
`${hydra:...}` (`output_dir: ${hydra:runtime.output_dir}`), which reads
nothing but the app's Hydra config when it runs; its text is kept as written
in the composed config (planner._contract.paths.resolve), as Hydra's saved
`.hydra/config.yaml` keeps it.
The check reads OmegaConf's own parse tree of every string (`calls_resolver`),
not the text: a resolver whose name is itself built by an interpolation
(`${${r}:HF_TOKEN}`), one nested in another's arguments, one in a quoted
override or in a Hydra config file's defaults list is found as surely as
`${oc.env:X}`; it is checked before anything is resolved, and again on the
resolved values (an escaped interpolation resolves to the text of a call).
"""

from __future__ import annotations

import copy
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import hydra
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf

from planner._contract.paths import flatten, hydra_calls, is_interpolation, resolve
from planner._core.lazy import lazy_import
from planner._core.text import file_kind, shown_path

difflib = lazy_import(
    "difflib"
)  # the did-you-mean hints: only a contract with a mistake needs them

MAX_CONFIG_FILES = 2000  # Hydra files read from config.dir (a config dir is dozens)
MAX_CONFIG_ENTRIES = (
    20_000  # names listed in the walk of config.dir, files and folders (a link to / stops here)
)
MAX_CONFIG_DEPTH = 32  # folders below config.dir (Hydra's groups nest a few deep)
MAX_CONFIG_BYTES = (
    1 << 20
)  # of YAML files, in all: each check parses them, slowly (a config dir is kilobytes)


def calls_resolver(text: str, *, hydra: bool = True) -> bool:
    """True when OmegaConf would call a resolver (any resolver, by any spelling) to resolve `text`,
    other than Hydra's own `${hydra:...}` when `hydra` is true (a `command:` app resolves it
    itself).

    Read on OmegaConf's grammar (omegaconf.grammar_parser): any `interpolationResolver` node in the
    parse tree (planner._contract.paths.hydra_calls). Text that does not parse as a value is treated
    as a call (OmegaConf would not resolve it).
    """
    found = hydra_calls(text)
    return found is None or (bool(found) and not hydra)


def resolvers_called(text: str) -> list[str] | None:
    """The names of the resolvers OmegaConf would call to resolve `text` (by its grammar, as
    `calls_resolver` reads it), a built name (`${${r}:x}`) as written; None when `text` does not
    parse as a value."""
    if "${" not in text:
        return []
    from omegaconf import grammar_parser
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser

    try:
        stack = [grammar_parser.parse(text)]
    except Exception:  # noqa: BLE001 - GrammarParseError
        return None
    names = []
    while stack:
        node = stack.pop()
        if isinstance(node, OmegaConfGrammarParser.InterpolationResolverContext):
            names.append(node.resolverName().getText())
        stack.extend(getattr(node, "children", None) or [])
    return names


@dataclass(frozen=True)
class ComposeProblem:
    """Why one arm's config could not be composed.

    `source` says which override list the problem is in ("config" for
    config.overrides, or the arm's name), `index` which override (None when it is
    about the config dir or name itself).
    """

    # missing_dir | missing_config | missing_option | not_a_file | bad_override | no_such_key |
    # resolver
    kind: str
    # | compose_failed
    message: str
    arm: str
    source: str
    index: int | None = None


@dataclass
class ComposedArms:
    """The effective config of every arm, as plain dicts, or the problems found."""

    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[ComposeProblem] = field(default_factory=list)
    # the same configs before interpolations are resolved: tuned values are applied to these
    # (`apply_params`)
    raw: dict[str, dict[str, Any]] = field(default_factory=dict)
    composes: int = 0  # how many Hydra compose calls it took


@dataclass(frozen=True)
class _Override:
    text: str
    source: str
    index: int


def compose_arms(
    contract, contract_dir: str | os.PathLike, baseline_config: dict[str, Any] | None = None
) -> ComposedArms:
    """Compose every arm of `contract` (baseline first); collect problems, never raise for bad
    input.

    `baseline_config` is the resolved config of a baseline from earlier work (docs/lineage.md): the
    baseline is that config exactly, and when the contract has no `config` the arms start from it.
    `${hydra:...}` interpolations are allowed when the contract runs a `command:` (its Hydra
    resolves them; planner sets `hydra.run.dir`), and refused like any other resolver call
    otherwise.
    """
    result = ComposedArms()
    hydra = getattr(contract, "command", None) is not None
    base = contract.config
    if baseline_config is not None:
        result.configs[contract.baseline.name] = copy.deepcopy(baseline_config)
        if base is None:
            base = SimpleNamespace(dir=None, name=None, overrides=[], values=baseline_config)
    base_dir = None
    if base.dir is not None:
        try:
            base_dir = (Path(contract_dir) / base.dir).resolve()
            found = base_dir.is_dir()
        except (OSError, ValueError):  # a NUL byte, a name too long for the file system
            base_dir, found = Path(contract_dir) / base.dir, False
        if not found:
            for arm in [a for a in contract.all_arms if a.name not in result.configs]:
                result.problems.append(
                    ComposeProblem(
                        "missing_dir",
                        f"config dir {base.dir!r} does not exist (looked in {base_dir})",
                        arm.name,
                        "config",
                    )
                )
            return result
        odd = not_a_config_file(
            base_dir, base.name
        )  # one stat: Hydra would wait on a FIFO, read a device forever
        if odd:
            for arm in [a for a in contract.all_arms if a.name not in result.configs]:
                result.problems.append(
                    ComposeProblem("not_a_file", f"config {base.name!r}: {odd}", arm.name, "config")
                )
            return result
        calls = defaults_resolver_calls(base_dir)
        if calls:
            for arm in contract.all_arms:
                result.problems += [
                    ComposeProblem(
                        "resolver",
                        f"{name}'s defaults list calls a resolver ({text!r}); a contract's "
                        f"configs may only "
                        "reference other keys",
                        arm.name,
                        "config",
                    )
                    for name, text in calls
                ]
            return result
    cache: dict[tuple[str, ...], Any] = {}
    for arm in contract.all_arms:
        if arm.name in result.configs:  # a baseline from earlier work: given, not composed
            continue
        overrides = [_Override(t, "config", i) for i, t in enumerate(base.overrides)]
        overrides += [_Override(t, arm.name, i) for i, t in enumerate(arm.overrides)]
        config, problems = _compose_one(
            base, base_dir, overrides, arm.name, cache, result, hydra=hydra
        )
        result.problems.extend(problems)
        if config is not None:
            result.configs[arm.name], result.raw[arm.name] = config
    return result


def _compose_one(
    base, base_dir: Path | None, overrides: list[_Override], arm: str, cache, result, *, hydra: bool
):

    parser = OverridesParser.create()
    parsed = []
    problems: list[ComposeProblem] = []
    for ov in overrides:
        try:
            (item,) = parser.parse_overrides([ov.text])
        except (
            Exception
        ) as error:  # Hydra raises OverrideParseException (and others) for bad grammar
            problems.append(
                ComposeProblem(
                    "bad_override",
                    f"override {ov.text!r} does not parse: {_first_line(error)}",
                    arm,
                    ov.source,
                    ov.index,
                )
            )
            continue
        value = item.value() if not item.is_sweep_override() else None
        if _find_resolver_calls([item.key_or_group, value], hydra=hydra):
            problems.append(
                ComposeProblem(
                    "resolver",
                    f"override {ov.text!r} calls a resolver; contracts may only reference other "
                    f"keys, like "
                    f"${{model.width}}{_hydra_note(ov.text, hydra)}",
                    arm,
                    ov.source,
                    ov.index,
                )
            )
            continue
        if item.is_sweep_override():
            problems.append(
                ComposeProblem(
                    "bad_override",
                    f"override {ov.text!r} is a sweep; an arm has one value per key (sweeps go in "
                    f"tuning.space)",
                    arm,
                    ov.source,
                    ov.index,
                )
            )
            continue
        parsed.append((ov, item))
    if problems:
        return None, problems

    group: list[tuple[_Override, Override]] = []
    values: list[tuple[_Override, Override]] = []
    for ov, item in parsed:
        is_group = base_dir is not None and (
            item.package is not None or (base_dir / item.key_or_group.replace(".", "/")).is_dir()
        )
        if (
            not is_group and "/" in item.key_or_group
        ):  # a group path (hydra/launcher) that config.dir lacks
            problems.append(
                ComposeProblem(
                    "bad_override",
                    f"override {ov.text!r} names config group {item.key_or_group!r}, which "
                    + (
                        "config.dir does not have"
                        if base_dir is not None
                        else "an inline config cannot have"
                    ),
                    arm,
                    ov.source,
                    ov.index,
                )
            )
            continue
        (group if is_group else values).append((ov, item))
    if problems:
        return None, problems

    key = tuple(ov.text for ov, _ in group)
    if key not in cache:
        cache[key] = _compose_base(base, base_dir, group, arm, result)
    composed = cache[key]
    if isinstance(composed, list):  # problems
        return None, [ComposeProblem(p.kind, p.message, arm, p.source, p.index) for p in composed]

    if values or base_dir is None:
        try:
            cfg = OmegaConf.create(copy.deepcopy(composed))
        except (
            Exception
        ) as error:  # a value OmegaConf cannot hold (a YAML date in config.values, ...)
            return None, [
                ComposeProblem(
                    "compose_failed",
                    f"the base config cannot be used: {_first_line(error)}",
                    arm,
                    "config",
                )
            ]
        for ov, item in values:
            problem = _apply_value_override(cfg, ov, item, arm)
            if problem:
                problems.append(problem)
        if problems:
            return None, problems
        container = OmegaConf.to_container(cfg, resolve=False)
    # Hydra's container (OmegaConf.to_container) with no value to set: OmegaConf and back would
    # give it as it is
    else:
        container = copy.deepcopy(composed)
    bad = _find_resolver_calls(container, hydra=hydra)
    if bad:
        return None, [
            ComposeProblem(
                "resolver",
                f"config key {path!r} calls a resolver ({text!r}); a contract's configs "
                f"may only reference other keys{_hydra_note(text, hydra)}",
                arm,
                "config",
            )
            for path, text in bad
        ]
    # `${hydra:...}` stays as written: the app's Hydra resolves it when it runs (paths.resolve)
    try:
        resolved = resolve(container) if _to_resolve(container) else copy.deepcopy(container)
    except Exception as error:  # an interpolation to a missing key, a ??? value
        return None, [
            ComposeProblem(
                "compose_failed",
                f"the config does not resolve: {_first_line(error)}",
                arm,
                "config",
            )
        ]
    bad = _find_resolver_calls(
        resolved, hydra=hydra
    )  # `\${oc.env:X}` resolves to the text of a call: not passed on either
    if bad:
        return None, [
            ComposeProblem(
                "resolver",
                f"config key {path!r} resolves to a resolver call ({text!r}); a "
                "contract's configs may only reference other keys",
                arm,
                "config",
            )
            for path, text in bad
        ]
    return (resolved, container), []


def _to_resolve(container) -> bool:
    """Whether OmegaConf has anything to do in resolving `container` (an `OmegaConf.to_container`
    result): a string that holds an interpolation (`${`, as OmegaConf tells one) or is the missing
    value `???`. Without one, resolving gives the container back as it is, and is skipped (about 1
    ms an arm)."""
    return any(
        is_interpolation(value) or value == "???"
        for value in flatten(container, into_lists=True).values()
    )


def _compose_base(base, base_dir: Path | None, group, arm: str, result):
    """Plain container of the base config with the group overrides, or a list of problems."""
    if base_dir is None:
        return copy.deepcopy(base.values)

    result.composes += 1
    overrides = [ov.text for ov, _ in group]
    try:
        cfg = compose_without_hydra_defaults(base_dir, base.name, overrides)
    except MissingConfigException as error:
        odd = not_a_config_file(base_dir, getattr(error, "missing_cfg_file", None) or "")
        if odd:  # Hydra passes over what is not a regular file and says "not found": say what it is
            blamed = _missing_option(error, group)
            where = (blamed[0].source, blamed[0].index) if blamed else ("config", None)
            what = (
                f"override {blamed[0].text!r}"
                if blamed
                else f"the defaults list of config {base.name!r}"
            )
            return [ComposeProblem("not_a_file", f"{what}: {odd}", arm, *where)]
        missing = _missing_option(error, group)
        if missing is None:
            return [
                ComposeProblem(
                    "missing_config",
                    f"config {base.name!r} not found in {base_dir}: {_first_line(error)}",
                    arm,
                    "config",
                )
            ]
        ov, options = missing
        hint = f"; available: {', '.join(options)}" if options else ""
        return [
            ComposeProblem(
                "missing_option",
                f"override {ov.text!r}: no such option in config group "
                f"{ov.text.split('=')[0]!r}{hint}",
                arm,
                ov.source,
                ov.index,
            )
        ]
    except (
        Exception
    ) as error:  # ConfigCompositionException, and a zoo of others for bad config files
        blamed = _mentioned(error, group)
        where = (blamed.source, blamed.index) if blamed else ("config", None)
        why = yaml_file_error(error) or _first_line(error)
        return [
            ComposeProblem(
                "compose_failed", f"Hydra could not compose {base.name!r}: {why}", arm, *where
            )
        ]
    return OmegaConf.to_container(cfg, resolve=False)


# Hydra 1.3 is asked for its current behaviour (`version_base=None`, else it warns); Hydra 1.4
# has it without asking and warns when the argument is given.
VERSION_BASE: dict[str, Any] = (
    {}
    if tuple(int(p) for p in hydra.__version__.split(".")[:2]) >= (1, 4)
    else {"version_base": None}
)
# The entries of Hydra's own defaults list (its `hydra:` node: where runs go, the launcher, the
# sweeper, the help texts, logging), each deleted by an override in Hydra's grammar.
HYDRA_DEFAULTS = (
    "output",
    "launcher",
    "sweeper",
    "help",
    "hydra_help",
    "hydra_logging",
    "job_logging",
    "env",
)


def compose_without_hydra_defaults(config_dir: Path, config_name: str, overrides: list[str]):
    """`hydra.compose(config_name, overrides)` in `config_dir`, Hydra's global state cleared after.

    `hydra.compose` composes Hydra's own `hydra:` node too (a dozen files over its structured
    config) and then drops it from the result: most of its cost. The first try deletes the entries
    of Hydra's own defaults list by overrides (`~hydra/launcher`, ...), which leaves the node small
    and the rest of the config as it is; where that is refused (a primary config that overrides one
    of them, any error) the compose is done again as given, so every message is Hydra's own."""
    try:
        with initialize_config_dir(config_dir=str(config_dir), **VERSION_BASE):
            return compose(
                config_name=config_name,
                overrides=[*overrides, *(f"~hydra/{name}" for name in HYDRA_DEFAULTS)],
            )
    except Exception:  # noqa: BLE001 - composed again below, where Hydra says what is wrong
        pass
    with initialize_config_dir(config_dir=str(config_dir), **VERSION_BASE):
        return compose(config_name=config_name, overrides=overrides)


def not_a_config_file(config_dir: Path, name: str) -> str | None:
    """Why `<config_dir>/<name>.yaml`, which exists, is no config Hydra reads (it is a FIFO, a
    device, a folder, a link to nothing), or None: it is a regular file, or there is none. A link
    is followed, as Hydra follows it; nothing is opened."""
    if not name:
        return None
    path = config_dir / (
        name if name.endswith(".yaml") else f"{name}.yaml"
    )  # as Hydra names the file
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"{shown_path(path)} is a link to nothing" if os.path.islink(path) else None
    except (OSError, ValueError):  # a name too long, a NUL byte: Hydra says it is not found
        return None
    if stat.S_ISREG(mode):
        return None
    return (
        f"{shown_path(path)} is {file_kind(mode)}, not a regular file: Hydra reads a config only "
        f"from a "
        "regular file, and planner opens no other"
    )


def yaml_file_error(error: BaseException | None) -> str | None:
    """`file:line:column: problem (context)` for a YAML syntax error in a config file, None for
    other errors.

    Hydra raises (or wraps, as the cause) the YAML parser's error, whose marks
    name the broken file and position; the file is shown relative to the
    current folder when it is below it.
    """
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, yaml.MarkedYAMLError):
            mark = error.problem_mark or error.context_mark
            problem = " ".join(str(error.problem or "").split()) or type(error).__name__
            context = " ".join(str(error.context or "").split())
            what = f"{problem} ({context})" if context else problem
            if mark is None:
                return what

            return f"{shown_path(mark.name)}:{mark.line + 1}:{mark.column + 1}: {what}"
        error = error.__cause__ or error.__context__
    return None


def _mentioned(error: BaseException, group) -> _Override | None:
    """The group override whose key Hydra's message names ("Could not override 'optimizer@'"), if
    any."""
    text = str(error)
    for ov, item in group:
        key = item.key_or_group + (f"@{item.package}" if item.package else "")
        if f"'{key}" in text or f"for {item.key_or_group}." in text:
            return ov
    return None


def _missing_option(error, group):
    """Which group override named an option that does not exist, with the options that do."""
    options = list(getattr(error, "options", None) or [])
    missing_name = getattr(error, "missing_cfg_file", None) or ""
    for ov, item in group:
        value = str(item.value())
        if (
            missing_name.endswith(f"{item.key_or_group}/{value}")
            or missing_name == value
            or (f"{item.key_or_group}/{value}" in str(error))
        ):
            return ov, options
    return None


def _apply_value_override(cfg, ov: _Override, item, arm: str) -> ComposeProblem | None:
    key = item.key_or_group
    try:
        exists = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False) is not _ABSENT
        if item.is_delete():
            if not exists:
                near = near_key(cfg, key)
                hint = f"; did you mean {near!r}?" if near is not None else ""
                return ComposeProblem(
                    "no_such_key",
                    f"override {ov.text!r} deletes {key!r}, which is not in the config{hint}",
                    arm,
                    ov.source,
                    ov.index,
                )
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            del node[leaf]
            return None
        value = item.value()
        if item.is_add() and exists:
            return ComposeProblem(
                "bad_override",
                f"override {ov.text!r} adds {key!r}, which exists already; drop the '+' to change "
                f"it",
                arm,
                ov.source,
                ov.index,
            )
        if not (item.is_add() or item.is_force_add()) and not exists:
            near = near_key(cfg, key)
            if (
                near is not None
            ):  # a typo: adding the key would make an arm that changes a key nothing reads
                return ComposeProblem(
                    "no_such_key",
                    f"override {ov.text!r} changes {key!r}, which is not in the "
                    f"config; did you mean {near!r}?",
                    arm,
                    ov.source,
                    ov.index,
                )
            return ComposeProblem(
                "no_such_key",
                f"override {ov.text!r} changes {key!r}, which is not in the config "
                f"and no key is near it; write '+{ov.text}' to add it",
                arm,
                ov.source,
                ov.index,
            )
        OmegaConf.update(cfg, key, value, merge=True, force_add=True)
    except Exception as error:
        return ComposeProblem(
            "bad_override",
            f"override {ov.text!r} cannot be applied: {_first_line(error)}",
            arm,
            ov.source,
            ov.index,
        )
    return None


_ABSENT = object()


def near_key(cfg, key: str) -> str | None:
    """The config's key closest to `key` (a typo: `model.hiden` -> `model.hidden`), or None when
    none is near."""
    return near_path(flatten(OmegaConf.to_container(cfg, resolve=False)), key)


def near_path(leaves, key: str) -> str | None:
    """Of the dotted paths `leaves` (and the groups above them), the one closest to `key`, or None:
    a typo (`model.hiden` -> `model.hidden`), or a sibling whose name is the other's initials
    (`optim.learning_rate` <-> `optim.lr`). The one suggestion rule of every "did you mean"."""
    keys = set(leaves)
    keys |= {
        ".".join(k.split(".")[:i]) for k in list(keys) for i in range(1, k.count(".") + 1)
    }  # groups too
    keys.discard(key)
    parent, _, name = key.rpartition(".")
    same_parent = sorted(
        k for k in keys if k.rpartition(".")[0] == parent
    )  # a sibling first, then anywhere
    for pool in (same_parent, sorted(keys)):
        found = difflib.get_close_matches(key, pool, n=1, cutoff=0.8)
        if found:
            return found[0]
    short = [
        k
        for k in same_parent
        if _initials(k.rpartition(".")[2]) == name or _initials(name) == k.rpartition(".")[2]
    ]
    return short[0] if len(short) == 1 else None


def _initials(name: str) -> str | None:
    """`learning_rate` -> `lr`; None for a name of one word (its initial is no abbreviation)."""
    words = [w for w in re.split(r"[_\-]+", name) if w]
    return "".join(w[0] for w in words) if len(words) > 1 else None


def _find_resolver_calls(node, *, hydra: bool = False) -> list[tuple[str, str]]:
    """(dotted path, text) of every string in `node` (walked into lists, by the one flatten) that
    calls a resolver (`${hydra:...}` counted only when `hydra` is false)."""
    if isinstance(node, str):
        return [("", node)] if calls_resolver(node, hydra=hydra) else []
    return [
        (path, value)
        for path, value in flatten(node, into_lists=True).items()
        if isinstance(value, str) and calls_resolver(value, hydra=hydra)
    ]


def _hydra_note(text: str, hydra: bool) -> str:
    """Why a `${hydra:...}` the text holds is refused here, or ""."""
    if not hydra and hydra_calls(text):
        return (
            "; ${hydra:...} is resolved by a `command:` app's Hydra when it runs, and this "
            "contract's "
            "`trainable:` runs without Hydra"
        )
    return ""


class ConfigFiles(list):
    """The YAML files `config_files` found, in walk order; `cut` says where the walk stopped short,
    or is None."""

    cut: str | None = None


def config_files(base: Path) -> ConfigFiles:
    """The YAML files under `base` as Hydra reads them: links to files and folders followed (Hydra
    follows them, so a linked `config.yaml` or `model/` is checked like a plain one), each folder
    walked once (a link loop ends), folders in name order, depth first. Every check of a config
    dir's files walks it so (P205 of a defaults list or a `hydra:` node, P230).

    The walk is bounded, so a link to / or to a data tree costs no more than a large config dir: at
    most MAX_CONFIG_ENTRIES names listed, MAX_CONFIG_DEPTH folders deep, MAX_CONFIG_FILES YAML
    files of MAX_CONFIG_BYTES in all; past a bound `cut` says which (P907)."""
    found = ConfigFiles()
    try:
        if not base.is_dir():  # P200 says so
            return found
    except (OSError, ValueError):  # a NUL byte, a name too long: P200 too
        return found
    seen: set[tuple[int, int]] = set()
    listed = size = 0
    stack = [(str(base), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:  # a link back up, or a second link to one folder
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs, files, listed = _listing(folder, listed)
        for name in sorted(files):
            if name.endswith((".yaml", ".yml")):
                path = Path(folder) / name
                try:
                    size += os.stat(path).st_size
                except OSError:  # a dangling link: read_config_file passes it by
                    pass
                if size > MAX_CONFIG_BYTES:
                    found.cut = (
                        f"{MAX_CONFIG_BYTES >> 20} MiB of YAML files (at {shown_path(path)})"
                    )
                    return found
                found.append(path)
                if len(found) >= MAX_CONFIG_FILES:
                    found.cut = f"{MAX_CONFIG_FILES} YAML files"
                    return found
        if listed > MAX_CONFIG_ENTRIES:
            found.cut = f"{MAX_CONFIG_ENTRIES} names listed (in {shown_path(folder)})"
            return found
        if dirs and depth >= MAX_CONFIG_DEPTH:
            found.cut = found.cut or f"{MAX_CONFIG_DEPTH} folders deep (in {shown_path(folder)})"
            continue
        stack.extend((os.path.join(folder, name), depth + 1) for name in sorted(dirs, reverse=True))
    return found


def _listing(folder: str, listed: int) -> tuple[list[str], list[str], int]:
    """(folders, other names) in `folder`, links to folders among the folders, as the walk's count
    `listed` goes up by each name, stopping past MAX_CONFIG_ENTRIES (a folder of millions is not
    listed in full)."""
    dirs: list[str] = []
    files: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                listed += 1
                if listed > MAX_CONFIG_ENTRIES:
                    break
                try:
                    (dirs if entry.is_dir() else files).append(
                        entry.name
                    )  # a link followed, as Hydra does
                except OSError:
                    files.append(entry.name)
    except OSError:  # unreadable, or gone
        pass
    return dirs, files, listed


def read_config_file(path: Path, max_bytes: int | None = None) -> str | None:
    """The text of `path` (a link followed, as Hydra does) when it is a regular file (of at most
    `max_bytes`); None for a FIFO, a device, a dangling link (opened without blocking: a FIFO never
    stalls validation)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, True)
        data = handle.read(-1 if max_bytes is None else max_bytes + 1)
        return None if max_bytes is not None and len(data) > max_bytes else data.decode("utf-8")


def load_config_text(text: str) -> Any:
    """`yaml.safe_load(text)` for a config file planner checks itself (credentials, resolver
    calls), parsed by libyaml where PyYAML has it: the same safe constructor and resolver over a
    parser in C, several times faster. A text libyaml refuses is parsed again in Python, so a file
    is passed over only where `yaml.safe_load` refuses it too."""
    if yaml.__with_libyaml__:
        try:
            return yaml.load(text, Loader=yaml.CSafeLoader)
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def defaults_resolver_calls(config_dir: Path) -> list[tuple[str, str]]:
    """(file, entry) of every defaults-list entry under `config_dir` that calls a resolver.

    Hydra resolves the defaults list of a config file while composing, before any value is seen:
    those entries are checked on the files themselves.
    """
    found = []
    for path in config_files(config_dir):
        try:
            text = read_config_file(path)
            if text is None or "${" not in text:
                continue
            data = load_config_text(text)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
            continue  # Hydra will say what is wrong with it, if it is used
        if isinstance(data, dict) and "defaults" in data:
            found += [
                (str(path.relative_to(config_dir)), t)
                for _, t in _find_resolver_calls(data["defaults"])
            ]
    return found


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
