"""An ordinary Hugging Face Trainer script: a tiny BERT, built from a config, classifies sklearn's
digits.

    python train.py                                   # 4 epochs, seed 0
    python train.py train.lr_scheduler_type=constant seed=3 train.epochs=2

Nothing here knows about planner, and nothing is downloaded: the model is
`BertForSequenceClassification(BertConfig(...))`, and each 8x8 image becomes a
sequence of 17 tokens: [CLS], then one per 2x2 block of pixels (its mean intensity, 0..16). The
Trainer evaluates and logs once per epoch into `hf/` in Hydra's output folder
(`trainer_state.json` in each checkpoint), then the script evaluates the
held-out split once (`metric_key_prefix="test"`), saves those metrics
(`hf/test_results.json`) and the final state (`hf/trainer_state.json`).
"""

from __future__ import annotations

import os

import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

LEVELS = 17  # token values 0..16
CLS, PAD = LEVELS, LEVELS + 1


def tokens(images: np.ndarray) -> np.ndarray:
    """8x8 images (intensities 0..16) -> 16 tokens each: the mean of each 2x2 block, rounded."""
    blocks = images.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4))
    return np.rint(blocks).astype(np.int64).reshape(len(images), 16)


class Digits(torch.utils.data.Dataset):
    """Images as token sequences: [CLS] then one token per pixel; the label is the digit."""

    def __init__(self, images: np.ndarray, labels: np.ndarray):
        ids = np.concatenate([np.full((len(images), 1), CLS), tokens(images)], axis=1)
        self.input_ids = torch.tensor(ids, dtype=torch.long)
        self.labels = torch.tensor(labels, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids[i],
            "attention_mask": torch.ones_like(self.input_ids[i]),
            "labels": self.labels[i],
        }


def splits(cfg: DictConfig) -> tuple[Digits, Digits, Digits]:
    x, y = load_digits(return_X_y=True)
    rows = np.arange(len(y))
    rest, test = train_test_split(
        rows, test_size=cfg.test_fraction, random_state=cfg.split_seed, stratify=y
    )
    train, val = train_test_split(
        rest,
        test_size=cfg.val_fraction / (1 - cfg.test_fraction),
        random_state=cfg.split_seed,
        stratify=y[rest],
    )
    return tuple(Digits(x[r], y[r]) for r in (train, val, test))


def accuracy(prediction) -> dict[str, float]:
    return {
        "accuracy": float((prediction.predictions.argmax(axis=-1) == prediction.label_ids).mean())
    }


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    train_ds, val_ds, test_ds = splits(cfg.data)
    config = BertConfig(
        vocab_size=LEVELS + 2,
        pad_token_id=PAD,
        max_position_embeddings=32,
        num_labels=10,
        **cfg.model,
    )
    args = TrainingArguments(
        output_dir=os.path.join(HydraConfig.get().runtime.output_dir, "hf"),
        num_train_epochs=cfg.train.epochs,
        learning_rate=cfg.train.learning_rate,
        lr_scheduler_type=cfg.train.lr_scheduler_type,
        warmup_steps=cfg.train.warmup_steps,
        weight_decay=cfg.train.weight_decay,
        per_device_train_batch_size=cfg.train.batch_size,
        per_device_eval_batch_size=256,
        eval_strategy="epoch",
        logging_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=cfg.train.save_total_limit,
        seed=cfg.seed,
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=BertForSequenceClassification(config),
        args=args,
        train_dataset=train_ds,
        eval_dataset=val_ds,
        compute_metrics=accuracy,
    )
    trainer.train()
    metrics = trainer.evaluate(
        test_ds, metric_key_prefix="test"
    )  # the held-out split, once, at the end
    trainer.save_metrics("test", metrics)
    trainer.save_state()


if __name__ == "__main__":
    main()
