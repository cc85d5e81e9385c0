"""The one check that a Hydra app ran the config the contract composed.

The app writes what it composed to `<hydra run dir>/.hydra/config.yaml` before
its task starts; `ConfigCheck.run()` compares it with the trial's expected
config the first time the file is there (before a report is forwarded, and
when the command has ended), and raises CommandConfigMismatchError naming the
first differences.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planner._contract.paths import config_diff, interpolated_paths, resolve
from planner._core.errors import CommandConfigMismatchError


class ConfigCheck:
    """Compares the config the Hydra app composed with the one the contract composed, once.

    Leaves that are interpolations in the app's config (`${optimizer.lr}`) are
    derived, not chosen, and are left out: the planner's configs carry them
    resolved against the untuned values.
    """

    def __init__(self, path: Path, expected: Mapping[str, Any] | None):
        self.path = path
        self.expected = expected
        self.done = expected is None

    def run(self) -> None:
        if self.done or not self.path.is_file():
            return
        self.done = True
        # omegaconf (with Hydra) is heavy: loaded only when an app's config is there to read
        from omegaconf import OmegaConf

        loaded = OmegaConf.load(self.path)
        derived = interpolated_paths(OmegaConf.to_container(loaded, resolve=False))
        composed = resolve(OmegaConf.to_container(loaded, resolve=False), throw_on_missing=False)
        differences = [
            d for d in config_diff(dict(self.expected or {}), composed) if d[0] not in derived
        ]
        if differences:
            shown = "; ".join(
                f"{path}: contract {a!r}, script {b!r}" for path, a, b in differences[:5]
            )
            more = f" (and {len(differences) - 5} more)" if len(differences) > 5 else ""
            raise CommandConfigMismatchError(
                f"the script composed a different config from the contract's ({self.path}): "
                f"{shown}{more}. "
                "Point the contract's `config: {dir, name}` at the app's config folder and "
                "primary config"
            )
