"""The compiled beam of a pipeline's K-best joint and normalized decoding on a batch of bytes
(crftk.io.conll.RawBatch), the labels and scores of ``crftk.kinds.pipeline.Pipeline._joint_nbest``.

Each sentence keeps its K best partial labelings (stages 0..i) by summed score; stage i+1 extends
each by its K best labelings given it (the last stage: its best), scored by their Viterbi score or,
normalized, minus the stage's log Z given the fed labels. The first stage's K best come from
crftk._pipeline's n-best on its encoding; a later stage is scored for every hypothesis rank h at
once over the batch: through a joint.FedLink when it reads its fed column at offset 0 only (its
state table for every fed label, each hypothesis picking its rows; crftk._product's kernels), else
through :class:`FedLines` (the lines that do not read the fed column encoded once, the others per
hypothesis; crftk._pipeline's kernels). The candidates of a sentence are ordered by hypothesis then
option and sorted stably by descending score, as Python's sort orders them.
"""

import numpy as np

from crftk import _pipeline, _product
from crftk.features.space import Positions
from crftk.structures import joint

def _kernel(space, weights, sent_ptr, attr_ptr, attrs, eattr_ptr, eattrs, values=None):
    return _pipeline.Stage(weights, space.feat_ptr, space.feat_label, space.n_labels, space.n_edge_attrs,
                           space.layout().offsets(), sent_ptr, attr_ptr, attrs, eattr_ptr, eattrs, values)


class FedLines:
    """How a stage that reads its fed column at other offsets than 0 is scored per hypothesis: its
    state lines before the first that reads the fed column (summed once per batch), the later ones
    (per hypothesis), and the value id each fed source takes for each upstream label."""

    def __init__(self, model, fed_sources, fed_ids, first):
        self.model = model
        self.fed_sources = fed_sources
        self.fed_ids = fed_ids
        self.first = first
        # the offsets at which its lines read the fed column: a token's row can change only where
        # one of them reaches a token whose fed label changed
        lines = model.space.unigram_lines
        self.reach = sorted({m.row for cl in lines for m in cl.line.macros if m.source in fed_sources})

    @classmethod
    def of(cls, model, col, labels):
        """The FedLines of a stage reading column ``col`` filled with ``labels``; None when the
        compiled beam cannot score it (real values, multi-valued macros, transition lines reading
        the fed column)."""
        space = model.space
        if space.extractor.reals or any(m.multi or m.real for m in space.template.macros):
            return None
        fed = {k for k in space.extractor.keys if (k if isinstance(k, int) else k[1]) == col}
        if any(m.source in fed for cl in space.bigram_lines for m in cl.line.macros):
            return None
        reads = [any(m.source in fed for m in cl.line.macros) for cl in space.unigram_lines]
        if not any(reads):
            return None
        ids = {k: np.array([joint.fed_id(space, k, v) for v in labels], dtype=np.int64) for k in fed}
        return cls(model, fed, ids, reads.index(True))

    def scorer(self, batch):
        """The per-hypothesis scorer of a batch: fed label ids per token (the hypothesis of each
        sentence), active sentences, k, log Z? -> (paths [k, N], scores [S, k], counts, log Z)."""
        space, w = self.model.space, self.model.weights
        values = space.raw_values(batch)
        pos = Positions(values.lengths)
        n = pos.n_tokens
        lines = space.unigram_lines
        offsets = np.array([cl.offset for cl in lines], dtype=np.int64)
        ranks = [None] * len(lines)
        for j, cl in enumerate(lines):
            if j < self.first or not any(m.source in self.fed_sources for m in cl.line.macros):
                ranks[j] = _ranks(space, cl, values, pos)
        head = np.array(ranks[:self.first], dtype=np.int32).reshape(self.first, n)
        prefix = _pipeline.prefix_scores(w, space.feat_ptr, space.feat_label, space.n_labels,
                                         offsets[:self.first], head, n)
        eattr_ptr, eattrs, _ = space._attribute_csr(space.bigram_lines, values, pos)
        kernel = _kernel(space, w, pos.sent_ptr, np.zeros(n + 1, dtype=np.int32), np.zeros(0, dtype=np.int32),
                         eattr_ptr, eattrs)
        tail = list(range(self.first, len(lines)))
        rows = np.empty((len(tail), n), dtype=np.int32)
        for r, j in enumerate(tail):
            if ranks[j] is not None:
                rows[r] = ranks[j]

        resume = _Resume(n, pos.sent_ptr.size - 1, space.n_labels, self.reach)

        def score(fed, active, k, logz):
            single = dict(values.single)
            for key, ids in self.fed_ids.items():
                single[key] = ids[fed]
            vh = type(values)(single, values.multi, None, values.lengths, None, values.reals)
            for r, j in enumerate(tail):
                if ranks[j] is None:
                    rows[r] = _ranks(space, lines[j], vh, pos)
            return kernel.fed_options(prefix, offsets[self.first:], rows, active, k, logz, 1, *resume(fed, k))
        return score


class _Resume:
    """The passes of a scorer's first k = 1 call (hypothesis 0) and, for each later one, the tokens
    whose state rows may differ from it (crftk._pipeline.Passes): those within ``reach`` (the
    offsets at which the stage reads its fed column) of a token whose fed label changed."""

    def __init__(self, n_tokens, n_sentences, n_labels, reach=(0,)):
        self.passes = _pipeline.Passes(n_tokens, n_sentences, n_labels)
        self.reach = reach
        self.first = None

    def __call__(self, fed, k):
        """(passes, changed) for fed_options / table_options: (None, None) when k > 1."""
        if k != 1:
            return None, None
        if self.first is None:
            self.first = fed.copy()
            return self.passes, None
        diff = fed != self.first
        n = diff.size
        changed = np.zeros(n, dtype=bool)
        for r in self.reach:            # token t reads t + r
            if r >= 0:
                changed[:n - r] |= diff[r:]
            else:
                changed[-r:] |= diff[:n + r]
        return self.passes, changed.view(np.uint8)


def _ranks(space, cl, values, pos):
    own, rank = space.attribute_ranks(cl, values, pos)
    assert own is None          # single-valued lines only (FedLines.of)
    return rank


def _table_scorer(link, model, batch, n_states):
    """The scorer of FedLines.scorer for a stage read through a joint.FedLink (exact link): its state
    table for every fed label, built for runs of sentences that bound its size."""
    values = model.space.raw_values(batch)
    sent_ptr = batch.sent_ptr.astype(np.int64)
    runs = []
    L = model.space.n_labels
    for a, b in joint.sentence_groups(sent_ptr, n_states):
        table, corpus = link.tables_of(values.sentences(a, b))
        trans = joint.transitions(model, corpus)
        rows = np.ascontiguousarray(trans.reshape(-1, L * L))
        runs.append((a, b, np.ascontiguousarray(table), trans, rows, *_product.exp_rows(rows)))
    sizes = np.array([L], dtype=np.int32)
    S, N = sent_ptr.size - 1, int(sent_ptr[-1])
    resumes = [_Resume(int(sent_ptr[b] - sent_ptr[a]), b - a, L) for a, b, *_ in runs]

    def score(fed, active, k, logz):
        paths = np.full((k, N), -1, dtype=np.int32)
        scores = np.full((S, k), -np.inf)
        counts = np.zeros(S, dtype=np.int32)
        lz = np.zeros(S)
        for (a, b, table, trans, rows, exp_rows, top), resume in zip(runs, resumes):
            lo, hi = int(sent_ptr[a]), int(sent_ptr[b])
            sp = sent_ptr[a:b + 1] - lo
            if k == 1:
                e = (exp_rows, top) if logz else (None, None)
                paths[0, lo:hi], scores[a:b, 0], lz[a:b] = _pipeline.table_options(
                    sp, table, fed[lo:hi], active[a:b], rows, *e, 1, *resume(fed[lo:hi], 1))
                counts[a:b] = 1
                continue
            state = table[np.arange(hi - lo), fed[lo:hi]]
            paths[:, lo:hi], scores[a:b], counts[a:b] = _product.nbest(sizes, sp, state, [trans], k, 1)
            if logz:
                lz[a:b], _, _ = _product.forward_backward(sizes, sp, state, [trans], 1, edges=False)
        return paths, scores, counts, lz
    return score


def decode(stages, links, batch, K, normalized):
    """Label ids [stages, tokens] of a RawBatch by the beam of K hypotheses per sentence (links[i]:
    how stage i is read, see the module docstring; links[0] unused)."""
    C, S, N = len(stages), batch.n_sentences, batch.n_tokens
    if N == 0:
        return np.zeros((C, 0), dtype=np.int32)
    sent_ptr = batch.sent_ptr.astype(np.int64)
    sid = np.repeat(np.arange(S), np.diff(sent_ptr))
    tok = np.arange(N)
    first = stages[0]
    corpus = first.space.encode_raw(batch)
    kernel = _kernel(first.space, first.model.weights, corpus.sent_ptr, corpus.attr_ptr, corpus.attrs,
                     corpus.eattr_ptr, corpus.eattrs, corpus.values)
    paths, scores, cnt = kernel.nbest(K)
    base = np.full((S, K), -np.inf)
    base[:, :scores.shape[1]] = scores + 0.0
    labs = [paths]
    for i in range(1, C):
        stage, link = stages[i], links[i]
        k = 1 if i == C - 1 else K
        if isinstance(link, FedLines):
            score = link.scorer(batch)
        else:
            score = _table_scorer(link, stage.model, batch, len(stages[i - 1].labels) * len(stage.labels))
        H = int(cnt.max())
        total = np.zeros((S, H, k))
        valid = np.zeros((S, H, k), dtype=bool)
        options = np.empty((H, k, N), dtype=np.int32)
        for h in range(H):
            active = h < cnt
            fed = labs[-1][np.minimum(h, cnt - 1)[sid], tok]
            p, sc, counts, logz = score(fed, active.astype(np.int32), k, normalized)
            if normalized:
                sc = sc - logz[:, None]
            total[:, h] = base[:, h, None] + sc
            valid[:, h] = active[:, None] & (np.arange(k)[None, :] < counts[:, None])
            options[h] = p
        flat, ok = total.reshape(S, H * k), valid.reshape(S, H * k)
        # a stable sort by descending score; the missing candidates after every real one (a score
        # of -inf ties with them, and keeps its place among the real ones once they are dropped)
        order = np.argsort(np.where(ok, -flat, np.inf), axis=1, kind="stable")
        ok_sorted = np.take_along_axis(ok, order, axis=1)
        rank = np.cumsum(ok_sorted, axis=1) - 1
        rows, cols = np.nonzero(ok_sorted & (rank < K))
        r, picked = rank[rows, cols], order[rows, cols]
        base = np.full((S, K), -np.inf)
        base[rows, r] = flat[rows, picked]
        parent = np.zeros((S, K), dtype=np.int64)
        option = np.zeros((S, K), dtype=np.int64)
        parent[rows, r], option[rows, r] = picked // k, picked % k
        cnt = np.bincount(rows, minlength=S).astype(np.int32)
        ph, oh = parent[sid].T, option[sid].T              # [K, N]: each new hypothesis's sources
        labs = [lab[ph, tok] for lab in labs] + [options[ph, oh, tok]]
    return np.stack([lab[0] for lab in labs]).astype(np.int32)
