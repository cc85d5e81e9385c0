"""A plain argparse script: logistic regression in numpy, its metrics in a JSON-lines log.

    python train.py --help
    python train.py --seed=3 --epochs=4 --preprocess.standardize --output_dir=/tmp/out

Not one line knows about planner: it takes its seed, its number of epochs and every setting as
`--key value` flags, and appends one line a epoch to `<output_dir>/metrics.jsonl`. numpy is imported
after the flags are parsed, so `--help` answers at once (planner reads it to check the flag names).
"""

from __future__ import annotations

import argparse
import json
import os


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="initial weights and shuffling")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--optimizer.lr", type=float, default=0.05, help="the SGD step size")
    parser.add_argument(
        "--preprocess.standardize",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="scale each feature to mean 0, sd 1",
    )
    parser.add_argument(
        "--data.seed", type=int, default=1234, help="the dataset is fixed by its own seed"
    )
    parser.add_argument("--data.n_train", type=int, default=4000)
    parser.add_argument("--data.n_val", type=int, default=1000)
    parser.add_argument(
        "--data.scales",
        type=float,
        nargs=2,
        default=[-1.0, 1.5],
        help="log10 range of the features' scales",
    )
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--output_dir", required=True, help="where metrics.jsonl and args.json go")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    import numpy as np  # after parsing: --help stays fast

    settings = vars(args)
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "args.json"), "w") as f:
        json.dump(settings, f)
    data = np.random.default_rng(settings["data.seed"])
    n, d = settings["data.n_train"] + settings["data.n_val"], 20
    z = data.normal(size=(n, d))
    y = (z @ data.normal(size=d) + data.normal(scale=0.5, size=n) > 0).astype(float)
    x = z * 10.0 ** data.uniform(*settings["data.scales"], size=d)
    x_train, y_train, x_val, y_val = (
        x[: settings["data.n_train"]],
        y[: settings["data.n_train"]],
        x[settings["data.n_train"] :],
        y[settings["data.n_train"] :],
    )
    if settings["preprocess.standardize"]:
        mean, sd = x_train.mean(axis=0), x_train.std(axis=0)
        x_train, x_val = (x_train - mean) / sd, (x_val - mean) / sd
    rng = np.random.default_rng(args.seed)
    w = rng.normal(scale=0.1, size=d)
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(y_train))
        for start in range(0, len(order), args.batch_size):
            batch = order[start : start + args.batch_size]
            p = 1.0 / (1.0 + np.exp(-np.clip(x_train[batch] @ w, -30, 30)))
            w -= settings["optimizer.lr"] * x_train[batch].T @ (p - y_train[batch]) / len(batch)
        p = 1.0 / (1.0 + np.exp(-np.clip(x_val @ w, -30, 30)))
        val_loss = float(-np.mean(y_val * np.log(p + 1e-12) + (1 - y_val) * np.log(1 - p + 1e-12)))
        val_acc = float(np.mean((p > 0.5) == (y_val > 0.5)))
        with open(os.path.join(args.output_dir, "metrics.jsonl"), "a") as f:
            f.write(json.dumps({"epoch": epoch, "val_acc": val_acc, "val_loss": val_loss}) + "\n")
        if args.verbose:
            print(f"epoch {epoch}: val_acc={val_acc:.4f}")


if __name__ == "__main__":
    main()
