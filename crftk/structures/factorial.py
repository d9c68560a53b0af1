"""Factorial CRFs (Sutton, Rohanimanesh & McCallum 2004, eq. 4 and Fig. 1b).

C label chains over the same tokens, one per label column: each chain has its own
state features (the template's U lines), transitions (B lines) and start/end weights,
laid out as a linear chain's (features.layout.ChainLayout). Adjacent chains c and c+1 are
coupled at every token by a factor on their cotemporal label pair: its features are
(attribute, label pair) pairs of a :class:`PairSpace`, whose first attribute fires at
every token (the plain pair factor, every label pair) and whose other attributes come
from the template's ``P`` lines (the factor conditioned on observations; features for
the label pairs seen with them in training).

The parameter vector is the chains' vectors, then the pair spaces' feature weights. A
model file names the structure ``factorial`` and holds one part per chain
(``chain0``, ``chain1``, ...) and one per pair space (``pair0`` between chain 0 and 1, ...).
Inference over the grid is in csrc/factorial.pyx (crftk._factorial).
"""

import copy

import numpy as np

from crftk import _factorial, params
from crftk.errors import CrftkError, UsageError, shown
from crftk.features.templates import parse_template
from crftk.structures.base import Inference, Structure
from crftk.structures.chain import (Chain, ChainInference, StateFeatures, dump_weights, refuse_negative_values,
                                   token_values)
from crftk.structures.pairs import SEP

#: the product kernel's limit
MAX_CHAINS = 8
#: inference methods a factorial CRF trains and decodes with
INFERENCE = ("exact", "trp", "bp")


def pair_template(template):
    """The template's P lines as U lines of a template of their own, after a first line
    without macros (the attribute of the plain pair factor); its lexicons declared again."""
    lines = [ln for ln in template.text.split("\n") if ln.strip().startswith("@")]
    lines.append("U")
    lines += ["U" + tl.text[1:] for tl in template.pairs]
    return parse_template("\n".join(lines) + "\n", template.path)


def label_columns(cols, n_columns, path=None, line=None):
    """The label columns as distinct column numbers of data of n_columns columns."""
    out = []
    for col in cols:
        c = col + n_columns if col < 0 else col
        if not 0 <= c < n_columns:
            raise CrftkError(f"label column {col} does not exist in data of {n_columns} columns", path, line)
        if c in out:
            raise UsageError(f"--label-col {col} names column {c} twice")
        out.append(c)
    if len(out) > MAX_CHAINS:
        raise UsageError(f"a factorial CRF has at most {MAX_CHAINS} chains (label columns), not {len(out)}")
    if n_columns <= len(out):
        raise CrftkError(f"the data has {n_columns} columns: no input column beside the {len(out)} label columns",
                         path, line)
    return out


def check_template(template, n_columns, label_cols, data_path=None):
    """Refuse a template line that reads a missing column or a label column (any chain's)."""
    for line in template.lines + template.pairs:
        for m in line.macros:
            if m.col >= n_columns:
                raise CrftkError(f"template reads column {m.col} but the data "
                                 f"{('in ' + str(data_path) + ' ') if data_path else ''}has {n_columns} "
                                 f"columns (numbered from 0)", template.path, line.lineno)
            if m.col in label_cols:
                raise CrftkError(f"template reads column {m.col}, the gold label column of chain "
                                 f"{label_cols.index(m.col) + 1}; features must not see the answer",
                                 template.path, line.lineno)


def fit_spaces(sentences, template, label_cols, *, min_freq=1, feature_set="supported", path=None):
    """(chain spaces, pair spaces, FactorialCorpus) of training sentences (a list)."""
    from crftk.features.space import FeatureSpace, PairSpace
    if not sentences:
        raise CrftkError("no training sentences", path)
    n_columns = len(sentences[0].rows[0])
    cols = label_columns(label_cols, n_columns, path, sentences[0].line)
    check_template(template, n_columns, cols, path)
    chains, corpora = [], []
    for col in cols:
        space, corpus = FeatureSpace.fit(sentences, template, label_col=col, min_freq=min_freq,
                                         feature_set=feature_set, path=path)
        chains.append(space)
        corpora.append(corpus)
    gold = np.stack([c.labels for c in corpora]).astype(np.int32)
    ptmpl = pair_template(template)
    pairs, pcorpora = [], []
    for c in range(len(cols) - 1):
        pspace, pcorpus = PairSpace.fit(sentences, ptmpl, label_col=cols[c], min_freq=min_freq,
                                        feature_set="supported", path=path)
        a, b = chains[c].labels, chains[c + 1].labels
        names = [f"{x}{SEP}{y}" for x in a for y in b]
        if len(set(names)) != len(names):
            raise CrftkError(f"the labels of chains {c + 1} and {c + 2} hold {SEP!r} so that two label "
                             f"pairs share a name", path)
        L = len(names)
        pair_gold = gold[c].astype(np.int64) * len(b) + gold[c + 1]
        counts = np.diff(pcorpus.attr_ptr)
        keys = pcorpus.attrs.astype(np.int64) * L + np.repeat(pair_gold, counts)
        keys = np.union1d(keys, np.arange(L, dtype=np.int64))     # attribute 0: every label pair
        pspace.labels = names
        pspace.label_index = {s: i for i, s in enumerate(names)}
        pspace.feat_label = (keys % L).astype(np.int32)
        pspace.feat_ptr = np.zeros(pspace.n_attrs + 1, dtype=np.int32)
        np.cumsum(np.bincount(keys // L, minlength=pspace.n_attrs), out=pspace.feat_ptr[1:])
        pcorpus.labels = None
        pairs.append(pspace)
        pcorpora.append(pcorpus)
    return chains, pairs, FactorialCorpus(corpora, pcorpora, gold)


class FactorialCorpus:
    """Sentences encoded once per chain space and once per pair space; gold [C, N] or None."""

    def __init__(self, chains, pairs, labels):
        self.chains = chains
        self.pairs = pairs
        self.labels = labels
        self.sent_ptr = chains[0].sent_ptr
        self.n_sentences = chains[0].n_sentences
        self.n_tokens = chains[0].n_tokens

    def sentence_slices(self):
        return self.chains[0].sentence_slices()

    def position(self, token):
        return self.chains[0].position(token)

    def subset(self, sentences):
        """The given sentences (ids in increasing order) as a FactorialCorpus of their own."""
        labels = None if self.labels is None else self.labels[:, self.chains[0].tokens_of(sentences)]
        return FactorialCorpus([c.subset(sentences) for c in self.chains], [p.subset(sentences) for p in self.pairs],
                               labels)


def _encode(space, sentences):
    """A space's encoding of sentences that may lack the label columns (gold left out)."""
    from crftk.features.space import Positions
    values = space.extractor.values(sentences, None)
    return space.encode_values(values, Positions(values.lengths, values.anchor))


class Factorial(Structure):
    """A factorial CRF: chains[c] the feature space of chain c, pairs[c] the pair space
    between chain c and c+1."""

    name = "factorial"
    file_kinds = {"factorial": ("a factorial CRF", "crftk.FactorialCRF.load")}

    def __init__(self, chains, pairs=()):
        super().__init__(chains[0])
        self.chains = list(chains)
        self.pairs = list(pairs)
        if len(self.pairs) != len(self.chains) - 1:
            raise CrftkError(f"a factorial model of {len(self.chains)} chains needs {len(self.chains) - 1} "
                             f"pair parts, not {len(self.pairs)}")
        for c, p in enumerate(self.pairs):
            if p.n_labels != self.chains[c].n_labels * self.chains[c + 1].n_labels:
                raise CrftkError(f"pair part {c} does not have a label per pair of chain {c + 1} and "
                                 f"{c + 2}'s labels")
        sizes = [s.n_params for s in self.chains] + [p.n_params for p in self.pairs]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @staticmethod
    def part_space(name):
        """The feature-space class of a model part of this name."""
        from crftk.features.space import FeatureSpace, PairSpace
        return PairSpace if name.startswith("pair") else FeatureSpace

    @classmethod
    def from_parts(cls, parts):
        chains = [p.space for p in parts if p.name.startswith("chain")]
        pairs = [p.space for p in parts if p.name.startswith("pair")]
        names = [p.name for p in parts]
        expect = [f"chain{c}" for c in range(len(chains))] + [f"pair{c}" for c in range(len(pairs))]
        if names != expect or not chains:
            raise CrftkError(f"a factorial model's parts are chain0, chain1, ..., pair0, ...; found "
                             f"{', '.join(map(shown, names))}")
        for s in chains[1:] + pairs:
            if s.n_columns != chains[0].n_columns:
                raise CrftkError("the parts of a factorial model disagree on the column count")
        cols = [s.label_col for s in chains]
        if len(set(cols)) != len(cols):
            raise CrftkError(f"its chains share a label column ({', '.join(map(str, cols))})")
        for c, p in enumerate(pairs):
            if p.label_col != cols[c]:
                raise CrftkError(f"pair part {c} reads label column {p.label_col}, chain {c + 1} column {cols[c]}")
        for s in chains + pairs:        # as check_template refuses at training
            read = sorted({m.col for m in s.template.macros} & set(cols))
            if read:
                raise CrftkError(f"a template reads column {read[0]}, a label column")
        return cls(chains, pairs)

    @classmethod
    def describe(cls, parts, info):
        chains = sum(p.name.startswith("chain") for p in parts)
        return f"a factorial CRF ({chains} chains)"

    @classmethod
    def check_file(cls, parts, info, path):
        """The parts make one factorial structure; the record's inference options are valid."""
        super().check_file(parts, info, path)
        try:
            cls.from_parts(parts)
        except CrftkError as e:
            raise CrftkError(f"model file is inconsistent: {e.message}", path) from None
        _check_record(info, path)

    @classmethod
    def summary(cls, model):
        return summary(model)

    @classmethod
    def dump(cls, model, out, min_abs=0.0):
        dump(model, out, min_abs)

    @property
    def label_cols(self):
        return [s.label_col for s in self.chains]

    @property
    def n_chains(self):
        return len(self.chains)

    @property
    def n_params(self):
        return int(self.offsets[-1])

    @property
    def output_labels(self):
        return [s.labels for s in self.chains]

    def split(self, w):
        """The weight vector cut into the parts' vectors (views), chains then pairs."""
        return [w[self.offsets[i]:self.offsets[i + 1]] for i in range(len(self.offsets) - 1)]

    def fixed(self, template):
        fixed = np.zeros(self.n_params, dtype=bool)
        if not template.label_bigram:
            for c, s in enumerate(self.chains):
                lay = s.layout()
                fixed[self.offsets[c] + lay.trans.start:self.offsets[c] + lay.trans.stop] = True
        return fixed

    def pinned(self, scheme):
        if scheme != "none":
            raise UsageError("--constraints is for linear chains; a factorial CRF takes none")
        return None

    def meta(self):
        return {"name": self.name, "chains": len(self.chains)}

    def input_columns(self, n):
        """True when rows of n columns carry the gold labels, False when they lack them (the label
        columns being the last ones); else raise."""
        full = self.space.n_columns
        if n == full:
            return True
        cols = sorted(self.label_cols)
        trailing = cols == list(range(full - len(cols), full))
        if trailing and n == full - len(cols):
            return False
        expect = f"{full}" + (f" (or {full - len(cols)} without the labels)" if trailing else "")
        raise CrftkError(f"the model expects {expect} columns, found {n}")

    def encode(self, sentences):
        """A FactorialCorpus of sentences (gold labels kept when the rows have them; a gold label
        the model does not have is -1)."""
        if not sentences:
            raise CrftkError("no sentences to encode")
        has_gold = self.input_columns(len(sentences[0].rows[0]))
        chains = self._chain_encodings(lambda s: _encode(s, sentences))
        pairs = [_encode(p, sentences) for p in self.pairs]
        labels = None
        if has_gold:
            labels = np.stack([
                np.fromiter((s.label_index.get(row[s.label_col], -1) for sent in sentences for row in sent.rows),
                            dtype=np.int32, count=chains[0].n_tokens) for s in self.chains])
        return FactorialCorpus(chains, pairs, labels)

    def raw_encodable(self):
        """Whether :meth:`encode_raw` can encode batches (every space it encodes with is raw_readable;
        a chain that encodes like an earlier one is not asked: its tables would be the same)."""
        like = self._like()
        return all(s.raw_readable() for c, s in enumerate(self.chains) if like[c] == c) and \
            all(p.raw_readable() for p in self.pairs)

    def encode_raw(self, batch):
        """A FactorialCorpus of a crftk.io.conll.RawBatch, encoded in compiled code (gold left
        out); needs :meth:`raw_encodable`."""
        return FactorialCorpus(self._chain_encodings(lambda s: s.encode_raw(batch)),
                               [p.encode_raw(batch) for p in self.pairs], None)

    def _like(self):
        """Per chain, the first chain that encodes like it (itself, when none before does)."""
        like = getattr(self, "_encodes_like", None)
        if like is None:
            like = self._encodes_like = [next(k for k in range(c + 1) if self.chains[k].encodes_like(s))
                                         for c, s in enumerate(self.chains)]
        return like

    def _chain_encodings(self, encode):
        """Each chain's encoding, ``encode(space)``: a chain that encodes like an earlier one (one
        template fitted on the same sentences: the usual case) shares its arrays instead of
        encoding again."""
        like = self._like()
        out = []
        for c, s in enumerate(self.chains):
            if like[c] == c:
                out.append(encode(s))
            else:
                out.append(copy.copy(out[like[c]]))
        return out

    def bind(self, corpus, n_threads=1, inference="exact", tolerance=1e-3, max_sweeps=100, warm_start=False):
        return FactorialInference(self, corpus, n_threads, inference, tolerance, max_sweeps, warm_start)


class FactorialInference(Inference):
    """Inference of a factorial CRF over a FactorialCorpus (crftk._factorial).

    warm_start (``--inference trp`` only): each loglik starts every sentence's message passing
    from the messages the previous loglik converged to, instead of uniform ones (a float32
    state of 2 * (n_2 + ... + n_C) floats per token, n_c chain c's label count); marginals
    and best (max-product) start from uniform messages as without it."""

    def __init__(self, structure, corpus, n_threads=1, inference="exact", tolerance=1e-3, max_sweeps=100,
                 warm_start=False):
        super().__init__(structure, corpus, n_threads)
        if inference not in INFERENCE:
            raise CrftkError(f"unknown inference {shown(inference)}: choose {', '.join(INFERENCE)}")
        if warm_start and inference != "trp":
            raise CrftkError(f"warm starts are for --inference trp, not {shown(inference)}")
        if inference != "exact":
            edges = [c + 1 for c, s in enumerate(structure.chains) if s.n_edge_attrs]
            if edges:
                raise CrftkError(f"--inference {inference} passes messages over shared transition matrices: "
                                 f"chain {edges[0]}'s template has B lines with macros (use --inference exact)")
        self.method = inference
        self.tolerance = tolerance
        self.max_sweeps = max_sweeps
        self.warm_start = bool(warm_start)
        st = structure
        off = st.offsets
        chains = []
        for c, (s, enc) in enumerate(zip(st.chains, corpus.chains)):
            chains.append((enc.attr_ptr, enc.attrs, enc.eattr_ptr, enc.eattrs, s.feat_ptr, s.feat_label,
                           s.n_labels, s.n_edge_attrs, int(off[c])))
        pairs = []
        C = st.n_chains
        for c, (p, enc) in enumerate(zip(st.pairs, corpus.pairs)):
            pairs.append((enc.attr_ptr, enc.attrs, p.feat_ptr, p.feat_label, int(off[C + c])))
        values = [enc.values for enc in list(corpus.chains) + list(corpus.pairs)]
        self.grids = _factorial.Grids(corpus.sent_ptr, chains, pairs, st.n_params, inference, tolerance,
                                      max_sweeps, self.warm_start,
                                      values=None if all(v is None for v in values) else values)

    @property
    def last_stats(self):
        """Of the last pass: (sentences whose messages converged, mean sweeps); exact: all, 1."""
        return self.grids.last_stats or (0, 0.0)

    def loglik(self, w, labels, curvature=None):
        if curvature is not None:
            raise CrftkError("a factorial CRF does not compute curvature")
        return self.grids.loglik(np.ascontiguousarray(w, dtype=np.float64), labels, self.n_threads)

    def best(self, w):
        """(labels [C, N], best joint score per sentence)."""
        return self.grids.viterbi(np.ascontiguousarray(w, dtype=np.float64), self.n_threads)

    def marginals(self, w):
        """([node marginals [N, n_c]], [pair marginals [N, n_c, n_c+1]], log Z per sentence)."""
        return self.grids.marginals(np.ascontiguousarray(w, dtype=np.float64), self.n_threads)

    #: the curvature is not a by-product of loglik's pass: pcg asks :meth:`variance`
    curvature_in_pass = False

    def variance(self, w, expected):
        """Sha & Pereira's diagonal Hessian approximation at w, from the marginals: p(1-p) summed
        over the tokens where each state or pair feature fires (and over first and last tokens for
        the start and end weights); ``expected`` (the expected counts) for the transitions."""
        nodes, pairs, _ = self.marginals(w)
        st, corpus = self.structure, self.corpus
        h = np.array(expected, dtype=np.float64, copy=True)
        for c, (s, enc) in enumerate(zip(st.chains, corpus.chains)):
            state_variance(s, enc, nodes[c] * (1.0 - nodes[c]), h[st.offsets[c]:st.offsets[c + 1]])
        C = st.n_chains
        for c, (p, enc) in enumerate(zip(st.pairs, corpus.pairs)):
            q = pairs[c].reshape(corpus.n_tokens, -1)
            h[st.offsets[C + c]:st.offsets[C + c + 1]] = _feature_sums(p, enc, q * (1.0 - q))
        return h

    def counts(self, labels):
        """Feature counts of a joint labeling [C, N], laid out like the parameters: each chain's as a
        linear chain's, each pair factor's from the label pairs of its two chains."""
        st, corpus = self.structure, self.corpus
        labels = np.asarray(labels, dtype=np.int64)
        out = [Chain(s).bind(enc).counts(labels[c]) for c, (s, enc) in enumerate(zip(st.chains, corpus.chains))]
        for c, (p, enc) in enumerate(zip(st.pairs, corpus.pairs)):
            pair = labels[c] * st.chains[c + 1].n_labels + labels[c + 1]
            out.append(_state_counts(p, enc, pair))
        return np.concatenate(out)

    def max_active(self):
        """Most features that can fire on one sentence's joint labeling (GIS's constant C); with
        values, the largest total of the feature values of one."""
        for enc in list(self.corpus.chains) + list(self.corpus.pairs):
            refuse_negative_values(enc)
        per_sentence = sum(np.add.reduceat(token_values(enc), enc.sent_ptr[:-1]).astype(np.float64)
                           for enc in self.corpus.pairs)
        for s, enc in zip(self.structure.chains, self.corpus.chains):
            inf = Chain(s).bind(enc)
            per_sentence = per_sentence + inf.sentence_active()
        return float(np.max(per_sentence))


def state_variance(space, corpus, v, part):
    """Fill a chain's state, start and end entries of ``part`` (its slice of the curvature) with
    ``v`` (p(1-p) of its node marginals [N, labels]) summed where each fires."""
    sp = corpus.sent_ptr
    first, last = sp[:-1][np.diff(sp) > 0], sp[1:][np.diff(sp) > 0] - 1
    lay = space.layout()
    part[lay.state] = _feature_sums(space, corpus, v)
    part[lay.start] = v[first].sum(axis=0)
    part[lay.end] = v[last].sum(axis=0)


def _feature_sums(space, corpus, values):
    """Per (attribute, label) feature of a space, ``values[t, label]`` summed over the tokens t where
    its attribute fires, each time times the square of its occurrence's value (the curvature's)."""
    from scipy.sparse import csr_matrix
    n_tokens = corpus.attr_ptr.size - 1
    weight = np.ones(corpus.attrs.size) if corpus.values is None else corpus.values ** 2
    incidence = csr_matrix((weight, np.asarray(corpus.attrs, dtype=np.int64),
                            np.asarray(corpus.attr_ptr, dtype=np.int64)), shape=(n_tokens, space.n_attrs))
    per_attr = np.asarray(incidence.T @ values)
    attr_of_feat = np.repeat(np.arange(space.n_attrs), np.diff(space.feat_ptr))
    return per_attr[attr_of_feat, np.asarray(space.feat_label, dtype=np.int64)]


def _state_counts(space, corpus, labels):
    """Counts of a space's (attribute, label) features on a labeling: its parameters are those alone."""
    if not space.n_features:
        return np.zeros(0)
    fired = np.asarray(corpus.attrs, dtype=np.int64) * space.n_labels + np.repeat(labels, np.diff(corpus.attr_ptr))
    f, hit = StateFeatures(space, ChainInference.TABLE_LIMIT)(fired)
    weights = None if corpus.values is None else corpus.values[hit]
    return np.bincount(f[hit], weights=weights, minlength=space.n_features).astype(np.float64)


def _check_record(info, path):
    """The inference options a factorial model was trained with, which tagging takes by default."""
    record = info.get("factorial", {})
    if not isinstance(record, dict):
        raise CrftkError("model file is inconsistent: its factorial record is not an object", path)
    for option in (params.INFERENCE, params.TOLERANCE, params.MAX_SWEEPS_PARAM):
        value = record.get(option.name)
        if value is not None:
            try:
                option.check(value)
            except CrftkError:
                raise CrftkError(f"model file is inconsistent: its training record's {option.name} "
                                 f"{shown(value)} is not a valid {option.name}", path) from None


def summary(model):
    """``crftk info`` of a factorial model: the structure, each chain's and each pair's sizes."""
    st = model.structure
    chains = {}
    for c, (s, part) in enumerate(zip(st.chains, model.parts)):
        chains[f"chain{c}"] = {"label_column": s.label_col, "labels": s.labels, "n_labels": s.n_labels,
                               "attributes": s.n_attrs, "edge_attributes": s.n_edge_attrs,
                               "state_features": s.n_features, "parameters": s.n_params,
                               "nonzero_parameters": int(np.count_nonzero(part.weights))}
    pairs = {}
    for c, (p, part) in enumerate(zip(st.pairs, model.parts[st.n_chains:])):
        pairs[f"pair{c}"] = {"chains": [c, c + 1], "label_pairs": p.n_labels,
                             "observation_templates": len(p.unigram_lines) - 1,
                             "attributes": p.n_attrs, "pair_features": p.n_features,
                             "nonzero_parameters": int(np.count_nonzero(part.weights))}
    s = st.space
    return {"structure": "factorial", "chains": st.n_chains, "label_columns": st.label_cols,
            "columns": s.n_columns,
            "templates": {"state": len(s.unigram_lines), "transition": len(s.bigram_lines),
                          "label_bigram": s.template.label_bigram, "pair": len(s.template.pairs)},
            "feature_set": s.feature_set, "parameters": st.n_params, "parts": {**chains, **pairs},
            "training": model.info}


def dump(model, out, min_abs=0.0):
    """The weights as text: each chain as a linear chain's dump (chain.dump_weights), then each
    pair factor's features."""
    st = model.structure
    out.write(f"# crftk factorial model: {st.n_chains} chains (label columns "
              f"{', '.join(map(str, st.label_cols))}), {st.n_params} parameters\n")
    for c, (s, part) in enumerate(zip(st.chains, model.parts)):
        out.write(f"\n[chain {c}] label column {s.label_col}\n")
        dump_weights(s, part.weights, out, min_abs)
    for c, (p, part) in enumerate(zip(st.pairs, model.parts[st.n_chains:])):
        out.write(f"\n[pair {c} {c + 1}] attribute\tlabel of chain {c}{SEP}label of chain {c + 1}\tweight\n")
        names = p.attribute_strings()
        names[0] = "(plain)"
        w, ptr, fl = part.weights, p.feat_ptr, p.feat_label
        for a, name in enumerate(names):
            for f in range(ptr[a], ptr[a + 1]):
                if abs(w[f]) > min_abs:
                    out.write(f"{name}\t{p.labels[fl[f]]}\t{w[f]:.6f}\n")
