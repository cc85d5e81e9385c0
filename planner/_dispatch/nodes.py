"""The nodes of a cluster run: each checked before it takes a trial, one that fails held for good.

On a cluster (`plan run --address`, a function trainable) every node is checked once, as it is
first seen: a small task pinned to it (Ray's node affinity) imports the trainable and the packages
its module imports (`worker.check_node`). While its check runs, and for the rest of the run when it
fails, the node is *held*: a placement group pinned to it (its `ray.io/node-id` label, which Ray
gives every node) reserves every resource it offers that a trial or a task can ask for (CPU, GPU,
custom resources). Neither Ray Tune (tuning trials) nor planner (confirmation and reeval tasks) can
then place anything there. A node that passes is let go at once.

A placement group, not an actor, holds the node: it reserves resources without a process, so it
needs nothing of the node's Python environment, which is what failed. A node that joins while a
trial waits for a slot may take that trial in the moment before the driver sees it (Ray places work
as soon as a node registers); its holder then waits, without blocking anything, for that slot to be
free. The holders go with `release()`, at the end of the run (or when the driver's Ray job ends).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from planner._core.lazy import lazy_import
from planner._dispatch.worker import check_node

ray = lazy_import("ray")  # a guard exists only once a cluster is joined

NODE_LOOK_S = 2.0  # how often the driver looks for nodes that joined (each is checked once)
FIRST_CHECK_S = 120.0  # what the run's first look waits for the checks (a node ships the code)
NODE_ID_LABEL = "ray.io/node-id"  # the label Ray gives each node: its node id
_NOT_HELD = ("memory", "object_store_memory")  # no trial asks for these (Ray's defaults are 0)


def trials_held(need: Mapping[str, float], have: Mapping[str, float]) -> int:
    """How many trials asking `need` (Ray's resource names) a node offering `have` holds at once."""
    counts = [int(have.get(name, 0.0) // amount) for name, amount in need.items() if amount > 0]
    return min(counts) if counts else 1


def holdable(resources: Mapping[str, float]) -> dict[str, float]:
    """What of a node's resources (`ray.nodes()`'s "Resources") its holder reserves: every one a
    trial or a task can ask for, not Ray's per-node markers (`node:<ip>`) nor memory."""
    return {
        name: float(amount)
        for name, amount in resources.items()
        if amount > 0 and name not in _NOT_HELD and not name.startswith("node:")
    }


def can_pin_placement_groups() -> bool:
    """Whether the installed Ray's placement groups take `bundle_label_selector` (what pins a holder
    to one node); without it a refused node is named and confirmation avoids it, Tune may not."""
    import inspect

    from ray.util.placement_group import placement_group

    return "bundle_label_selector" in inspect.signature(placement_group).parameters


def _ignore(node_id: str, problem: str) -> None:
    return None


def short_node(node_id: str) -> str:
    return node_id[:12]


class NodeGuard:
    """The nodes of one cluster run as trials may use them: checked, refused (and held), pending.

    guard = NodeGuard(trainable, path, resources_for(budget), on_refused=hooks.node_refused)
    guard.look(wait_s=FIRST_CHECK_S)   # before the first trial: every node's check answered
    ...                                # tuning and confirmation call look() as they go
    guard.release()                    # the run's end
    """

    def __init__(
        self,
        trainable: str,
        path: tuple[str, ...],
        need: Mapping[str, float],
        on_refused: Callable[[str, str], None],
    ):
        self.trainable, self.path, self.need = trainable, tuple(path), dict(need)
        self.on_refused = on_refused
        self.here: str | None = ray.get_runtime_context().get_node_id()  # the driver's own node
        self.check = ray.remote(check_node)
        self.offers: dict[str, dict[str, float]] = {}  # node -> its resources, as first seen
        self.checked: set[str] = set()  # nodes whose check passed (and are not known to be gone)
        self.refused: dict[str, str] = {}  # node -> what failed there
        self.pending: dict[Any, str] = {}  # check task -> its node
        self.held: dict[str, Any] = {}  # node -> the placement group that holds it
        self.alive: set[str] = set()
        self.looked = -NODE_LOOK_S

    def __getstate__(self) -> dict:  # Tune pickles its callbacks: the driver's guard stays behind
        return {}

    def __setstate__(self, state: dict) -> None:  # a copy that looks at nothing and holds nothing
        self.trainable, self.path, self.need, self.here = "", (), {}, None
        self.on_refused = _ignore
        self.offers, self.checked, self.refused, self.pending, self.held = {}, set(), {}, {}, {}
        self.alive, self.looked = set(), math.inf

    def look(self, wait_s: float = 0.0) -> None:
        """Hold and check the nodes that joined since the last look (at most every NODE_LOOK_S);
        take the checks that answered, waiting up to `wait_s` for all of them."""
        if time.monotonic() - self.looked >= NODE_LOOK_S:
            self.looked = time.monotonic()
            nodes = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
            self.alive = set(nodes)
            for node_id in [n for n in self.held if n not in nodes and n not in self.pending]:
                self._free(node_id)  # a refused node that died: nothing to hold any more
            self.checked &= self.alive  # a node that comes back is checked again
            asked = set(self.pending.values())
            for node_id, node in nodes.items():
                have = dict(node.get("Resources", {}))
                if node_id in self.checked or node_id in self.refused or node_id in asked:
                    continue
                if not trials_held(self.need, have):
                    continue  # it cannot hold a trial: nothing to check
                self.offers[node_id] = have
                self._hold(node_id)
                self._send_check(node_id)
        if self.pending:
            done, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=wait_s)
            for ref in done:
                self._answered(ref)

    def _send_check(self, node_id: str) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
        ref = self.check.options(num_cpus=0, max_retries=0, scheduling_strategy=strategy).remote(
            self.trainable, self.path
        )
        self.pending[ref] = node_id

    def _answered(self, ref: Any) -> None:
        node_id = self.pending.pop(ref)
        try:
            problem = ray.get(ref)
        except Exception:  # the node went while it was checked: looked at again if it is back
            self._free(node_id)
            return
        if problem is None:
            self._free(node_id)
            self.checked.add(node_id)
        else:
            if not can_pin_placement_groups():
                problem += (
                    f"; Ray {ray.__version__} cannot pin a placement group to a node (its "
                    "bundle_label_selector came later), so tuning trials may still be placed "
                    "there: remove the node, or use a newer Ray"
                )
            self.refused[node_id] = problem
            self.on_refused(node_id, problem)

    def _hold(self, node_id: str) -> None:
        """Reserve all `node_id` offers (a placement group pinned to it), at once or once free."""
        from ray.util.placement_group import placement_group

        bundle = holdable(self.offers.get(node_id, {}))
        if bundle and node_id not in self.held and can_pin_placement_groups():
            self.held[node_id] = placement_group(
                [bundle], strategy="STRICT_PACK", bundle_label_selector=[{NODE_ID_LABEL: node_id}]
            )

    def _free(self, node_id: str) -> None:
        from ray.util.placement_group import remove_placement_group

        group = self.held.pop(node_id, None)
        if group is not None:
            try:
                remove_placement_group(group)
            except Exception:  # noqa: BLE001 - the cluster is going: the job's end removes it
                pass

    def usable(self) -> dict[str, int]:
        """The checked, alive nodes and how many trials each holds at once."""
        return {
            node_id: trials_held(self.need, self.offers.get(node_id, {}))
            for node_id in sorted(self.checked & self.alive)
        }

    def gone(self, node_id: str) -> None:
        """`node_id` died: no trial is sent there (it is checked again should it come back)."""
        self.checked.discard(node_id)
        self.alive.discard(node_id)

    def none_can_run(self) -> str | None:
        """Why no node can run a trial (every alive node that could hold one refused), or None."""
        if self.checked & self.alive or self.pending or not self.alive & set(self.refused):
            return None
        mine = " (the one the driver runs on)"
        said = "; ".join(
            f"node {short_node(n)}{mine if n == self.here else ''}: {why}"
            for n, why in sorted(self.refused.items())
            if n in self.alive
        )
        return f"no node of the Ray cluster can run the trainable ({said})"

    def release(self) -> None:
        """Let every held node go (the run's end)."""
        for node_id in list(self.held):
            self._free(node_id)
