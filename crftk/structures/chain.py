"""The first-order linear-chain CRF: inference by the Cython chain kernels (crftk._lattice).

Besides the kernels' passes (likelihood and gradient, Viterbi, marginals, n-best,
the online epochs), a ChainInference counts features: the weighted counts of
nodes (token, label) and edges (token, previous label, label) laid out like the
parameters (``weighted_counts``), of which the counts of a whole labeling are a
case, and the transition scores into tokens. MCE training and GIS use them.

``LabelChain`` is what the structures over one chain of labels (chain, pairs, memm) say
about their model files; ``ChainParts`` (``chain_summary``, ``chain_dump``) gives
``crftk info`` and ``crftk dump`` of a file whose parts are chain CRFs (theirs, a pipeline's).
"""

import numpy as np

from crftk._lattice import Lattices
from crftk.errors import CrftkError
from crftk.features.space import PackedIds
from crftk.structures.base import Inference, Structure


def chain_lattices(space, corpus):
    """The chain kernel (crftk._lattice.Lattices) over a corpus that ``space`` encoded, its weight
    vector laid out by ``space.layout()``."""
    attrs = np.asarray(corpus.attrs)        # a PackedIds (ChainInference.compact) unpacked
    return Lattices(corpus.sent_ptr, corpus.attr_ptr, attrs, corpus.eattr_ptr, corpus.eattrs,
                    space.feat_ptr, space.feat_label, space.n_labels, space.n_edge_attrs, space.layout().offsets(),
                    values=corpus.values)


def token_values(corpus):
    """Per token, the summed values of its state attribute occurrences (their number on a binary
    corpus): what its state features can add to a labeling's feature total."""
    counts = np.diff(corpus.attr_ptr)
    if corpus.values is None:
        return counts
    sums = np.zeros(counts.size)
    np.add.at(sums, np.repeat(np.arange(counts.size), counts), corpus.values)
    return sums


def refuse_negative_values(corpus):
    """GIS's bound needs features that are never negative: one line when a value is."""
    if corpus.values is not None and corpus.values.size and corpus.values.min() < 0:
        raise CrftkError(f"GIS needs non-negative feature values, and the training data has an attribute "
                         f"value of {corpus.values.min():g}; train with another --algorithm")


def ranges(starts, counts):
    """Concatenation of ``arange(s, s + c)`` over the pairs (s, c), as int64."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.repeat(np.asarray(starts, dtype=np.int64) - (ends - counts), counts) + np.arange(total)


def _holds_bag(info):
    return isinstance(info.get("bag"), dict)


class ChainParts:
    """``crftk info`` and ``crftk dump`` of a structure whose files' parts are chain CRFs (a
    CRF, a bag's members, a pipeline's stages)."""

    @classmethod
    def summary(cls, model):
        return chain_summary(model)

    @classmethod
    def dump(cls, model, out, min_abs=0.0):
        chain_dump(model, out, min_abs, cls.part_noun)


class LabelChain(ChainParts, Structure):
    """A structure over one chain of labels, what crftk train trains from one label column
    (crftk.model.CHAIN_STRUCTURES). Its file holds one CRF, or, for a first-order chain, a
    feature bag (crftk bag): two or more members, their weights in the record's "bag"."""

    file_kinds = {"crf": ("a CRF", "crftk.CRF.load"), "bag": ("a feature bag", "crftk.Bag.load")}
    part_noun = "member"
    #: a file of one model in words (describe), and the model a training record names
    noun = record_noun = None
    #: the training record's order and model type (crftk.model.chain_record)
    record = {"order": 1, "model_type": "crf"}
    #: whether a bag's members may be of this structure
    in_bags = False

    @classmethod
    def file_kind(cls, info):
        return "bag" if _holds_bag(info) else "crf"

    @classmethod
    def describe(cls, parts, info):
        return super().describe(parts, info) if _holds_bag(info) else cls.noun

    @classmethod
    def check_file(cls, parts, info, path):
        """One part; a bag two or more, each a first-order chain."""
        def bad(what):
            return CrftkError(f"model file is inconsistent: {what}", path)

        n = len(parts)
        if not _holds_bag(info):
            cls.refuse_bag_record(info, path)
            if n != 1:
                raise bad(f"a {cls.name} model has one part, this file has {n} (and no bag's record)")
        elif not cls.in_bags:
            raise bad(f"a bag of {cls.name} models (a bag holds first-order chain CRFs)")
        elif n < 2:
            raise bad(f"a bag needs at least two members, this one has {n}")

    @classmethod
    def check_space(cls, space, bad):
        """Refuse a feature space this structure cannot have: raise ``bad(what)``."""


class Chain(LabelChain):
    """A first-order linear-chain CRF over the feature space's labels."""

    name = "chain"
    noun, record_noun = "a CRF", "a first-order CRF"
    in_bags = True

    def bind(self, corpus, n_threads=1):
        return ChainInference(self, corpus, n_threads)


class StateFeatures:
    """A space's (attribute, label) state features by key ``attribute * L + label``: calling it
    with keys gives each one's feature index and whether the space has that feature. A dense table
    when attributes x labels is at most ``table_limit``, else a sorted search."""

    def __init__(self, space, table_limit):
        L, A, F = space.n_labels, space.n_attrs, space.n_features
        attr_of_feat = np.repeat(np.arange(A, dtype=np.int64), np.diff(space.feat_ptr))
        keys = attr_of_feat * L + np.asarray(space.feat_label, dtype=np.int64)
        if F == A * L and np.array_equal(keys, np.arange(F)):
            self.how = ("complete",)                 # complete feature set: f = key
        elif A * L <= table_limit:
            table = np.full(A * L, -1, dtype=np.int32 if F < 2**31 else np.int64)
            table[keys] = np.arange(F)
            self.how = ("table", table)
        else:
            order = np.argsort(keys, kind="stable")
            self.how = ("sorted", order, keys[order])

    def __call__(self, key):
        kind = self.how[0]
        if kind == "complete":
            return key, np.ones(key.size, dtype=bool)
        if kind == "table":
            f = self.how[1][key]
            return f, f >= 0
        order, keys = self.how[1], self.how[2]
        i = np.searchsorted(keys, key)
        np.minimum(i, keys.size - 1, out=i)
        return order[i], keys[i] == key


class ChainInference(Inference):
    # largest attributes x labels for a dense (attribute, label) -> feature table (4 bytes each)
    TABLE_LIMIT = 1 << 24
    # node lists longer than this are merged by (token, label) before counting
    MERGE_NODES = 1024

    def __init__(self, structure, corpus, n_threads=1):
        super().__init__(structure, corpus, n_threads)
        self.lattices = chain_lattices(self.space, corpus)
        self._features = None

    def compact(self):
        """Hold the corpus's state attribute ids in 3 bytes each (crftk._lattice.Lattices.
        pack_attributes; the corpus then reads them through a PackedIds): the kernels read the
        same ids, so every result is the same, and numpy code that reads corpus.attrs unpacks them.
        Returns whether they were packed (not when the ids exceed 3 bytes)."""
        packed = self.lattices.pack_attributes()        # its own bytes again when already packed
        if packed is None:
            return False
        self.corpus.attrs = PackedIds(packed)
        return True

    # -- the kernels -------------------------------------------------------
    def loglik(self, w, labels, curvature=None, allowed=None, entity=None):
        """Negative log-likelihood of the labeling and its gradient (curvature: see the kernel);
        labels -1 with ``allowed`` [N, states]: a partial annotation's marginal likelihood;
        ``entity`` [states]: also the expected count of those states and its gradient."""
        return self.lattices.loglik(w, labels, self.n_threads, curvature, allowed, entity)

    def best(self, w, allowed=None):
        return self.lattices.viterbi(w, self.n_threads, allowed)

    def marginals(self, w, allowed=None):
        return self.lattices.marginals(w, self.n_threads, allowed)

    def nbest(self, w, k, allowed=None):
        return self.lattices.nbest(w, k, self.n_threads, allowed)

    def perceptron_epoch(self, w, u, labels, order, c):
        return self.lattices.perceptron_epoch(w, u, labels, order, c)

    def sgd_epoch(self, v, a, labels, order, lam, t0_rate, t, learn_transitions):
        return self.lattices.sgd_epoch(v, a, labels, order, lam, t0_rate, t, learn_transitions)

    def pa_epoch(self, w, u, labels, order, c, pa_type, aggressiveness, error_sensitive, frozen):
        return self.lattices.pa_epoch(w, u, labels, order, c, pa_type, aggressiveness, error_sensitive, frozen)

    def arow_epoch(self, mean, variance, labels, order, gamma, frozen):
        return self.lattices.arow_epoch(mean, variance, labels, order, gamma, frozen)

    def state_matrix(self, w):
        return self.lattices.state_matrix(w)

    def max_scores(self, w):
        return self.lattices.viterbi_scores(w)

    def sequence_scores(self, w, labels):
        return self.lattices.sequence_scores(w, labels)

    # -- counting ----------------------------------------------------------
    def _state_features(self, key):
        """Parameter index of each (attribute * L + label) key, and where one exists."""
        if self._features is None:
            self._features = StateFeatures(self.space, self.TABLE_LIMIT)
        return self._features(key)

    def weighted_counts(self, node_tok, node_lab, node_w, edge_tok, edge_prev, edge_cur, edge_w):
        """Weighted feature counts laid out like the parameters.

        A node (t, y, m) adds m to every parameter that fires for label y at
        token t (state features, and the start/end weights at a sentence's
        first/last token); an edge (t, i, j, m) adds m to the transition i -> j
        into token t (the shared matrix and the blocks of t's edge attributes).
        """
        space, corpus, idx = self.space, self.corpus, self.index
        L, lay = space.n_labels, space.layout()
        attr_ptr = np.asarray(corpus.attr_ptr, dtype=np.int64)
        eattr_ptr = np.asarray(corpus.eattr_ptr, dtype=np.int64)
        out_idx, val = [], []
        node_tok = np.asarray(node_tok, dtype=np.int64)
        node_lab = np.asarray(node_lab, dtype=np.int64)
        node_w = np.asarray(node_w, dtype=np.float64)
        if node_tok.size > self.MERGE_NODES:
            # merge repeated nodes (and drop those that cancel) before the attribute expansion
            key, inv = np.unique(node_tok * L + node_lab, return_inverse=True)
            node_w = np.bincount(inv.ravel(), weights=node_w, minlength=key.size)
            keep = node_w != 0
            node_tok, node_lab, node_w = key[keep] // L, key[keep] % L, node_w[keep]
        if node_tok.size:
            cnt = attr_ptr[node_tok + 1] - attr_ptr[node_tok]
            occ = ranges(attr_ptr[node_tok], cnt)
            if occ.size and space.n_features:
                attrs = np.asarray(corpus.attrs, dtype=np.int64)[occ]
                f, hit = self._state_features(attrs * L + np.repeat(node_lab, cnt))
                out_idx.append(f[hit])
                amount = np.repeat(node_w, cnt)
                if corpus.values is not None:       # a feature counts its occurrence's value
                    amount = amount * corpus.values[occ]
                val.append(amount[hit])
            s = idx["first"][node_tok]
            out_idx.append(lay.start.start + node_lab[s])
            val.append(node_w[s])
            e = idx["last"][node_tok]
            out_idx.append(lay.end.start + node_lab[e])
            val.append(node_w[e])
        edge_tok = np.asarray(edge_tok, dtype=np.int64)
        if edge_tok.size:
            pair = np.asarray(edge_prev, dtype=np.int64) * L + np.asarray(edge_cur, dtype=np.int64)
            edge_w = np.asarray(edge_w, dtype=np.float64)
            out_idx.append(lay.trans.start + pair)
            val.append(edge_w)
            if space.n_edge_attrs:
                cnt = eattr_ptr[edge_tok + 1] - eattr_ptr[edge_tok]
                occ = ranges(eattr_ptr[edge_tok], cnt)
                eattrs = np.asarray(corpus.eattrs, dtype=np.int64)[occ]
                out_idx.append(lay.edge.start + eattrs * (L * L) + np.repeat(pair, cnt))
                val.append(np.repeat(edge_w, cnt))
        if not out_idx:
            return np.zeros(lay.n_params)
        return np.bincount(np.concatenate(out_idx), weights=np.concatenate(val), minlength=lay.n_params)

    def labeling_difference(self, bad, gold, tok_w):
        """Sum over tokens of tok_w[t] * (the counts of labeling ``bad`` - those of ``gold``) at t;
        only the tokens (and transitions) where the two differ are touched."""
        t = np.flatnonzero(bad != gold)
        inner = np.flatnonzero(~self.index["first"])
        e = inner[(bad[inner] != gold[inner]) | (bad[inner - 1] != gold[inner - 1])]
        wt, we = tok_w[t], tok_w[e]
        return self.weighted_counts(np.concatenate([t, t]), np.concatenate([bad[t], gold[t]]),
                                    np.concatenate([wt, -wt]),
                                    np.concatenate([e, e]), np.concatenate([bad[e - 1], gold[e - 1]]),
                                    np.concatenate([bad[e], gold[e]]), np.concatenate([we, -we]))

    def counts(self, labels):
        """Feature counts of a labeling of the corpus (one label id per token)."""
        y = np.asarray(labels).astype(np.int64)
        inner = np.flatnonzero(~self.index["first"])
        ones = np.ones(y.size)
        return self.weighted_counts(np.arange(y.size), y, ones, inner, y[inner - 1], y[inner], ones[inner])

    def sentence_active(self):
        """Per sentence, the most features that can fire on a labeling of it."""
        c = self.corpus
        per_token = token_values(c) + np.diff(c.eattr_ptr) + 1
        return np.add.reduceat(per_token, c.sent_ptr[:-1]) + 1     # + start, end, - first transition

    def max_active(self):
        """Most features that can fire on one sentence's labeling (GIS's constant C); with values,
        the largest total of the feature values of one."""
        refuse_negative_values(self.corpus)
        return float(self.sentence_active().max())

    # -- transition scores ---------------------------------------------------
    def transition_scores(self, w, tok, prev, cur):
        """Transition score prev -> cur into each token (shared matrix + edge blocks)."""
        space, corpus = self.space, self.corpus
        L, lay = space.n_labels, space.layout()
        pair = np.asarray(prev, dtype=np.int64) * L + cur
        out = w[lay.trans.start + pair]
        if space.n_edge_attrs and tok.size:
            eattr_ptr = np.asarray(corpus.eattr_ptr, dtype=np.int64)
            cnt = eattr_ptr[tok + 1] - eattr_ptr[tok]
            occ = ranges(eattr_ptr[tok], cnt)
            if occ.size:
                owner = np.repeat(np.arange(tok.size), cnt)
                eattrs = np.asarray(corpus.eattrs, dtype=np.int64)[occ]
                vals = w[lay.edge.start + eattrs * (L * L) + np.repeat(pair, cnt)]
                out = out + np.bincount(owner, weights=vals, minlength=tok.size)
        return out

    def transition_vectors(self, w, tok, lab, column):
        """Per node: the transition scores into token tok, column lab (i -> lab) or row lab (lab -> j)."""
        space, corpus = self.space, self.corpus
        lay = space.layout()
        base = lay.transitions(w)
        out = (base[:, lab].T if column else base[lab, :]).copy()
        if space.n_edge_attrs and tok.size:
            eattr_ptr = np.asarray(corpus.eattr_ptr, dtype=np.int64)
            cnt = eattr_ptr[tok + 1] - eattr_ptr[tok]
            occ = ranges(eattr_ptr[tok], cnt)
            if occ.size:
                blocks = lay.edge_blocks(w)
                e = np.asarray(corpus.eattrs, dtype=np.int64)[occ]
                lr = np.repeat(lab, cnt)
                vals = blocks[e, :, lr] if column else blocks[e, lr, :]
                nz = cnt > 0
                offsets = (np.cumsum(cnt) - cnt)[nz]
                out[nz] += np.add.reduceat(vals, offsets, axis=0)
        return out


# -- crftk info and crftk dump of chain CRFs -------------------------------------------------

def chain_summary(model):
    """``crftk info``'s summary of a model (crftk.model.Model) whose parts are chain CRFs: the
    first part's sizes, each part's when there are several."""
    s, w = model.space, model.weights
    lay = s.layout()
    extractor = getattr(s, "extractor", None)       # an AttributeSpace (no template) has none
    vectors = extractor.vectors if extractor is not None else {}
    return {
        "labels": s.labels,
        "n_labels": s.n_labels,
        "columns": s.n_columns,
        "label_column": s.label_col,
        "templates": {"state": len(s.unigram_lines), "transition": len(s.bigram_lines),
                      "label_bigram": s.template.label_bigram},
        "attributes": s.n_attrs,
        "edge_attributes": s.n_edge_attrs,
        "feature_set": s.feature_set,
        "state_features": s.n_features,
        "parameters": s.n_params,
        "nonzero_parameters": int(np.count_nonzero(w)),
        "nonzero_state_features": int(np.count_nonzero(w[lay["state"]])),
        **({"vectors": {name: {"words": len(v.words), "dimensions": v.dim, "dtype": "float32", "bytes": v.nbytes,
                               "lookup": v.lookup} for name, v in vectors.items()}}
           if vectors else {}),
        **({"parts": {p.name: {"attributes": p.space.n_attrs, "state_features": p.space.n_features,
                               "parameters": p.space.n_params} for p in model.parts}}
           if len(model.parts) > 1 else {}),
        **({"schemes": {"trained_as": model.info["train_scheme"], "corpus": model.info["corpus_scheme"]}}
           if "train_scheme" in model.info else {}),
        "training": model.info,
    }


def chain_dump(model, out, min_abs=0.0, part_noun="part"):
    """``crftk dump`` of a model whose parts are chain CRFs: its one part's weights, or each
    part's in turn under a ``[part_noun i] name`` line (a bag's members, a pipeline's stages)."""
    if len(model.parts) == 1:
        dump_weights(model.space, model.weights, out, min_abs)
        return
    out.write(f"# crftk {model.describe()[2:]}\n")
    for i, part in enumerate(model.parts):
        out.write(f"\n[{part_noun} {i}] {part.name}\n")
        dump_weights(part.space, part.weights, out, min_abs)


def dump_weights(space, weights, out, min_abs=0.0):
    """One chain CRF's weights as text: transitions, then one line per state feature."""
    s, w = space, weights
    lay = s.layout()
    labels = s.labels
    L = s.n_labels
    out.write(f"# crftk model: {L} labels, {s.n_attrs} attributes, {s.n_features} state features\n")
    out.write("[labels]\n")
    for lab in labels:
        out.write(lab + "\n")
    out.write("\n[transitions] previous -> current: weight\n")
    trans = w[lay["trans"]].reshape(L, L)
    for i in range(L):
        for j in range(L):
            if abs(trans[i, j]) > min_abs or min_abs == 0:
                out.write(f"{labels[i]}\t{labels[j]}\t{trans[i, j]:.6f}\n")
    out.write("\n[start] label: weight\n")
    for j, v in enumerate(w[lay["start"]]):
        out.write(f"{labels[j]}\t{v:.6f}\n")
    out.write("\n[end] label: weight\n")
    for j, v in enumerate(w[lay["end"]]):
        out.write(f"{labels[j]}\t{v:.6f}\n")
    out.write("\n[state] attribute\tlabel\tweight\n")
    names = s.attribute_strings()
    ptr, fl = s.feat_ptr, s.feat_label
    for a, name in enumerate(names):
        for f in range(ptr[a], ptr[a + 1]):
            if abs(w[f]) > min_abs:
                out.write(f"{name}\t{labels[fl[f]]}\t{w[f]:.6f}\n")
    if s.n_edge_attrs:
        out.write("\n[edge] attribute\tprevious\tcurrent\tweight\n")
        edge = w[lay["edge"]].reshape(s.n_edge_attrs, L, L)
        for e, name in enumerate(s.attribute_strings(edge=True)):
            for i in range(L):
                for j in range(L):
                    if abs(edge[e, i, j]) > min_abs:
                        out.write(f"{name}\t{labels[i]}\t{labels[j]}\t{edge[e, i, j]:.6f}\n")
