"""A plain Hydra app that saves a Hugging Face style trainer_state.json in each checkpoint folder
(the whole state, log_history included, rewritten at each save) and once more at the end."""

from __future__ import annotations

import json
import os
import random
import time

import hydra
from common import accuracy
from hydra.core.hydra_config import HydraConfig


def save_state(folder: str, history: list, step: int, max_steps: int) -> None:
    os.makedirs(folder, exist_ok=True)
    state = {
        "epoch": float(step),
        "global_step": step,
        "max_steps": max_steps,
        "log_history": history,
        "best_metric": None,
        "trial_name": None,
    }
    with open(os.path.join(folder, "trainer_state.json"), "w") as f:
        f.write(json.dumps(state, indent=2, sort_keys=True) + "\n")


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg) -> None:
    rng = random.Random(cfg.seed)
    out = HydraConfig.get().runtime.output_dir
    history: list = []
    for step in range(1, cfg.max_steps + 1):
        time.sleep(cfg.step_s)
        history.append(
            {
                "epoch": step - 0.5,
                "loss": 1.0 / step,
                "learning_rate": cfg.optimizer.lr,
                "step": step,
            }
        )
        history.append(
            {"epoch": float(step), "eval_accuracy": accuracy(cfg, step, rng), "step": step}
        )
        save_state(os.path.join(out, f"checkpoint-{step}"), history, step, cfg.max_steps)
        print(f"step {step}", flush=True)
    history.append({"epoch": float(cfg.max_steps), "step": cfg.max_steps, "train_runtime": 1.0})
    save_state(out, history, cfg.max_steps, cfg.max_steps)


if __name__ == "__main__":
    main()
