"""Attention message by message in torch: the path of the drop-in layers for
what the fused kernel does not take. The kernel (functional.graph_attention)
runs float32 and never forms a message; this path forms every message
[E, H, C] with torch's own operations, so it computes in the inputs' dtype
(float64, for torch.autograd.gradcheck), lets PyG's explainers multiply the
messages by their edge mask (MessagePassing.explain_message), gives the
attention weights with their gradients, and takes graphs of 0 nodes. It
costs O(E H C) memory and is several times slower: the layers choose it only
for those cases.

The scores are the kernel's (docs/scores.md), on messages j -> i:
  additive (GAT):  LeakyReLU(a_src . k_j + a_dst . q_i + edge_pre_ij)
  gatv2:           a . LeakyReLU(q_i + k_j + edge_key_ij)
  scaled-dot:      q_i . (k_j + edge_key_ij) / sqrt(C)
then a softmax over each destination's messages, dropout, and
m_i = sum_j alpha_ij (v_j + edge_value_ij)."""
import math

import torch.nn.functional as F


def softmax(scores, dst, n_dst):
    """scores [E, H] normalised over the messages of each destination (dst [E])."""
    H = scores.size(1)
    top = scores.new_full((n_dst, H), -math.inf)
    top = top.scatter_reduce(0, dst.view(-1, 1).expand(-1, H), scores.detach(), "amax")
    e = (scores - top.index_select(0, dst)).exp()
    total = scores.new_zeros(n_dst, H).index_add(0, dst, e)
    return e / total.index_select(0, dst)


def edge_attention(kind, q, k, v, src, dst, n_dst, heads, a_src=None, a_dst=None, a=None,
                   slope=0.2, edge_pre=None, edge_key=None, edge_value=None, dropout=0.0,
                   training=False, explain=None):
    """(M [n_dst, H*C], alpha [E, H], alpha after dropout) of messages
    src[e] -> dst[e] (int64 [E]), from q [>= n_dst rows, H*C] (None: no
    destination term, GAT's (x, None)), k and v [>= sources, H*C]. explain
    (None, or a function of the messages [E, H, C], alpha and alpha after
    dropout) changes the messages before they are added up."""
    E, H = src.numel(), heads
    C = k.size(1) // H
    kj = k.index_select(0, src).view(E, H, C)
    if edge_key is not None:
        kj = kj + edge_key.view(E, H, C)
    qi = q.index_select(0, dst).view(E, H, C) if q is not None else None
    if kind == "additive":
        s = (kj * a_src.view(1, H, C)).sum(-1)
        if qi is not None:
            s = s + (qi * a_dst.view(1, H, C)).sum(-1)
        if edge_pre is not None:
            s = s + edge_pre
        s = F.leaky_relu(s, slope)
    elif kind == "gatv2":
        s = (F.leaky_relu(qi + kj, slope) * a.view(1, H, C)).sum(-1)
    elif kind == "scaled-dot":
        s = (qi * kj).sum(-1) / math.sqrt(C)
    else:
        raise ValueError("edge_attention: score %r" % kind)
    alpha = softmax(s, dst, n_dst)
    dropped = F.dropout(alpha, p=dropout, training=training)
    vj = v.index_select(0, src).view(E, H, C)
    if edge_value is not None:
        vj = vj + edge_value.view(E, H, C)
    msg = dropped.unsqueeze(-1) * vj
    if explain is not None:
        msg = explain(msg, alpha, dropped)
    out = msg.new_zeros(n_dst, H, C).index_add(0, dst, msg)
    return out.view(n_dst, H * C), alpha, dropped
