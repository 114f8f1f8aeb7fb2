"""The yardstick of `make bench-lm` at long context: the GPT of `attngraph lm
train` (pre-LayerNorm blocks of H heads and an output projection, a 4D GELU
sublayer, learned positions, the head tied to the token embeddings; no biases
but the LayerNorms' (torch 1.13's LayerNorm has no bias=False), no dropout; AdamW) written in plain PyTorch with dense masked attention, as a
researcher would write it to try a mask: the scores of every pair of tokens,
the mask applied with masked_fill, softmax, then the values. Its cost does not
depend on the mask. Torch 1.13 (Debian's) has no scaled_dot_product_attention.

    gpt_torch.py --text input.txt --block 1024 --batch 2 --steps 5 --threads 2
    gpt_torch.py --examples mqar --positions rope --layers 2 --batch 32 --steps 5

With --examples DIR (an example set of `attngraph lm task`), a step reads B
random examples and the loss is F.cross_entropy's over the scored targets
(ignore_index -100) of the [B*T, V] logits, as a PyTorch user writes it;
--positions rope turns q and k by RoFormer's formula instead of learned
positions.

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


def rope(x, base=10000.0):
    """RoFormer's turn of x [B, H, T, d]: pairs (j, j + d/2) by angle t * base^(-2j/d)."""
    T, d = x.shape[-2], x.shape[-1]
    a = torch.arange(T, dtype=torch.float32)[:, None] * \
        base ** (-2.0 * torch.arange(d // 2, dtype=torch.float32) / d)
    c, s = torch.cos(a), torch.sin(a)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)


class Block(nn.Module):
    def __init__(self, dim, heads, rotary):
        super().__init__()
        self.heads, self.rotary = heads, rotary
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.fc, self.out = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x, mask):
        B, T, D = x.shape
        d = D // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (a.view(B, T, self.heads, d).transpose(1, 2) for a in (q, k, v))
        if self.rotary:
            q, k = rope(q), rope(k)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block, dim, layers, heads, rotary=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = None if rotary else nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, rotary) for _ in range(layers))
        self.lnf = nn.LayerNorm(dim)

    def forward(self, ids, targets, mask):
        x = self.wte(ids)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(ids.shape[1]))
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
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text")
    src.add_argument("--examples", help="an example set's folder (train_inputs.npy, ...)")
    p.add_argument("--positions", default="learnt", choices=("learnt", "rope"))
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
    if a.examples:
        inputs = torch.from_numpy(np.load(a.examples + "/train_inputs.npy").astype(np.int64))
        targets = torch.from_numpy(np.load(a.examples + "/train_targets.npy").astype(np.int64))
        vocab, a.block = int(max(inputs.max(), targets.max())) + 1, inputs.shape[1]
    else:
        with open(a.text, encoding="utf-8") as f:
            text = f.read()
        chars = sorted(set(text))
        index = {c: k for k, c in enumerate(chars)}
        data = torch.tensor([index[c] for c in text], dtype=torch.long)
        vocab = len(chars)
    model = GPT(vocab, a.block, a.dim, a.layers, a.heads, a.positions == "rope")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    mask = mask_of(a.pattern, a.block)
    rng = np.random.default_rng(1337)
    times, loss = [], None
    for _ in range(a.steps + 1):
        t0 = time.perf_counter()
        if a.examples:
            rows = torch.from_numpy(rng.integers(0, len(inputs), a.batch))
            x, y = inputs[rows], targets[rows]
        else:
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
