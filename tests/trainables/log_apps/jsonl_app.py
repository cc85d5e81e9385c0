"""A plain Hydra app that appends its metrics as JSON lines: train and eval lines apart."""

from __future__ import annotations

import json
import os
import random
import time

import hydra
from common import accuracy
from hydra.core.hydra_config import HydraConfig


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg) -> None:
    rng = random.Random(cfg.seed)
    path = os.path.join(HydraConfig.get().runtime.output_dir, "logs", "log.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as log:
        for step in range(1, cfg.max_steps + 1):
            time.sleep(cfg.step_s)
            log.write(json.dumps({"step": step, "loss": 1.0 / step}) + "\n")
            log.write(
                json.dumps({"step": step, "eval_acc": accuracy(cfg, step, rng), "note": None})
                + "\n"
            )
            log.flush()
            print(f"step {step}", flush=True)


if __name__ == "__main__":
    main()
