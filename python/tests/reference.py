"""Dense masked attention in float64 torch: the reference for the library.

Per-edge form: scores S [H, E] for every message j -> i, normalised over the
messages of each destination with a dense [N, E] mask (so each multi-edge is
its own message), M = A V[src]. Gradients come from torch.autograd."""
import math

import torch
import torch.nn.functional as F


def attention(src, dst, N, q, k, v, H, kind="scaled-dot", beta=1.0, softcap=0.0, slope=0.2,
              a_src=None, a_dst=None, a=None, edge_bias=None, sigmoid_bias=None, keep=None,
              edge_pre=None, edge_key=None, edge_value=None):
    """Returns (M [N, H*d], A [E, H]) for float64 tensors q, k, v [N, H*d].
    keep [E, H]: dropout's factors (0 or 1/(1-p)), multiplied into A;
    edge_pre [E, H]: additive's edge terms, inside the LeakyReLU; edge_key,
    edge_value [E, H*d]: added to each message's key and value."""
    src = torch.as_tensor(src, dtype=torch.long)
    dst = torch.as_tensor(dst, dtype=torch.long)
    E = src.numel()
    d = q.shape[1] // H
    qe = q[dst].view(E, H, d)
    ke = k[src].view(E, H, d)
    if edge_key is not None:
        ke = ke + edge_key.view(E, H, d)
    if kind in ("scaled-dot", "dot", "sigmoid"):
        s = (qe * ke).sum(-1) / (math.sqrt(d) if kind != "dot" else 1.0)
    elif kind == "cosine":
        s = F.cosine_similarity(qe, ke, dim=-1, eps=0.0)
    elif kind == "additive":
        u = (qe * a_dst).sum(-1) + (ke * a_src).sum(-1)
        s = F.leaky_relu(u if edge_pre is None else u + edge_pre, slope)
    elif kind == "gatv2":
        s = (F.leaky_relu(qe + ke, slope) * a).sum(-1)
    elif kind == "linear":
        s = ((F.elu(qe) + 1) * (F.elu(ke) + 1)).sum(-1)
    else:
        raise ValueError(kind)
    if kind not in ("sigmoid", "linear"):
        s = s * beta
        if softcap:
            s = softcap * torch.tanh(s / softcap)
    if edge_bias is not None and kind != "linear":
        s = s + edge_bias[:, None]
    mask = torch.zeros(N, E, dtype=torch.bool)
    mask[dst, torch.arange(E)] = True
    if kind == "sigmoid":
        deg = mask.sum(1).to(q.dtype)
        b = torch.full_like(deg, sigmoid_bias) if sigmoid_bias is not None else -torch.log(deg.clamp(min=1))
        A = torch.sigmoid(s + b[dst][:, None])                 # [E, H]
    elif kind == "linear":
        tot = torch.zeros(N, H, dtype=q.dtype).index_add(0, dst, s)
        A = s / tot[dst]
    else:
        dense = torch.where(mask[None], s.t()[:, None, :], torch.tensor(-math.inf, dtype=q.dtype))
        P = torch.softmax(dense, dim=-1)                     # [H, N, E]
        P = torch.where(mask[None], P, torch.zeros((), dtype=q.dtype))
        A = P.sum(1).t()                                     # [E, H]: one destination per edge
    if keep is not None:
        A = A * keep
    ve = v[src].view(E, H, d)
    if edge_value is not None:
        ve = ve + edge_value.view(E, H, d)
    M = torch.zeros(N, H, d, dtype=q.dtype).index_add(0, dst, A[:, :, None] * ve)
    return M.reshape(N, H * d), A
