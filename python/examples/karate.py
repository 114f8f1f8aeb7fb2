"""A two-layer graph transformer on Zachary's karate club, trained with PyTorch
through attngraph's attention (forward and backward in the C library).

The club split in two (Zachary 1977): which faction did each member join? The
features only mark the two leaders (node 0, the instructor "Mr. Hi", and node
33, the administrator); training sees the labels of those two nodes alone, and
the accuracy is measured on the other 32 members.

    PYTHONPATH=python /usr/bin/python3 python/examples/karate.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import attngraph as ag                       # noqa: E402
from attngraph.torch import GraphAttention   # noqa: E402
import igraph                                # noqa: E402
import numpy as np                           # noqa: E402
import torch                                 # noqa: E402
from torch import nn                         # noqa: E402

# the factions after the split (Zachary 1977; networkx's "club" attribute)
MR_HI = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 16, 17, 19, 21}


class GraphTransformer(nn.Module):
    def __init__(self, features, dim, heads, classes, layers=2):
        super().__init__()
        self.embed = nn.Linear(features, dim)
        self.layers = nn.ModuleList(GraphAttention(dim, heads, norm=True, residual=False)
                                    for _ in range(layers))
        self.readout = nn.Linear(dim, classes)

    def forward(self, x, graph):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, graph)
        return self.readout(h)


def main():
    torch.manual_seed(0)
    club = igraph.Graph.Famous("Zachary")
    n = club.vcount()
    edges = np.array(club.get_edgelist()).T                      # undirected: both ways
    edge_index = np.concatenate([edges, edges[::-1]], axis=1)
    graph = ag.Graph.from_edge_index(edge_index, n, self_loops="on")
    labels = torch.tensor([0 if v in MR_HI else 1 for v in range(n)])
    x = torch.zeros(n, 2)
    x[0, 0] = x[n - 1, 1] = 1.0                                  # the two leaders
    train = torch.zeros(n, dtype=torch.bool)
    train[[0, n - 1]] = True

    model = GraphTransformer(2, 16, 2, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(100):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x, graph)[train], labels[train])
        loss.backward()
        opt.step()
    with torch.no_grad():
        pred = model(x, graph).argmax(1)
    acc = (pred[~train] == labels[~train]).float().mean().item()
    print("karate club: %d members, %d messages; trained on the 2 leaders, 100 epochs, "
          "final loss %.4f" % (n, graph.E, loss.item()))
    print("accuracy on the other %d members: %.1f%% (%d/%d)" % (
        int((~train).sum()), 100 * acc, int((pred[~train] == labels[~train]).sum()),
        int((~train).sum())))
    wrong = [v for v in range(n) if pred[v] != labels[v]]
    print("misplaced:", wrong if wrong else "none")


if __name__ == "__main__":
    main()
