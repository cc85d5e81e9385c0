"""A tiny character-level language model, written in the style of nanoGPT's train.py.

    python train.py config/small.py --hidden=64 --max_iters=200

Its settings are the globals below; configurator.py (exec'd) reads a config file named as an
argument and `--key=value` overrides. It prints its evaluations (`step 40: train loss 2.31, val loss
2.35`) and writes nothing else: the metrics are only printed. It trains for `max_iters` steps and
evaluates every `eval_interval` steps, at step 0 and at the last step too.
"""

import os
import time

import torch
from model import CharModel

# settings, each overridable by a config file or --key=value
seed = 1337
max_iters = 200
eval_interval = 50
eval_iters = 10
batch_size = 16
block_size = 16
n_embd = 32
hidden = 32  # 0: no hidden layer
dropout = 0.0
learning_rate = 1e-3
data_file = "data/input.txt"
device = "cpu"
out_dir = "out"
init_from = "scratch"  # or "resume": continue from out_dir/ckpt.pt
exec(open("configurator.py").read())

torch.manual_seed(seed)
torch.set_num_threads(1)
text = open(data_file).read()
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
split = int(0.9 * len(data))
train_data, val_data = data[:split], data[split:]


def get_batch(part):
    source = train_data if part == "train" else val_data
    ix = torch.randint(len(source) - block_size - 1, (batch_size,))
    x = torch.stack([source[i : i + block_size] for i in ix])
    y = torch.stack([source[i + 1 : i + 1 + block_size] for i in ix])
    return x.to(device), y.to(device)


model = CharModel(len(chars), n_embd, hidden, dropout).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
iter_num = 0
checkpoint = os.path.join(out_dir, "ckpt.pt")
if init_from == "resume" and os.path.exists(checkpoint):
    state = torch.load(checkpoint)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    iter_num = state["iter_num"]
    torch.set_rng_state(state["rng"])
    print(f"resuming from {checkpoint} at step {iter_num}")


@torch.no_grad()
def estimate_loss():
    model.eval()
    out = {}
    for part in ("train", "val"):
        out[part] = sum(model(*get_batch(part)).item() for _ in range(eval_iters)) / eval_iters
    model.train()
    return out


t0 = time.time()
while True:
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        os.makedirs(out_dir, exist_ok=True)
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "iter_num": iter_num,
            "rng": torch.get_rng_state(),
        }
        torch.save(state, checkpoint)
    if iter_num >= max_iters:
        break
    loss = model(*get_batch("train"))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    iter_num += 1
    if iter_num % 10 == 0:
        print(f"iter {iter_num}: loss {loss.item():.4f}, time {(time.time() - t0) * 1000:.0f}ms")
