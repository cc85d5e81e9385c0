# a small model that trains in a few seconds on a CPU
n_embd = 32
block_size = 16
batch_size = 32
learning_rate = 3e-3
eval_interval = 20
eval_iters = 8
