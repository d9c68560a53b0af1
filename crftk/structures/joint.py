"""Composed models (Sutton & McCallum 2005): stages decoded jointly over the product of their labels.

A composition chains separately trained CRFs: stage i reads, in its fed column, the
label of stage i-1 at the same token. The composed model is a linear chain over the
cross product of the stages' label sets whose score is the sum of the stages' scores
(their eq. 7). When every template line of stage i reads the fed column at offset 0
only (the paper's f(s_{t-1}, s_t, s^{i-1}_t, x, t)), the sum factorizes: at each token
a table over (label of stage i-1, label of stage i), and each stage keeps its own
transition matrix. That is a product of chains coupled at every position, which
csrc/product.pxd decodes exactly with the factorized recursion (crftk._product).

- crftk.structures.composed.Composed: the structure a pipeline's model file names;
- :class:`FedLink`: the tables of one stage for every label its fed column may take;
- :func:`product_state`, :func:`product_viterbi`, :func:`product_marginals`,
  :func:`product_log_partition`, :func:`product_nbest`: exact inference over the product,
  from those tables.
"""

import numpy as np

from crftk import _pipeline, _product
from crftk.features.space import Positions
from crftk.structures.chain import chain_lattices

#: Most joint-state entries (tokens x joint labels) decoded at once: 64 MB of doubles.
MAX_JOINT_CELLS = 2**23


def fed_offsets(template, col):
    """{(row, anchored)} of the macros that read column ``col`` (directly or through a test)."""
    found = set()
    for line in template.lines:
        for m in line.macros:
            if m.col == col or (col == 0 and m.kind == "lex"):
                found.add((m.row, m.anchored))
    if col == 0 and template.anchored:
        found.add((None, True))        # first mentions are found by the words of column 0
    return found


def exact_link(template, col):
    """None when the template reads column ``col`` at offset 0 only, in U lines (the joint
    decoding is then exact); otherwise why not, for the log."""
    for line in template.bigrams:
        if any(m.col == col for m in line.macros):
            return f"transition line {line.text!r} reads it"
    offsets = fed_offsets(template, col)
    if any(anchored for _, anchored in offsets):
        return "a first-mention or lexicon test reads it"
    rows = sorted(row for row, _ in offsets if row != 0)
    if rows:
        return f"it is read at offset{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows))}"
    return None


def _dense_lines(space, weights, lines):
    """Per line, [attributes of the line + 1, labels]: the state weights of each attribute,
    and a last row of zeros for an attribute unseen in training (rank -1)."""
    L = space.n_labels
    out = []
    ptr, fl = space.feat_ptr, space.feat_label
    for cl in lines:
        table = np.zeros((cl.size + 1, L))
        lo, hi = int(ptr[cl.offset]), int(ptr[cl.offset + cl.size])
        attr = np.repeat(np.arange(cl.size), np.diff(ptr[cl.offset:cl.offset + cl.size + 1]))
        table[attr, fl[lo:hi]] = weights[lo:hi]
        out.append(table)
    return out


def fed_id(space, key, value):
    """The id of what single-valued source ``key`` of ``space`` reads when the fed column holds
    ``value`` (-1: none)."""
    vocab = space.vocabs[key]
    if value is not None and not isinstance(key, int):
        test = space.extractor.tests.get(key)
        value = None if test is None else test(value)
    return -1 if value is None else vocab.index.get(value, -1)


class FedLink:
    """The state tables of a stage for every value its fed column can take.

    ``values`` is the list of strings the upstream stage outputs. For a batch of
    sentences (rows in the stage's own layout), :meth:`tables` returns
    [tokens, len(values), labels]: the stage's log state potentials (start and end
    weights included) at each token if the fed column held each value there. Lines
    that do not read the fed column are encoded once; the lines that do are encoded
    once per value, the value set at every token.
    """

    def __init__(self, model, col, values):
        self.model = model
        self.space = space = model.space
        self.col = col
        self.values = list(values)
        fed = {k for k in space.extractor.keys if (k if isinstance(k, int) else k[1]) == col}
        self.fed_sources = fed
        self.fed_lines = [cl for cl in space.unigram_lines if any(m.source in fed for m in cl.line.macros)]
        self.dense = _dense_lines(space, model.weights, self.fed_lines)
        self.constant = [all(m.source in fed and m.row == 0 and not m.anchored and not m.multi
                             for m in cl.line.macros) for cl in self.fed_lines]
        self.pairs = [None if c else self._pair_index(cl) for cl, c in zip(self.fed_lines, self.constant)]
        vocab = space.vocabs[col]
        self.value_ids = [vocab.index.get(v, -1) for v in self.values]
        self.packed = self._pack()
        self._constant_rows = None      # built by the first tables_of (_constant)

    def _pack(self):
        """The pair lines concatenated for _pipeline.fed_table (uniq, uniq_off, ptr, ptr_off, value_of, row,
        dense) when every line that reads the fed column with another macro is a pair line; else None
        (tables_of then adds line by line, in the same order)."""
        pairs = [p for p, c in zip(self.pairs, self.constant) if not c]
        if any(p is None for p in pairs):
            return None
        i64 = np.int64
        dense = [d for d, c in zip(self.dense, self.constant) if not c]
        rows = np.cumsum([0] + [d.shape[0] for d in dense])
        entries = np.cumsum([0] + [p[2][-1] for p in pairs])
        uniq = np.concatenate([np.zeros(0, dtype=i64)] + [p[1].astype(i64) for p in pairs])
        ptr = np.concatenate([np.zeros(0, dtype=i64)] + [p[2] + e for p, e in zip(pairs, entries)])
        value_of = np.concatenate([np.zeros(0, dtype=i64)] + [p[3].astype(i64) for p in pairs])
        row = np.concatenate([np.zeros(0, dtype=i64)] + [p[4].astype(i64) + r for p, r in zip(pairs, rows)])
        off = lambda sizes: np.cumsum([0] + sizes).astype(i64)
        return ([p[0] for p in pairs], uniq, off([p[1].size for p in pairs]), ptr, off([p[2].size for p in pairs]),
                value_of, row, np.ascontiguousarray(np.concatenate([np.zeros((0, self.space.n_labels))] + dense)))

    def _pair_index(self, cl):
        """For a line of two single-valued macros, one reading the fed column: its attributes grouped
        by the value of the other macro, as (the other macro, sorted other values, CSR pointers,
        fed value index of each attribute, attribute rank). None for other lines."""
        macros = cl.line.macros
        if len(macros) != 2 or any(m.multi for m in macros):
            return None
        fed = [m.source in self.fed_sources for m in macros]
        if fed != [True, False] and fed != [False, True]:
            return None
        if not isinstance(macros[0 if fed[0] else 1].source, int):
            return None         # a test of the fed column can give two values one id
        radix = len(self.space.vocabs[macros[1].source])
        high, low = np.divmod(np.asarray(cl.keys, dtype=np.int64), radix)
        other, vid = (low, high) if fed[0] else (high, low)
        order = np.argsort(other, kind="stable")
        other, vid = other[order], vid[order]
        uniq, starts = np.unique(other, return_index=True)
        ptr = np.append(starts, other.size).astype(np.int64)
        # the index of the upstream value each attribute's fed id stands for (-1: none)
        index = np.full(len(self.space.vocabs[macros[0 if fed[0] else 1].source]) + 1, -1, dtype=np.int64)
        key = macros[0 if fed[0] else 1].source
        for j, v in enumerate(self.values):
            vid_j = fed_id(self.space, key, v)
            if vid_j >= 0 and index[vid_j] < 0:
                index[vid_j] = j
        return macros[1 if fed[0] else 0], uniq, ptr, index[vid], order

    def _pair_hits(self, pair, values, pos):
        """(token, fed value index, attribute rank) of every attribute of the line that fires when
        the fed column holds that value: each token's other value finds the few fed values it was
        seen with in training. Sorted by token."""
        macro, uniq, ptr, value_of, rank = pair
        ids = self.space.macro_values(macro, values, pos)
        if uniq.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        at = np.minimum(np.searchsorted(uniq, ids), uniq.size - 1)
        tok = np.flatnonzero((ids >= 0) & (uniq[at] == ids))
        lo, hi = ptr[at[tok]], ptr[at[tok] + 1]
        counts = hi - lo
        entry = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        tok = np.repeat(tok, counts)
        j = value_of[entry]
        keep = np.flatnonzero(j >= 0)
        return tok[keep], j[keep], rank[entry[keep]]

    def _override(self, values, n, value):
        """values with every fed source set as if the fed column held ``value`` (None: no value)."""
        space = self.space
        single, multi = dict(values.single), dict(values.multi)
        for key in self.fed_sources:
            if key not in multi:
                single[key] = np.full(n, fed_id(self.space, key, value), dtype=np.int64)
                continue
            test = space.extractor.tests.get(key)
            result = None if value is None or test is None else test(value)
            ids = [] if result is None else [i for i in space.vocabs[key].ids(result).tolist() if i >= 0]
            ptr = np.arange(n + 1, dtype=np.int64) * len(ids)
            multi[key] = (ptr, np.tile(np.asarray(ids, dtype=np.int64), n))
        return type(values)(single, multi, values.anchor, values.lengths, values.labels, values.reals)

    def _tiled(self, values, n):
        """(values, positions) of one copy of the batch per fed value, copy j with the fed column
        holding value j: every line is then encoded for all the values at once. Single-valued
        sources only."""
        V = len(self.values)
        single = {k: np.tile(v, V) for k, v in values.single.items() if k not in self.fed_sources}
        for key in self.fed_sources:
            if key in values.multi:     # read by other lines (encoded value by value), not by these
                continue
            single[key] = np.repeat(np.array([fed_id(self.space, key, v) for v in self.values], dtype=np.int64), n)
        anchor = values.anchor
        if anchor is not None:
            shift = np.repeat(np.arange(V, dtype=np.int64) * n, n)
            anchor = np.where(np.tile(anchor, V) >= 0, np.tile(anchor, V) + shift, -1)
        lengths = np.tile(values.lengths, V)
        return type(values)(single, {}, anchor, lengths, None), Positions(lengths, anchor)

    def tables(self, sentences):
        """([tokens, values, labels] tables, the corpus of the lines that do not read the fed column)."""
        return self.tables_of(self.space.extractor.values(sentences))

    def _constant(self, values):
        """[values, labels]: the weights of the lines that read the fed column alone, a row per value
        (the same for every batch: built once)."""
        if self._constant_rows is None:
            space = self.space
            constant = np.zeros((len(self.values), space.n_labels))
            for cl, dense, is_constant in zip(self.fed_lines, self.dense, self.constant):
                if is_constant:
                    for j, value in enumerate(self.values):
                        _, rank = space.attribute_ranks(cl, self._override(values, 1, value), Positions([1]))
                        constant[j] += dense[rank[0]]
            self._constant_rows = constant
        return self._constant_rows

    def tables_of(self, values):
        """:meth:`tables` of the sentences' value ids (crftk.features.extract.Values)."""
        space = self.space
        n = int(values.lengths.sum())
        V, L = len(self.values), space.n_labels
        pos = Positions(values.lengths, values.anchor)
        corpus = space.encode_values(self._override(values, n, None), pos)
        base = chain_lattices(space, corpus).state_matrix(self.model.weights)
        constant = self._constant(values)
        if self.packed is not None and n:
            macros, *lines = self.packed
            ids = np.empty((len(macros), n), dtype=np.int64)
            for p, macro in enumerate(macros):
                ids[p] = self.space.macro_values(macro, values, pos)
            out = np.empty((n, V, L))
            _pipeline.fed_table(out, np.ascontiguousarray(base, dtype=np.float64), constant, ids, *lines)
            return out, corpus
        out = base[:, None, :] + constant[None, :, :]
        if n == 0:
            return out, corpus
        flat = out.reshape(-1, L)           # row t*V + j: token t, fed value j
        multi = set(values.multi)
        tiled = None
        # conjunctions with other columns: few (token, value) pairs have an attribute (most word
        # and tag pairs were never seen in training), so only those are touched
        for cl, dense, is_constant, pair in zip(self.fed_lines, self.dense, self.constant, self.pairs):
            if is_constant:
                continue
            if pair is not None:
                tok, j, rank = self._pair_hits(pair, values, pos)
                _product.add_rows(flat, tok * V + j, dense, rank)
                continue
            if any(m.source in multi or m.source in self.fed_sources and m.multi for m in cl.line.macros):
                for j, value in enumerate(self.values):
                    own, rank = space.attribute_ranks(cl, self._override(values, n, value), pos)
                    hit = np.flatnonzero(rank >= 0)
                    np.add.at(out[:, j], hit if own is None else own[hit], dense[rank[hit]])
                continue
            if tiled is None:
                tiled = self._tiled(values, n)
            _, rank = space.attribute_ranks(cl, *tiled)
            hit = np.flatnonzero(rank >= 0)         # index j*n + t: value j, token t
            _product.add_rows(flat, (hit % n) * V + hit // n, dense, rank[hit])
        return out, corpus


def transitions(model, corpus):
    """The log transition matrix of a chain stage: [L, L], or [N, L, L] (row t: into token t)
    when its transition lines (B lines with macros) fire somewhere."""
    space, w = model.space, model.weights
    lay = space.layout()
    L = space.n_labels
    trans = w[lay.trans].reshape(L, L)
    if not space.n_edge_attrs or corpus.eattrs.size == 0:
        return trans
    edge = w[lay.edge].reshape(space.n_edge_attrs, L, L)
    counts = np.diff(corpus.eattr_ptr)
    out = np.repeat(trans[None], corpus.n_tokens, axis=0)
    np.add.at(out, np.repeat(np.arange(corpus.n_tokens), counts), edge[corpus.eattrs])
    return out


def product_state(first, links):
    """Joint log state potentials [N, prod(sizes)] (chain 0 outermost): ``first`` [N, n0] is
    the first stage's table, ``links[i]`` [N, n_i, n_{i+1}] stage i+1's table given stage i."""
    state = first
    for link in links:
        # state [N, ..., n_i] + link [N, n_i, n_{i+1}] broadcast over the outer stages
        n = state.shape[0]
        outer = state.reshape(n, -1, link.shape[1])
        state = (outer[:, :, :, None] + link[:, None, :, :]).reshape(n, -1)
    return np.ascontiguousarray(state)


def sentence_groups(sent_ptr, n_states, docs=None):
    """Runs of whole sentences holding at most MAX_JOINT_CELLS joint-state entries (a longer
    sentence alone): the joint tables are built and decoded one run at a time. With ``docs``
    (the document of each sentence) runs start only where a document does, a document longer
    than the limit making a run of its own: first-mention tests read earlier sentences of the
    document, which must be encoded in the same run."""
    limit = max(1, MAX_JOINT_CELLS // max(1, n_states))
    lengths = np.diff(sent_ptr)
    if docs is None:
        units = [(s, s + 1, n) for s, n in enumerate(lengths.tolist())]
    else:
        starts = [0] + [s for s in range(1, lengths.size) if docs[s] != docs[s - 1]]
        ends = starts[1:] + [lengths.size]
        units = [(a, b, int(sent_ptr[b] - sent_ptr[a])) for a, b in zip(starts, ends)] if lengths.size else []
    groups, start, tokens = [], 0, 0
    for a, b, n in units:
        if a > start and tokens + n > limit:
            groups.append((start, a))
            start, tokens = a, 0
        tokens += n
    if lengths.size:
        groups.append((start, lengths.size))
    return groups


def product_viterbi(sizes, sent_ptr, state, trans, n_threads=1):
    """(labels [C, N] of each stage, best joint score per sentence)."""
    joint, score = _product.viterbi(sizes, sent_ptr, state, trans, n_threads)
    return np.stack(np.unravel_index(joint, sizes)).astype(np.int64), score


def product_marginals(sizes, sent_ptr, state, trans, n_threads=1):
    """(per stage node marginals [N, n_c], log Z per sentence)."""
    logz, node, _ = _product.forward_backward(sizes, sent_ptr, state, trans, n_threads, edges=False)
    full = node.reshape((node.shape[0],) + tuple(int(n) for n in sizes))
    C = len(sizes)
    marg = [full.sum(axis=tuple(a for a in range(1, C + 1) if a != c + 1)) for c in range(C)]
    return marg, logz


def product_log_partition(sizes, sent_ptr, state, trans, n_threads=1):
    """log Z per sentence, as product_marginals gives it (its forward pass alone)."""
    return _product.log_partition(sizes, sent_ptr, state, trans, n_threads)


def product_nbest(sizes, sent_ptr, state, trans, k, n_threads=1):
    """(labels [k, C, N] of the k best joint labelings, their scores [sentences, k], counts)."""
    paths, scores, counts = _product.nbest(sizes, sent_ptr, state, trans, k, n_threads)
    labels = np.stack(np.unravel_index(paths, sizes), axis=1).astype(np.int64)
    return labels, scores, counts
