"""attngraph from Python: attention as message passing on graphs.

    import attngraph as ag
    g = ag.Graph.from_edge_index(edge_index, num_nodes)
    m = ag.attention(g, q, k, v, heads=4)
    w = ag.attention_weights(g, q, k, heads=4)      # [E, H] in edge_index column order

The library is $ATTNGRAPH_LIB, else the build tree's build/libattngraph.so,
else the installed libattngraph.so.0.2 (docs/python.md says more).
attngraph.torch has the PyTorch layer, attngraph.draw the pictures (SVG).
"""
from ._lib import (Error, simd_isa, lib as _clib, path as library_path,
                   VERSION as __version__)
from .graph import Graph
from .ops import Score, attention, attention_kernel, attention_weights, attention_stats, attention_backward, Grads
from .weights import Weights, save_layers, load_layers, load_model
from .model import Model
from .rounds import rounds, compare, format_compare
from . import draw
from .train import (rounds_forward, Tape, grads_like, add_layer_norm, mse_loss, cross_entropy,
                    Optimizer, dropout)


def set_threads(n=0):
    """Threads of the kernels and products (OpenMP): a count, kept as it is; 0: the
    default (OMP_NUM_THREADS's count, else all cores, fewer while other programs keep
    the cores busy). Returns the most threads a call uses."""
    return _clib.ag_set_threads(int(n))


def set_memory_budget(nbytes):
    """The library's memory budget in bytes (0: the available memory); returns the previous."""
    return _clib.ag_set_memory_budget(int(nbytes))


__all__ = ["Error", "Graph", "Score", "Weights", "attention", "attention_kernel",
           "attention_weights", "attention_stats", "attention_backward", "Grads", "rounds", "compare",
           "format_compare", "rounds_forward", "Tape", "grads_like", "add_layer_norm",
           "mse_loss", "cross_entropy", "Optimizer", "dropout", "save_layers", "load_layers",
           "load_model", "Model",
           "set_threads", "set_memory_budget", "simd_isa", "library_path", "draw"]
