"""A model as the library holds it (ag_model_t, docs/c-api.md): its text
(docs/model-file.md), its layers' weights and its readout, loaded from and
saved to the folders `attngraph train --save` writes, and run on a graph.

    m = attngraph.Model.load("model")            # what train --save wrote
    classes = m.predict(graph, x)                # what `attngraph run --weights model` predicts
    m.save("copy")                               # the same folder, whole or not at all
"""
import ctypes as C
import os

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, Error
from .ops import f32


class Model:
    """A model of the library: Model.load(folder) or Model.init(text, D, ...)."""

    def __init__(self):
        raise TypeError("make a Model with Model.load(folder) or Model.init(text, D, ...)")

    @classmethod
    def _new(cls):
        m = object.__new__(cls)
        m._m = S.ag_model_t()
        m._live = False
        return m

    @classmethod
    def load(cls, folder):
        """The model of folder: folder/model.txt and its arrays (every shape checked), or a
        folder of `train` without a model file (folder/model.args)."""
        m = cls._new()
        e = err()
        check(lib.ag_model_load(C.byref(m._m), os.fsencode(folder), C.byref(e)), e)
        m._live = True
        return m

    @classmethod
    def init(cls, text, D, classes=0, edge_dim=0, seed=1):
        """A fresh model of the model text `text` (a model file's lines) for features of
        width D: the layers drawn from seed as `attngraph train --model FILE --seed seed`
        draws them, and with classes > 0 and a linear readout its Wr and br."""
        spec = S.ag_model_spec_t()
        e = err()
        check(lib.ag_model_spec_parse(C.byref(spec), text.encode(), b"model text", C.byref(e)),
              e)
        m = cls._new()
        check(lib.ag_model_init(C.byref(m._m), C.byref(spec), int(D), int(classes),
                                int(edge_dim), int(seed), C.byref(e)), e)
        m._live = True
        return m

    def __del__(self):
        if getattr(self, "_live", False):
            lib.ag_model_destroy(C.byref(self._m))
            self._live = False

    def save(self, folder):
        """Writes the model into folder as train --save does (model.txt, the arrays and
        the readout's): every file whole, and all or none of them."""
        e = err()
        check(lib.ag_model_save(C.byref(self._m), os.fsencode(folder), C.byref(e)), e)

    @property
    def text(self):
        """The model's text, as model.txt holds it."""
        n = lib.ag_model_spec_text(None, 0, C.byref(self._m.spec))
        buf = C.create_string_buffer(n + 1)
        lib.ag_model_spec_text(buf, n + 1, C.byref(self._m.spec))
        return buf.value.decode()

    @property
    def D(self):
        """The features' width."""
        return int(self._m.D)

    @property
    def classes(self):
        """The linear readout's classes (0: none; the last layer writes the output)."""
        return int(self._m.C)

    @property
    def width_out(self):
        """The width the last layer writes."""
        return int(lib.ag_model_width_out(C.byref(self._m)))

    def _inputs(self, graph, x):
        if any(self._m.spec.layers[k].edges for k in range(self._m.spec.n_layers)):
            raise Error("the model's layers read edge features (edges=yes); run them with "
                        "attngraph.rounds(..., edge_features=E) on attngraph.load_model's "
                        "layers", "invalid value")
        return f32(x, "x", (graph.N, self.D))

    def run(self, graph, x):
        """The logits [N, classes] of x [N, D] on graph (self-loops as the model says,
        made on a copy), or without a readout the last states [N, width_out]."""
        x = self._inputs(graph, x)
        out = np.empty((graph.N, self.classes or self.width_out), np.float32)
        e = err()
        check(lib.ag_model_run(C.byref(self._m), C.byref(graph._nb), x.ctypes.data, None,
                               out.ctypes.data, C.byref(e)), e)
        return out

    def predict(self, graph, x):
        """The class of each node [N] (int64): the argmax of run's logits."""
        x = self._inputs(graph, x)
        out = np.empty(graph.N, np.int64)
        e = err()
        check(lib.ag_model_predict(C.byref(self._m), C.byref(graph._nb), x.ctypes.data, None,
                                   out.ctypes.data, C.byref(e)), e)
        return out

    def __repr__(self):
        return "<attngraph.Model D=%d, %d layer%s, %s>" % (
            self.D, self._m.spec.n_layers, "" if self._m.spec.n_layers == 1 else "s",
            "%d classes" % self.classes if self.classes else "width %d out" % self.width_out)
