"""A GPT (nanoGPT's; the library's ag_lm_t) from Python, on a text's characters,
on token ids (Tokens: nanoGPT's train.bin) or on example sets (Examples; the
recall tasks mqar() and copy_task() write them).

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

Token ids: lm.LM.init(8192, ...) (a vocabulary of ids, not characters);
Examples.read(DIR) reads what `attngraph lm task` writes, and
m.evaluate(x, y) gives the loss and the accuracy of the scored targets.

The folder is the one `attngraph lm train --save` writes and `lm sample` reads
(docs/lm.md): a model saved by either side runs on the other, and sample()
draws the tokens `lm sample` draws for the same seed (both ag_lm_generate).
"""
import ctypes as C
import os

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, c_free, Error
from .graph import Graph
from .weights import Weights

def batch_graph(spec, block, batch):
    """The graph of `batch` sequences of `block` tokens that `lm train --pattern
    spec` builds (ag_lm_graph): copies side by side of spec's graph over one
    sequence (docs:T&(spec), causal within it), so a random pattern draws its
    sources within the sequence, the same for every sequence and for sampling."""
    g, e = Graph._new("pattern"), err()
    check(lib.ag_lm_graph(C.byref(g._nb), int(block), int(batch), str(spec).encode(),
                          C.byref(e)), e)
    g._finish("keep", None)
    g.name = str(spec)
    return g


class _Graphs:
    """A graph a block of B sequences (ag_lm_graphs): spec one pattern for every
    block or 'A|B|...' one a block; `array` is the ag_nbhd_t *[L] the library
    reads, `first` block 1's graph."""

    def __init__(self, spec, layers, block, batch):
        self.L = int(layers)
        self.array = (C.c_void_p * self.L)()
        e = err()
        check(lib.ag_lm_graphs(self.array, self.L, int(block), int(batch), str(spec).encode(),
                               C.byref(e)), e)
        self.first = C.cast(C.c_void_p(self.array[0]), C.POINTER(S.ag_nbhd_t))

    def __del__(self):
        if getattr(self, "array", None) is not None:
            lib.ag_lm_graphs_free(self.array, self.L)
            self.array = None


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


def _owned(p, n):
    """A malloc'ed int64 [n] from the library as numpy (copied; p freed)."""
    try:
        return np.ctypeslib.as_array((C.c_int64 * int(n)).from_address(p.value)).copy()
    finally:
        c_free(p)


class Tokens(Text):
    """Streams of token ids, as `lm train --tokens` reads them (ag_lm_tokens_read):
    nanoGPT's uint16 train.bin (and val.bin), or 1-D integer .npy; one file is
    split 90/10. vocab: the ids' (0: the largest id + 1). batch() as Text's."""

    def __init__(self, ids, vocab, split=None):
        self.ids, self.vocab, self.bytes = np.asarray(ids, np.int64), int(vocab), False
        self.split = int(0.9 * len(self.ids)) if split is None else int(split)

    @classmethod
    def read(cls, train, val=None, vocab=0):
        parts = []
        for path in (train, val) if val is not None else (train,):
            p, n, e = C.c_void_p(), C.c_int64(), err()
            check(lib.ag_lm_tokens_read(C.byref(p), C.byref(n), os.fsencode(path), int(vocab),
                                        C.byref(e)), e)
            parts.append(_owned(p, n.value))
        ids = np.concatenate(parts)
        split = len(parts[0]) if val is not None else None
        return cls(ids, vocab or int(ids.max()) + 1, split)


class Examples:
    """Example sets, as `lm train --examples DIR` reads them (ag_lm_examples_read):
    train_inputs, train_targets, val_inputs, val_targets [n, T] (a target of
    -100 not scored: -1 here, the library's "not counted")."""

    def __init__(self, train_inputs, train_targets, val_inputs, val_targets, vocab):
        self.train = (np.asarray(train_inputs, np.int64), np.asarray(train_targets, np.int64))
        self.val = (np.asarray(val_inputs, np.int64), np.asarray(val_targets, np.int64))
        self.vocab = int(vocab)
        self.length = self.train[0].shape[1]

    @classmethod
    def read(cls, folder, vocab=0):
        sets = []
        for split in ("train", "val"):
            x, y, n, T, e = C.c_void_p(), C.c_void_p(), C.c_int64(), C.c_int64(), err()
            check(lib.ag_lm_examples_read(
                C.byref(x), C.byref(y), C.byref(n), C.byref(T),
                os.fsencode(os.path.join(folder, split + "_inputs.npy")),
                os.fsencode(os.path.join(folder, split + "_targets.npy")), int(vocab),
                C.byref(e)), e)
            shape = (n.value, T.value)
            sets += [_owned(x, n.value * T.value).reshape(shape),
                     _owned(y, n.value * T.value).reshape(shape)]
        if sets[0].shape[1] != sets[2].shape[1]:
            raise Error("%s: validation examples of %d tokens; expected %d, the training set's"
                        % (folder, sets[2].shape[1], sets[0].shape[1]), "invalid value")
        top = max(int(a.max()) for a in sets)
        return cls(*sets, vocab or top + 1)

    def batch(self, split, batch, rng):
        """x, y [batch, T]: random examples of a split ("train" or "val")."""
        x, y = self.train if split == "train" else self.val
        rows = rng.integers(0, len(x), batch)
        return x[rows], y[rows]


def _task(kind, vocab, length, n, first, seed, pairs=0, power=0.01, zero_fill=False):
    t = S.ag_lm_task_t(kind=S.TASKS[kind], vocab=int(vocab), length=int(length),
                       pairs=int(pairs), power=float(power), seed=int(seed),
                       zero_fill=int(bool(zero_fill)))
    shape = (int(n), int(length))
    x, y, d = (np.empty(shape, np.int64) for _ in range(3))
    e = err()
    check(lib.ag_lm_task_make(C.byref(t), int(first), int(n), x.ctypes.data, y.ctypes.data,
                              d.ctypes.data, C.byref(e)), e)
    y[y < 0] = -100   # PyTorch's ignore_index, as `lm task` writes them
    return x, y, d


def mqar(vocab, length, pairs, n, first=0, seed=1, power=0.01, zero_fill=False):
    """n examples of Zoology's multi-query associative recall (ag_lm_task_make;
    what `attngraph lm task mqar` writes): inputs, targets (-100: not scored)
    and distance [n, length], the distance of each scored position's key.
    zero_fill: 0 between the queries, not random tokens (`--fill zero`)."""
    return _task("AG_TASK_MQAR", vocab, length, n, first, seed, pairs, power, zero_fill)


def copy_task(vocab, length, n, first=0, seed=1):
    """n examples of the copy task: length/2 tokens, 0, the tokens again."""
    return _task("AG_TASK_COPY", vocab, length, n, first, seed)


POSITIONS = ("learnt", "rope", "none")


class LM:
    """A GPT: wte [V, D], wpe [T, D] (positions "learnt"; None with "rope",
    rotary positions on the queries and keys, or "none"), layers (Weights: pre-LayerNorm
    attention with wo and a residual, then a pre-LayerNorm 4D GELU sublayer unless the
    blocks are attention alone, init(mlp=False)), lnf_weight (lnf_bias)
    [D], the head tied to wte; float32 arrays the library reads in place.
    vocab: the token ids' code points (or bytes), or an int V: a model of token
    ids 0..V-1; pattern: the graph within a sequence it trained under (causal,
    window:8, ...)."""

    def __init__(self, wte, wpe, layers, lnf_weight, heads, vocab, lnf_bias=None, bytes=False,
                 pattern="causal", positions="learnt", block=None):
        if positions not in POSITIONS:
            raise Error("positions=%r; expected one of %s" % (positions, ", ".join(POSITIONS)),
                        "invalid value")
        if (wpe is None) != (positions != "learnt") or (wpe is None and block is None):
            raise Error("positions=%r with wpe %s; expected wpe [T, D] for learnt positions, "
                        "else None and the block" % (positions, "given" if wpe is not None
                                                     else "None"), "invalid value")
        self.positions = positions
        self.wte = np.ascontiguousarray(wte, np.float32)
        self.wpe = None if wpe is None else np.ascontiguousarray(wpe, np.float32)
        self._block = int(block) if wpe is None else self.wpe.shape[0]
        self.lnf_weight = np.ascontiguousarray(lnf_weight, np.float32)
        self.lnf_bias = None if lnf_bias is None else np.ascontiguousarray(lnf_bias, np.float32)
        self.layers, self.heads = list(layers), int(heads)
        self.ids = isinstance(vocab, (int, np.integer))
        self.vocab = int(vocab) if self.ids else list(vocab)
        self.bytes, self.pattern = bool(bytes), str(pattern)
        V, D = self.wte.shape
        n_vocab = self.vocab if self.ids else len(self.vocab)
        wpe_shape = None if self.wpe is None else list(self.wpe.shape)
        if n_vocab != V or (self.wpe is not None and (self.wpe.ndim != 2 or
                                                      self.wpe.shape[1] != D)):
            raise Error("wte %s, wpe %s and a vocabulary of %d; expected [V, D], [T, D] and V"
                        % (list(self.wte.shape), wpe_shape, n_vocab), "invalid value")
        self._struct()   # shapes checked now

    V = property(lambda self: self.wte.shape[0])
    D = property(lambda self: self.wte.shape[1])
    block = property(lambda self: self._block)
    bias = property(lambda self: self.lnf_bias is not None)

    def _struct(self):
        """An ag_lm_t pointing into the arrays (the layers' structs kept with it)."""
        layers = (S.ag_weights_t * len(self.layers))(*[w.c() for w in self.layers])
        m = S.ag_lm_t(V=self.V, T=self.block, D=self.D, L=len(self.layers), H=self.heads,
                         bias=int(self.bias), wte=self.wte.ctypes.data,
                         wpe=None if self.wpe is None else self.wpe.ctypes.data, layers=layers,
                         lnf_weight=self.lnf_weight.ctypes.data,
                         lnf_bias=self.lnf_bias.ctypes.data if self.bias else None,
                         positions=POSITIONS.index(self.positions))
        m._keep = layers
        return m

    @classmethod
    def init(cls, vocab, block, dim, layers, heads, bias=False, seed=1337, pattern="causal",
             positions="learnt", mlp=True):
        """GPT-2's initialisation from seed (ag_lm_init: `lm train --seed`'s model);
        positions "learnt", "rope" or "none" (ag_lm_set_positions); mlp=False:
        attention-only blocks (ag_lm_set_mlp, `lm train --no-mlp`)."""
        if positions not in POSITIONS:
            raise Error("positions=%r; expected one of %s" % (positions, ", ".join(POSITIONS)),
                        "invalid value")
        m, e = S.ag_lm_t(), err()
        V = int(vocab) if isinstance(vocab, (int, np.integer)) else len(vocab)
        check(lib.ag_lm_init(C.byref(m), V, block, dim, layers, heads, int(bias), seed,
                             C.byref(e)), e)
        try:
            check(lib.ag_lm_set_positions(C.byref(m), POSITIONS.index(positions), C.byref(e)), e)
            check(lib.ag_lm_set_mlp(C.byref(m), int(bool(mlp)), C.byref(e)), e)

            def arr(p, *shape):
                return None if not p else np.ctypeslib.as_array(
                    (C.c_float * int(np.prod(shape))).from_address(p)).reshape(shape).copy()
            blocks = [Weights._copy_c(m.layers[l]) for l in range(layers)]
            return cls(arr(m.wte, m.V, m.D), arr(m.wpe, m.T, m.D), blocks,
                       arr(m.lnf_weight, m.D), heads, vocab, arr(m.lnf_bias, m.D),
                       pattern=pattern, positions=positions, block=block)
        finally:
            lib.ag_lm_destroy(C.byref(m))

    # ---- the folder

    @classmethod
    def load(cls, folder):
        """A model folder (`lm train --save`'s, or save()'s; 0.2's with lm.txt too),
        every shape checked (ag_lm_model_load)."""
        lm, e = S.ag_lm_model_t(), err()
        check(lib.ag_lm_model_load(C.byref(lm), os.fsencode(folder), C.byref(e)), e)
        try:
            m = lm.m

            def arr(p, *shape):
                return None if not p else np.ctypeslib.as_array(
                    (C.c_float * int(np.prod(shape))).from_address(p)).reshape(shape).copy()
            blocks = [Weights._copy_c(m.layers[l]) for l in range(m.L)]
            vocab = int(m.V) if lm.ids else [lm.chars[k] for k in range(m.V)]
            return cls(arr(m.wte, m.V, m.D), arr(m.wpe, m.T, m.D), blocks,
                       arr(m.lnf_weight, m.D), m.H, vocab, arr(m.lnf_bias, m.D),
                       bytes=bool(lm.bytes), pattern=lm.pattern.decode(),
                       positions=POSITIONS[m.positions], block=m.T)
        finally:
            lib.ag_lm_model_destroy(C.byref(lm))

    def save(self, folder):
        """The folder `lm sample --model` reads (ag_lm_model_save): written whole
        or not at all, so that a failure leaves the old folder as it was."""
        pattern = self.pattern.encode()
        if len(pattern) >= 1024:
            raise Error("a pattern of %d bytes; model.txt keeps up to 1023" % len(pattern),
                        "invalid value")
        lm = S.ag_lm_model_t(m=self._struct(), bytes=int(self.bytes), ids=int(self.ids),
                             pattern=pattern)
        if not self.ids:
            chars = np.ascontiguousarray(self.vocab, np.int32)
            lm.chars = chars.ctypes.data_as(C.POINTER(C.c_int32))
        e = err()
        check(lib.ag_lm_model_save(C.byref(lm), os.fsencode(folder), C.byref(e)), e)

    # ---- text

    def encode(self, text):
        """Token ids of text: a str (a bytes model reads it as latin-1) or bytes;
        a model of ids takes ids (each below V)."""
        if self.ids:
            ids = np.asarray(text, np.int64).reshape(-1)
            if ids.size and (ids.min() < 0 or ids.max() >= self.V):
                raise Error("token ids %s; expected ids in 0..%d" % (ids.tolist()[:8], self.V - 1),
                            "invalid value")
            return ids
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
        if self.ids:
            return np.asarray(ids, np.int64)
        cps = [self.vocab[int(k)] for k in ids]
        return bytes(cps).decode("latin-1") if self.bytes else "".join(map(chr, cps))

    # ---- compute

    def _graph(self, batch, pattern):
        return _Graphs(pattern or self.pattern, len(self.layers), self.block, batch)

    def _tokens(self, ids):
        ids = np.ascontiguousarray(np.atleast_2d(ids), np.int64)
        if ids.ndim != 2 or ids.shape[1] != self.block:
            raise Error("ids has shape %s; expected [B, %d] (sequences of the block)"
                        % (list(np.shape(ids)), self.block), "invalid value")
        pos = np.ascontiguousarray(np.broadcast_to(np.arange(self.block), ids.shape), np.int64)
        return ids, pos

    def logits(self, ids, pattern=None):
        """[B, T, V] for sequences ids [B, T] (T the block), pattern within each
        (or 'A|B|...': one a block)."""
        ids, pos = self._tokens(ids)
        g = self._graph(ids.shape[0], pattern)
        out = np.empty(ids.shape + (self.V,), np.float32)
        e = err()
        check(lib.ag_lm_logits_layers(C.byref(self._struct()), g.array, ids.ctypes.data,
                                      pos.ctypes.data, out.ctypes.data, C.byref(e)), e)
        return out

    def loss(self, ids, targets, pattern=None):
        """The mean next-token cross-entropy of sequences ids [B, T] (targets
        [B, T]; -1 or -100: not counted)."""
        return _loss(self, ids, targets, pattern, None, None)

    def evaluate(self, ids, targets, pattern=None, predictions=False):
        """(loss, accuracy) of sequences ids [B, T]: accuracy the share of the
        counted targets (not -1 or -100) whose likeliest token is the target.
        predictions=True adds a third: the likeliest token at each counted
        position [B, T] (-100 elsewhere), as `lm train --predictions` writes."""
        correct, counted = C.c_int64(), C.c_int64()
        opts = S.ag_lm_opts_t(correct=C.addressof(correct), counted=C.addressof(counted))
        pred = np.full(np.shape(ids), -100, np.int64) if predictions else None
        if predictions:
            opts.predicted = pred.ctypes.data
        loss = _loss(self, ids, targets, pattern, None, opts)
        acc = correct.value / counted.value
        return (loss, acc, pred) if predictions else (loss, acc)

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
        check(lib.ag_lm_generate_layers(C.byref(self._struct()), g.array, ids.ctypes.data,
                                        len(prompt), int(tokens), float(temperature),
                                        int(top_k), int(seed), None, None, C.byref(e)), e)
        return self.decode(ids)


def _loss(m, ids, targets, pattern, grads, opts, trainer=None):
    ids, pos = m._tokens(ids)
    targets = np.array(targets, np.int64)
    targets[targets == -100] = -1   # PyTorch's ignore_index: the library's "not counted"
    if targets.shape != ids.shape:
        raise Error("targets has shape %s; expected %s" % (list(targets.shape),
                                                           list(ids.shape)), "invalid value")
    if trainer:
        g, tape = trainer._batch_graph(ids.shape[0]), C.byref(trainer._tape)
    else:
        g, tape = m._graph(ids.shape[0], pattern), None
    if opts is None:
        opts = S.ag_lm_opts_t()
    opts.graphs = C.cast(g.array, C.c_void_p)   # a graph a block (one pointer for all: one)
    loss, e = C.c_double(), err()
    check(lib.ag_lm_loss(C.byref(m._struct()), g.first, ids.ctypes.data, pos.ctypes.data,
                         targets.ctypes.data, C.byref(opts), C.byref(loss), grads, tape,
                         C.byref(e)), e)
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
        loss = _loss(self.model, ids, targets, self.pattern, C.byref(self._g), opts, self)
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
