"""A character-level GPT (nanoGPT's; the library's ag_lm_t) from Python.

    import attngraph.lm as lm
    text = lm.Text.read("input.txt")                 # the vocabulary of its characters
    m = lm.LM.init(text.vocab, block=64, dim=128, layers=4, heads=4, seed=1337)
    t = lm.Trainer(m, lr=1e-3, beta2=0.99, weight_decay=0.1, clip=1.0)
    rng = np.random.default_rng(0)
    for step in range(2000):
        x, y = text.batch("train", 12, 64, rng)
        t.step(x, y, lr=schedule(step))
    print(m.sample(200, start="ROMEO:", top_k=20))
    m.save("model")                                   # `attngraph lm sample --model model`

The folder is the one `attngraph lm train --save` writes and `lm sample` reads
(docs/lm.md): a model saved by either side runs on the other, and sample()
draws the tokens `lm sample` draws for the same seed (both ag_lm_generate).
"""
import ctypes as C
import os
import shutil
import tempfile

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, Error
from .graph import Graph
from .weights import Weights, _save_npy, array_shape, arrays_of

# what a GPT block has (its arrays: the library's table), and more with biases
_F = S.LAYER_FEATURES
_BLOCK = _F["AG_LAYER_QKV"] | _F["AG_LAYER_WO"] | _F["AG_LAYER_NORM"] | _F["AG_LAYER_FFN"]
_BLOCK_BIAS = _F["AG_LAYER_NORM_BIAS"] | _F["AG_LAYER_BIAS"] | _F["AG_LAYER_QKV_BIAS"]


def batch_graph(spec, block, batch):
    """The graph of `batch` sequences of `block` tokens that `lm train --pattern
    spec` builds: copies side by side of spec's graph over one sequence
    (docs:T&(spec), causal within it), so a random pattern draws its sources
    within the sequence, the same for every sequence and for sampling."""
    one = Graph.pattern("docs:%d" % block if spec == "causal"
                        else "docs:%d&(%s)" % (block, spec), block)
    if batch == 1:
        return one
    indptr, indices = one.csr()
    E = len(indices)
    ptr = np.concatenate([indptr[:-1] + b * E for b in range(batch)] + [[batch * E]])
    src = np.concatenate([indices + b * block for b in range(batch)])
    return Graph.from_csr(ptr, src)


class Text:
    """A text as token ids over the vocabulary of its characters in code point
    order (bytes=True: its bytes), as `lm train --text` reads it; the first 90%
    trains, the rest validates."""

    def __init__(self, ids, vocab, bytes=False):
        self.ids, self.vocab, self.bytes = np.asarray(ids, np.int64), list(vocab), bool(bytes)
        self.split = int(0.9 * len(self.ids))

    @classmethod
    def read(cls, path, bytes=False):
        with open(path, "rb") as f:
            raw = f.read()
        if not raw:
            raise Error("%s is empty; expected a text to learn from" % path, "invalid value")
        if bytes:
            cps = list(raw)
        else:
            try:
                cps = [ord(c) for c in raw.decode("utf-8")]
            except UnicodeDecodeError as e:
                raise Error("%s: byte %d (0x%02x) does not start a UTF-8 character; give "
                            "bytes=True to read the file as bytes" % (path, e.start,
                                                                     raw[e.start]),
                            "invalid value") from None
        vocab = sorted(set(cps))
        index = {c: k for k, c in enumerate(vocab)}
        return cls([index[c] for c in cps], vocab, bytes)

    def batch(self, split, batch, block, rng):
        """x, y [batch, block]: random windows of block + 1 tokens of a split
        ("train" or "val"), y the tokens after x's."""
        lo, hi = (0, self.split) if split == "train" else (self.split, len(self.ids))
        start = lo + rng.integers(0, hi - lo - block, batch)
        x = np.stack([self.ids[s:s + block] for s in start])
        y = np.stack([self.ids[s + 1:s + 1 + block] for s in start])
        return x, y


class LM:
    """A GPT: wte [V, D], wpe [T, D], layers (Weights: pre-LayerNorm attention with
    wo and a residual, a pre-LayerNorm 4D GELU sublayer), lnf_weight (lnf_bias)
    [D], the head tied to wte; float32 arrays the library reads in place.
    vocab: the token ids' code points (or bytes); pattern: the graph within a
    sequence it trained under (causal, window:8, ...)."""

    def __init__(self, wte, wpe, layers, lnf_weight, heads, vocab, lnf_bias=None, bytes=False,
                 pattern="causal"):
        self.wte, self.wpe = np.ascontiguousarray(wte, np.float32), \
            np.ascontiguousarray(wpe, np.float32)
        self.lnf_weight = np.ascontiguousarray(lnf_weight, np.float32)
        self.lnf_bias = None if lnf_bias is None else np.ascontiguousarray(lnf_bias, np.float32)
        self.layers, self.heads = list(layers), int(heads)
        self.vocab, self.bytes, self.pattern = list(vocab), bool(bytes), str(pattern)
        V, D = self.wte.shape
        if len(self.vocab) != V or self.wpe.ndim != 2 or self.wpe.shape[1] != D:
            raise Error("wte %s, wpe %s and a vocabulary of %d; expected [V, D], [T, D] and V"
                        % (list(self.wte.shape), list(self.wpe.shape), len(self.vocab)),
                        "invalid value")
        self._struct()   # shapes checked now

    V = property(lambda self: self.wte.shape[0])
    D = property(lambda self: self.wte.shape[1])
    block = property(lambda self: self.wpe.shape[0])
    bias = property(lambda self: self.lnf_bias is not None)

    def _struct(self):
        """An ag_lm_t pointing into the arrays (the layers' structs kept with it)."""
        layers = (S.ag_weights_t * len(self.layers))(*[w.c() for w in self.layers])
        m = S.ag_lm_t(V=self.V, T=self.block, D=self.D, L=len(self.layers), H=self.heads,
                         bias=int(self.bias), wte=self.wte.ctypes.data,
                         wpe=self.wpe.ctypes.data, layers=layers,
                         lnf_weight=self.lnf_weight.ctypes.data,
                         lnf_bias=self.lnf_bias.ctypes.data if self.bias else None)
        m._keep = layers
        return m

    @classmethod
    def init(cls, vocab, block, dim, layers, heads, bias=False, seed=1337, pattern="causal"):
        """GPT-2's initialisation from seed (ag_lm_init: `lm train --seed`'s model)."""
        m, e = S.ag_lm_t(), err()
        check(lib.ag_lm_init(C.byref(m), len(vocab), block, dim, layers, heads, int(bias), seed,
                             C.byref(e)), e)
        try:
            def arr(p, *shape):
                return None if not p else np.ctypeslib.as_array(
                    (C.c_float * int(np.prod(shape))).from_address(p)).reshape(shape).copy()
            blocks = [Weights._copy_c(m.layers[l]) for l in range(layers)]
            return cls(arr(m.wte, m.V, m.D), arr(m.wpe, m.T, m.D), blocks,
                       arr(m.lnf_weight, m.D), heads, vocab, arr(m.lnf_bias, m.D),
                       pattern=pattern)
        finally:
            lib.ag_lm_destroy(C.byref(m))

    # ---- the folder

    @classmethod
    def load(cls, folder):
        """A model folder (`lm train --save`'s, or save()'s), every shape checked."""
        path = os.path.join(folder, "lm.txt")
        with open(path) as f:
            keys = {}
            for n, line in enumerate(f, 1):
                words = line.split(None, 1)
                if not words or words[0].startswith("#"):
                    continue
                if len(words) < 2:
                    raise Error("%s:%d: '%s' has no value" % (path, n, line.strip()),
                                "invalid value")
                keys[words[0]] = words[1].strip()
        try:
            V, kind = keys["vocab"].split()
            T, L, H, D = (int(keys[k]) for k in ("block", "layers", "heads", "dim"))
            bias = {"yes": True, "no": False}[keys["bias"]]
        except (KeyError, ValueError) as e:
            raise Error("%s: %s; expected the lm.txt `lm train --save` writes" % (path, e),
                        "invalid value") from None
        vocab = np.load(os.path.join(folder, "vocab.npy"))

        def read(sub, name, shape):
            p = os.path.join(folder, sub, name + ".npy")
            a = np.load(p)
            if a.shape != tuple(shape):
                raise Error("%s has shape %s; expected %s" % (p, list(a.shape), list(shape)),
                            "invalid value")
            return a
        shape_of = S.ag_weights_t(D=D, H=H, d=D // H, D_out=D, F=4 * D)
        blocks = []
        for l in range(1, L + 1):
            names = arrays_of(_BLOCK | (_BLOCK_BIAS if bias else 0))
            arrays = {n: read("round-%d" % l, n, array_shape(shape_of, n)) for n in names}
            blocks.append(Weights(heads=H, ff_act="gelu", **arrays))
        return cls(read("", "wte", (int(V), D)), read("", "wpe", (T, D)), blocks,
                   read("", "lnf_weight", (D,)), H, vocab.tolist(),
                   read("", "lnf_bias", (D,)) if bias else None, bytes=kind == "bytes",
                   pattern=keys.get("pattern", "causal"))

    def save(self, folder):
        """The folder `lm sample --model` reads: every file written into a new folder
        beside it first, then moved into place, so that a failure leaves the old
        folder as it was."""
        folder = os.path.abspath(folder)
        parent = os.path.dirname(folder)
        tmp = tempfile.mkdtemp(dir=parent, prefix=".tmp-lm-")
        try:
            self._write(tmp)
            moves = [(os.path.join(root, name),
                      os.path.join(folder, os.path.relpath(root, tmp), name))
                     for root, _, files in os.walk(tmp) for name in files]
            for _, dest in moves:   # what would stop a move, before any is made
                if os.path.isdir(dest) or (os.path.exists(os.path.dirname(dest)) and
                                           not os.path.isdir(os.path.dirname(dest))):
                    raise Error("%s: a folder or file is in the way; nothing was replaced"
                                % dest, "i/o error")
            for src, dest in moves:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.replace(src, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _write(self, folder):
        for l in range(len(self.layers)):
            os.makedirs(os.path.join(folder, "round-%d" % (l + 1)), exist_ok=True)
        text = ("# attngraph lm model\nvocab %d %s\nblock %d\nlayers %d\nheads %d\ndim %d\n"
                "bias %s\npattern %s\n" % (self.V, "bytes" if self.bytes else "utf-8",
                                           self.block, len(self.layers), self.heads, self.D,
                                           "yes" if self.bias else "no", self.pattern))
        np.save(os.path.join(folder, "vocab.npy"), np.array(self.vocab, np.int64))
        for name in ("wte", "wpe", "lnf_weight") + (("lnf_bias",) if self.bias else ()):
            _save_npy(os.path.join(folder, name + ".npy"), getattr(self, name))
        for l, w in enumerate(self.layers):
            w.save(os.path.join(folder, "round-%d" % (l + 1)))
        with open(os.path.join(folder, "lm.txt"), "w") as f:
            f.write(text)

    # ---- text

    def encode(self, text):
        """Token ids of text: a str (a bytes model reads it as latin-1) or bytes."""
        index = {c: k for k, c in enumerate(self.vocab)}
        if self.bytes:
            cps = list(text.encode("latin-1") if isinstance(text, str) else bytes(text))
        else:
            cps = [ord(c) for c in (text.decode("utf-8") if isinstance(text, bytes) else text)]
        missing = [c for c in cps if c not in index]
        if missing:
            what = ("byte 0x%02X" if self.bytes else "character U+%04X") % missing[0]
            raise Error("%s is not in the model's vocabulary of %d" % (what, self.V),
                        "invalid value")
        return np.array([index[c] for c in cps], np.int64)

    def decode(self, ids):
        cps = [self.vocab[int(k)] for k in ids]
        return bytes(cps).decode("latin-1") if self.bytes else "".join(map(chr, cps))

    # ---- compute

    def _graph(self, batch, pattern):
        return batch_graph(pattern or self.pattern, self.block, batch)

    def _tokens(self, ids):
        ids = np.ascontiguousarray(np.atleast_2d(ids), np.int64)
        if ids.ndim != 2 or ids.shape[1] != self.block:
            raise Error("ids has shape %s; expected [B, %d] (sequences of the block)"
                        % (list(np.shape(ids)), self.block), "invalid value")
        pos = np.ascontiguousarray(np.broadcast_to(np.arange(self.block), ids.shape), np.int64)
        return ids, pos

    def logits(self, ids, pattern=None):
        """[B, T, V] for sequences ids [B, T] (T the block), pattern within each."""
        ids, pos = self._tokens(ids)
        g = self._graph(ids.shape[0], pattern)
        out = np.empty(ids.shape + (self.V,), np.float32)
        e = err()
        check(lib.ag_lm_logits(C.byref(self._struct()), C.byref(g._nb), ids.ctypes.data,
                               pos.ctypes.data, out.ctypes.data, C.byref(e)), e)
        return out

    def loss(self, ids, targets, pattern=None):
        """The mean next-token cross-entropy of sequences ids [B, T] (targets
        [B, T]; -1: not counted)."""
        return _loss(self, ids, targets, pattern, None, None)

    def sample(self, tokens=500, start="\n", temperature=1.0, top_k=0, seed=1337, pattern=None):
        """start and `tokens` more characters (a str; bytes models: latin-1), drawn
        one at a time with the cache of keys and values (ag_lm_generate)."""
        for name, v in (("tokens", tokens), ("top_k", top_k), ("seed", seed)):
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise Error("%s is %r; expected an integer >= 0" % (name, v), "invalid value")
        prompt = self.encode(start)
        if len(prompt) == 0:
            raise Error("start is empty; expected at least one character", "invalid value")
        ids = np.zeros(len(prompt) + int(tokens), np.int64)
        ids[:len(prompt)] = prompt
        g = self._graph(1, pattern)
        e = err()
        check(lib.ag_lm_generate(C.byref(self._struct()), C.byref(g._nb), ids.ctypes.data, len(prompt),
                                 int(tokens), float(temperature), int(top_k), int(seed), None,
                                 None, C.byref(e)), e)
        return self.decode(ids)


def _loss(m, ids, targets, pattern, grads, opts, trainer=None):
    ids, pos = m._tokens(ids)
    targets = np.ascontiguousarray(targets, np.int64)
    if targets.shape != ids.shape:
        raise Error("targets has shape %s; expected %s" % (list(targets.shape),
                                                           list(ids.shape)), "invalid value")
    if trainer:
        g, tape = trainer._batch_graph(ids.shape[0]), C.byref(trainer._tape)
    else:
        g, tape = m._graph(ids.shape[0], pattern), None
    loss, e = C.c_double(), err()
    check(lib.ag_lm_loss(C.byref(m._struct()), C.byref(g._nb), ids.ctypes.data, pos.ctypes.data,
                         targets.ctypes.data, opts, C.byref(loss), grads, tape, C.byref(e)), e)
    return loss.value


class Trainer:
    """AdamW over a model's arrays in nanoGPT's groups (ag_lm_optimizer_add:
    matrices and embeddings decay; biases and LayerNorm do not), clipping by
    the global norm, dropout p: step() runs one batch's loss and gradients
    (ag_lm_loss) and updates the model's arrays in place (replace none of them
    while a Trainer holds the model). Its steps and loss() keep one batch
    graph and the library's tape across calls: after the first, a step
    allocates almost nothing and faults in no new pages."""

    def __init__(self, model, lr=1e-3, beta2=0.99, weight_decay=0.1, clip=1.0, dropout=0.0,
                 seed=1337, pattern=None):
        self.model, self.pattern, self.dropout, self.seed = model, pattern, float(dropout), seed
        self.steps = 0
        self._tape, self._graph, self._graph_batch = C.c_void_p(), None, None
        e = err()
        self._m, self._g = model._struct(), S.ag_lm_t()   # the optimizer keeps these pointers
        check(lib.ag_lm_grads_init(C.byref(self._g), C.byref(self._m), C.byref(e)), e)
        o = S.ag_optimizer_opts_t()
        lib.ag_optimizer_opts_init(C.byref(o), S.OPTIMIZERS["AG_OPT_ADAMW"])
        o.lr, o.beta2, o.weight_decay, o.clip = lr, beta2, weight_decay, clip
        self._opt = C.c_void_p()
        check(lib.ag_optimizer_init(C.byref(self._opt), C.byref(o), C.byref(e)), e)
        check(lib.ag_lm_optimizer_add(self._opt, C.byref(self._m), C.byref(self._g),
                                      C.byref(e)), e)

    def step(self, ids, targets, lr=None):
        """One optimizer step on sequences ids [B, T] and their next tokens;
        returns the loss before it."""
        e = err()
        if lr is not None:
            check(lib.ag_optimizer_set_lr(self._opt, float(lr), C.byref(e)), e)
        opts = S.ag_lm_opts_t(dropout=self.dropout, seed=(self.seed * 1000003 + self.steps)
                              % 2**64)
        loss = _loss(self.model, ids, targets, self.pattern, C.byref(self._g), C.byref(opts),
                     self)
        check(lib.ag_optimizer_step(self._opt, None, C.byref(e)), e)
        self.steps += 1
        return loss

    def loss(self, ids, targets):
        """The model's loss on a batch (no step, no dropout): GPT.loss on the
        trainer's graph and tape (an evaluation allocates nothing new)."""
        return _loss(self.model, ids, targets, self.pattern, None, None, self)

    def _batch_graph(self, batch):
        """The batch graph of `batch` sequences, kept while the batch size and
        the pattern stay; a new one frees the tape first (made on the old one)."""
        key = (batch, self.pattern or self.model.pattern)
        if self._graph_batch != key:
            self._free_tape()
            self._graph, self._graph_batch = self.model._graph(batch, self.pattern), key
        return self._graph

    def _free_tape(self):
        if getattr(self, "_tape", None):
            lib.ag_tape_free(self._tape)
            self._tape = C.c_void_p()

    def __del__(self):
        self._free_tape()
        if getattr(self, "_opt", None):
            lib.ag_optimizer_free(self._opt)
            self._opt = None
        if getattr(self, "_g", None) is not None:
            lib.ag_lm_destroy(C.byref(self._g))
            self._g = None
