"""attngraph.torch: attngraph.nn under its name before 0.2 (the layers, save_rounds,
load_rounds, graph_attention, dropout), kept so that code written for it runs."""
from .nn import *  # noqa: F401,F403
from .nn import __all__  # noqa: F401
