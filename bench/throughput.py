"""Trials a run absorbed per second, by windows of its trials.jsonl (bench/bench_scale.py prints
it).

    python bench/throughput.py RUN_DIR/trials.jsonl [--window 1000]

A driver whose cost per trial grows with the trials it holds shows falling rates window after
window."""

from __future__ import annotations

import argparse
import json
from datetime import datetime


def rates(path: str, window: int) -> list[tuple[int, float]]:
    """(trials ended so far, trials a second over the last `window` of them), in the order they
    ended."""
    ended = sorted(
        datetime.fromisoformat(json.loads(line)["ended"].replace("Z", "+00:00")).timestamp()
        for line in open(path)
        if line.strip()
    )
    return [
        (i, window / (ended[i - 1] - ended[i - window]))
        for i in range(window, len(ended) + 1, window)
        if ended[i - 1] > ended[i - window]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trials")
    parser.add_argument("--window", type=int, default=1000)
    args = parser.parse_args()
    print(" | ".join(f"{n}: {r:.1f}/s" for n, r in rates(args.trials, args.window)))


if __name__ == "__main__":
    main()
