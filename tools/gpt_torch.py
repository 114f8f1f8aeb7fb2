"""The yardstick of `make bench-lm` at long context: the GPT of `attngraph lm
train` (pre-LayerNorm blocks of H heads and an output projection, a 4D GELU
sublayer, learned positions, the head tied to the token embeddings; no biases
but the LayerNorms' (torch 1.13's LayerNorm has no bias=False), no dropout; AdamW) written in plain PyTorch with dense masked attention, as a
researcher would write it to try a mask: the scores of every pair of tokens,
the mask applied with masked_fill, softmax, then the values. Its cost does not
depend on the mask. Torch 1.13 (Debian's) has no scaled_dot_product_attention.

    gpt_torch.py --text input.txt --block 1024 --batch 2 --steps 5 --threads 2

prints one JSON line: the median step (batch to update, the first step left
out) in ms, the loss of the last step, and the process's peak resident memory.
"""
import argparse
import json
import math
import resource
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.fc, self.out = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x, mask):
        B, T, D = x.shape
        d = D // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (a.view(B, T, self.heads, d).transpose(1, 2) for a in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block, dim, layers, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(dim)

    def forward(self, ids, targets, mask):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x, mask)
        logits = self.lnf(x) @ self.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def mask_of(pattern, T):
    """causal, or window:W (each token the last W, itself included), dense [T, T]."""
    i = torch.arange(T)
    mask = i[None, :] <= i[:, None]
    if pattern.startswith("window:"):
        mask &= i[None, :] > i[:, None] - int(pattern.split(":")[1])
    elif pattern != "causal":
        raise SystemExit("gpt_torch.py: pattern %r; expected causal or window:W" % pattern)
    return mask


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--text", required=True)
    p.add_argument("--block", type=int, default=1024)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pattern", default="causal")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    vocab = sorted(set(text))
    index = {c: k for k, c in enumerate(vocab)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    model = GPT(len(vocab), a.block, a.dim, a.layers, a.heads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    mask = mask_of(a.pattern, a.block)
    rng = np.random.default_rng(1337)
    times, loss = [], None
    for _ in range(a.steps + 1):
        t0 = time.perf_counter()
        start = torch.from_numpy(rng.integers(0, len(data) - a.block - 1, a.batch))
        x = torch.stack([data[s:s + a.block] for s in start])
        y = torch.stack([data[s + 1:s + 1 + a.block] for s in start])
        loss = model(x, y, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"median_ms": 1e3 * statistics.median(times[1:]), "loss": loss.item(),
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
