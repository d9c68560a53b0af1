"""Feature induction for linear-chain CRFs (McCallum 2003; McCallum & Li 2003), the algorithm
(crftk.commands.induce reads the files, writes the model and the report).

The template lists atomic tests, one macro per U line (a test at one offset).
Induction starts from a model with transition weights only and grows it in
rounds:

1. decode the training data; the error tokens are those Viterbi mislabels;
2. score every candidate on the error tokens only, with the weights of the
   model fixed and the mean-field approximation (each token's label
   distribution is its forward-backward marginal, tokens independent): the
   gain of adding predicate b with label y and weight mu is
   ``sum_t [mu 1(y_t = y) - log(1 + p_t(y)(e^mu - 1))] - mu^2 / (2 sigma^2)``
   over the error tokens where b fires, maximised in mu by Newton's method
   (crftk._induce). Candidates are the atomic tests, the predicates already in
   the model (with a label they lack) and the binary conjunctions of the top K
   of those with the atomic tests firing on the same token, so conjunctions
   of any length can grow. A candidate is scored as a state feature, whatever
   the previous label;
3. add the N candidates of highest gain above a threshold (their weights start
   at zero: each Newton weight assumes that it alone is added); a selected
   predicate then gets a weight for every label it occurs with in training (the
   aggregate feature expanded);
4. run a few L-BFGS iterations on all weights.

Beyond the paper, four options: ``start="atomic"`` begins from every atomic
test with the labels it occurs with, trained to convergence, so rounds add
conjunctions only; ``gain_tokens="all"`` scores the best candidates again over
every token where they fire, so the correct tokens a candidate would hurt count
against it; ``error_below`` also treats tokens whose gold marginal is low as
error tokens; and ``gain_folds=K`` takes each token's posteriors and error from
a model trained alongside on the other K-1 folds of sentences (CrossFit), since
a model that fits its training data leaves few training errors to learn from.

The model's features are kept as predicates (tuples of atomic attribute ids)
with label sets; each round builds an ordinary FeatureSpace for them
(FeatureSpace.from_predicates), so the final model is a normal model file.
"""

import time

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.features.space import FeatureSpace
from crftk.io.partial import DEFAULT_MARKER
from crftk.kinds.chain import DevScorer
from crftk.model import Model
from crftk.objectives import Likelihood
from crftk.params import resolve_threads
from crftk.progress import status
from crftk.structures.chain import Chain, chain_lattices
from crftk.training.driver import optimize


_HASH_SEED = 20031
# training "to convergence" as train does: at most this many iterations, this relative improvement
_CONVERGE_ITER, _CONVERGE_EPS = 1000, 1e-5
# the inner fits: L-BFGS on the likelihood (its L2 term is the objective's), the optimizer's defaults
_INNER_FIT = {"algorithm": "lbfgs", "c1": 0.0, "history": 6, "period": 10, "keep": "last"}


class _Csr:
    """Rows of int ids (e.g. the tests or predicates firing on each token)."""

    def __init__(self, ptr, ids):
        self.ptr = np.asarray(ptr, dtype=np.int64)
        self.ids = np.asarray(ids, dtype=np.int64)

    def rows(self, which):
        """(row of each entry, id) for the given rows, in row order of ``which``."""
        start, stop = self.ptr[which], self.ptr[np.asarray(which) + 1]
        counts = stop - start
        owner = np.repeat(np.arange(len(which), dtype=np.int64), counts)
        idx = np.repeat(start - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        return owner, self.ids[idx]


def _grouped(keys, tokens):
    """CSR over the distinct keys: (unique keys, ptr, tokens sorted by key) without duplicate pairs."""
    order = np.lexsort((tokens, keys))
    keys, tokens = keys[order], tokens[order]
    if keys.size:
        fresh = np.ones(keys.size, dtype=bool)
        fresh[1:] = (keys[1:] != keys[:-1]) | (tokens[1:] != tokens[:-1])
        keys, tokens = keys[fresh], tokens[fresh]
    uniq, start = np.unique(keys, return_index=True)
    ptr = np.append(start, keys.size).astype(np.int64)
    return uniq, ptr, tokens.astype(np.int32)


def refuse_partial(labels, corpus, sentences):
    """Induction scores candidates on the tokens the model gets wrong, which needs every gold label:
    one line at the first unknown one (the default marker). A label holding ``|`` stays a label,
    as before partial labels existed: induce takes no --unknown-label to turn sets off."""
    bad = [j for j, lab in enumerate(labels) if lab == DEFAULT_MARKER]
    if not bad:
        return
    k, t = corpus.position(int(np.flatnonzero(np.isin(corpus.labels, bad))[0]))
    s = sentences[k] if isinstance(sentences, list) else None
    raise CrftkError(f"label {shown(labels[bad[0]])} is the unknown marker: induce scores features on "
                     "the tokens the model mislabels, which needs every gold label; train partial labels with "
                     "crftk train", s.source if s else None, s.line + t if s and s.line else None)


class Inducer:
    """The state of an induction: atomic tests, the model's predicates and weights."""

    def __init__(self, sentences, template, opt, log):
        self.opt, self.log = opt, log
        self.sentences = sentences
        for line in template.unigrams:
            if len(line.macros) != 1:
                raise CrftkError(f"induce needs atomic tests: one macro per U line, line {line.lineno} "
                                 f"has {len(line.macros)} ({line.text})", template.path, line.lineno)
        self.atomic, corpus = FeatureSpace.fit(sentences, template, label_col=opt["label_col"],
                                               min_freq=opt["min_freq"])
        if corpus.values is not None:
            raise CrftkError("induce conjoins binary tests: the template gives real-valued attributes; "
                             "train them with crftk train instead", template.path)
        refuse_partial(self.atomic.labels, corpus, sentences)
        self.gold = corpus.labels
        self.tests = _Csr(corpus.attr_ptr, corpus.attrs)
        self.n_tests = self.atomic.n_attrs
        self.line_of = np.repeat(np.arange(len(self.atomic.unigram_lines)),
                                 [cl.size for cl in self.atomic.unigram_lines])
        self.test_names = self.atomic.attribute_strings()
        rng = np.random.default_rng(_HASH_SEED)
        # a conjunction is identified by the sum of its tests' random 64-bit codes
        self.code = rng.integers(0, 2**63, size=self.n_tests, dtype=np.int64).astype(np.uint64)
        self.predicates = []            # tuples of atomic test ids, sorted
        self.labels = []                # per predicate: set of label ids
        self.weight = {}                # (predicate, label) -> weight
        self.index = {}                 # predicate -> position in self.predicates
        self.pred_code = []             # per predicate: the sum of its tests' codes
        self.base = None                # transition, start and end weights
        self.n_threads = resolve_threads(opt["threads"])
        if opt["gain_tokens"] == "all":
            self.index_tokens(template)

    def index_tokens(self, template):
        """The test of each line on each token, and the tokens of each test (for all-token gains)."""
        n_tok, n_lines = self.gold.size, len(self.atomic.unigram_lines)
        tok = np.repeat(np.arange(n_tok, dtype=np.int64), np.diff(self.tests.ptr))
        line = self.line_of[self.tests.ids]
        cell = tok * n_lines + line
        if np.unique(cell).size != cell.size:
            bad = template.unigrams[int(line[np.flatnonzero(np.bincount(cell) > 1)[0] % n_lines])]
            raise CrftkError(f"--gain-tokens all needs at most one value per template line and token; "
                             f"line {bad.lineno} gives several ({bad.text})", template.path, bad.lineno)
        self.test_at = np.full((n_tok, n_lines), -1, dtype=np.int32)
        self.test_at[tok, line] = self.tests.ids
        order = np.argsort(self.tests.ids, kind="stable")
        self.post_tok = tok[order].astype(np.int32)
        self.post_ptr = np.zeros(self.n_tests + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.tests.ids, minlength=self.n_tests), out=self.post_ptr[1:])

    def add_predicate(self, pred):
        """Position of the predicate (a sorted tuple of tests), added without labels if new."""
        j = self.index.get(pred)
        if j is None:
            j = self.index[pred] = len(self.predicates)
            self.predicates.append(pred)
            self.labels.append(set())
            self.pred_code.append(np.sum(self.code[list(pred)], dtype=np.uint64))
        return j

    def seed_atomic(self):
        """Start from every atomic test, with the labels it occurs with in training."""
        a = self.atomic
        for t in range(self.n_tests):
            j = self.add_predicate((t,))
            self.labels[j].update(a.feat_label[a.feat_ptr[t]:a.feat_ptr[t + 1]].tolist())

    # -- the model as an ordinary feature space --------------------------------
    def build(self):
        """Feature space, encoded corpus and weights of the current model."""
        labels = [np.array(sorted(s), dtype=np.int64) for s in self.labels]
        space, attr_of = FeatureSpace.from_predicates(self.atomic, self.predicates, labels)
        corpus = space.encode(self.sentences)
        if self.opt["expand"] == "labels" and self.predicates:
            self.expand(space, corpus, attr_of)
            labels = [np.array(sorted(s), dtype=np.int64) for s in self.labels]
            # the attributes depend on the predicates only: the encoding stays valid
            space, attr_of = FeatureSpace.from_predicates(self.atomic, self.predicates, labels)
        w = self.vector(space, attr_of, self.weight, self.base)
        pred_of = np.full(space.n_attrs, -1, dtype=np.int64)
        pred_of[attr_of] = np.arange(len(self.predicates))
        return space, corpus, w, attr_of, pred_of

    def expand(self, space, corpus, attr_of):
        """Give every predicate each label it occurs with in the training data."""
        L = space.n_labels
        tok = np.repeat(np.arange(corpus.n_tokens), np.diff(corpus.attr_ptr))
        pairs = np.unique(corpus.attrs.astype(np.int64) * L + self.gold[tok])
        attr, label = np.divmod(pairs, L)
        start = np.searchsorted(attr, attr_of)
        stop = np.searchsorted(attr, attr_of, side="right")
        for j in range(len(self.predicates)):
            self.labels[j].update(label[start[j]:stop[j]].tolist())

    def _features(self, space, attr_of):
        """(parameter index, (predicate, label)) of every state feature of the model."""
        for j, pred in enumerate(self.predicates):
            a = attr_of[j]
            for f in range(space.feat_ptr[a], space.feat_ptr[a + 1]):
                yield f, (pred, int(space.feat_label[f]))

    def vector(self, space, attr_of, weight, base):
        """Parameter vector of the space from weights kept by (predicate, label); new ones 0."""
        w = np.zeros(space.n_params)
        for f, key in self._features(space, attr_of):
            w[f] = weight.get(key, 0.0)
        if base is not None:
            w[space.n_features:] = base
        return w

    def keyed(self, space, attr_of, w):
        """Weights of a parameter vector by (predicate, label), and its transition weights."""
        weight = {key: float(w[f]) for f, key in self._features(space, attr_of)}
        return weight, np.array(w[space.n_features:], copy=True)

    def absorb(self, space, attr_of, w):
        """Keep trained weights by predicate and label."""
        weight, self.base = self.keyed(space, attr_of, w)
        self.weight.update(weight)

    def n_features(self):
        return sum(len(s) for s in self.labels)

    def name(self, pred):
        return " & ".join(self.test_names[t] for t in pred)

    # -- one round of candidate scoring -----------------------------------------
    def candidates(self, space, corpus, w, pred_of, posteriors=None, show=lambda msg: None):
        """Score the candidates: (gain, label, mu, error-token set code, tuple maker), counts.

        ``posteriors``: (Viterbi labels, marginals) of every token to score with, by
        default those of the model w itself; ``show`` receives progress messages."""
        from crftk._induce import conjunction_gains, predicate_gains
        if posteriors is None:
            lat = chain_lattices(space, corpus)
            posteriors = lat.viterbi(w, self.n_threads)[0], lat.marginals(w, self.n_threads)[0]
        pred, marg_all = posteriors
        marg_all = np.clip(marg_all, 0.0, 1.0)      # rounding can leave 1 + 2e-16
        wrong = pred != self.gold
        if self.opt["error_below"] > 0:
            wrong |= marg_all[np.arange(self.gold.size), self.gold] < self.opt["error_below"]
        errors = np.flatnonzero(wrong)
        stats = {"errors": int(errors.size)}
        if errors.size == 0:
            return None, stats
        show(f"{errors.size:,} error tokens; scoring the atomic tests and the model's features ...")
        marg = marg_all[errors]
        gold = np.ascontiguousarray(self.gold[errors], dtype=np.int32)
        opt = self.opt
        inv_var = 2.0 * opt["c2"]

        tok_code = np.random.default_rng(_HASH_SEED + 1).integers(
            0, 2**63, size=errors.size, dtype=np.int64).astype(np.uint64)

        def gains(ptr, tok):
            """(gain, label, mu, code of the set of error tokens) of each predicate."""
            g, y, m = predicate_gains(marg, gold, ptr, tok, inv_var=inv_var, max_newton=opt["newton_iter"],
                                      n_threads=self.n_threads)
            codes = np.add.reduceat(tok_code[tok], ptr[:-1]) if tok.size else np.zeros(0, np.uint64)
            return g, y, m, codes

        # atomic tests and model predicates firing on the error tokens
        t_tok, t_id = self.tests.rows(errors)
        m_tok, m_attr = _Csr(corpus.attr_ptr, corpus.attrs).rows(errors)
        m_id = pred_of[m_attr]
        tests, t_ptr, t_toks = _grouped(t_id, t_tok)
        preds, p_ptr, p_toks = _grouped(m_id, m_tok)
        tg, tl, tm, tc = gains(t_ptr, t_toks)
        pg, pl, pm, pc = gains(p_ptr, p_toks)

        # bases of conjunctions: the top K atomic tests and model predicates by gain
        base_tuples = [(int(t),) for t in tests] + [self.predicates[p] for p in preds]
        base_gain = np.concatenate([tg, pg])
        top = np.argsort(-base_gain, kind="stable")[: opt["conjoin_top"]]
        top = top[base_gain[top] > 0]
        n_lines = len(self.atomic.unigram_lines)
        base_lines = np.zeros((top.size, n_lines), dtype=bool)
        base_code = np.zeros(top.size, dtype=np.uint64)
        for i, b in enumerate(top.tolist()):
            tup = base_tuples[b]
            base_lines[i, self.line_of[list(tup)]] = True
            base_code[i] = np.sum(self.code[list(tup)], dtype=np.uint64)
        # (token, base) pairs: a test base fires where its test does, a predicate where it does
        rank = np.full(base_gain.size, -1, dtype=np.int64)
        rank[top] = np.arange(top.size)
        tb = rank[np.searchsorted(tests, t_id)]
        pb = rank[tests.size + np.searchsorted(preds, m_id)] if preds.size else np.zeros(0, np.int64)
        b_tok = np.concatenate([t_tok[tb >= 0], m_tok[pb >= 0]])
        b_id = np.concatenate([tb[tb >= 0], pb[pb >= 0]])
        # cross every base on a token with every atomic test on that token
        n_err = errors.size
        per_tok = np.bincount(t_tok, minlength=n_err)
        a_start = np.zeros(n_err + 1, dtype=np.int64)
        np.cumsum(per_tok, out=a_start[1:])          # t_tok is sorted: rows() keeps row order
        reps = per_tok[b_tok]
        c_base = np.repeat(b_id, reps)
        c_tok = np.repeat(b_tok, reps)
        offs = np.repeat(a_start[b_tok] - np.cumsum(reps) + reps, reps) + np.arange(int(reps.sum()))
        c_test = t_id[offs]
        ok = ~base_lines[c_base, self.line_of[c_test]]
        c_base, c_tok, c_test = c_base[ok], c_tok[ok], c_test[ok]
        c_code = base_code[c_base] + self.code[c_test]
        stats["pairs"] = int(c_code.size)
        codes, c_ptr, c_toks = _grouped(c_code, c_tok)
        # one (base, test) making each conjunction, to spell it out
        first = np.unique(c_code, return_index=True)[1]
        known = np.array(self.pred_code, dtype=np.uint64)
        fresh = ~np.isin(codes, known)
        show(f"{errors.size:,} error tokens; scoring {codes.size:,} conjunctions ...")
        cg, cl, cm, cc = gains(c_ptr, c_toks)
        cg = np.where(fresh, cg, -np.inf)
        stats.update(tests=int(tests.size), predicates=int(preds.size), conjunctions=int(codes.size))

        # every candidate: (gain, label, mu, error tokens, tuple maker)
        tokens = np.concatenate([tc, pc, cc])
        gain = np.concatenate([tg, pg, cg])
        label = np.concatenate([tl, pl, cl])
        mu = np.concatenate([tm, pm, cm])
        n_t, n_p = tests.size, preds.size

        def tuple_of(i):
            if i < n_t:
                return (int(tests[i]),)
            if i < n_t + n_p:
                return self.predicates[int(preds[i - n_t])]
            k = first[i - n_t - n_p]
            return tuple(sorted(base_tuples[int(top[c_base[k]])] + (int(c_test[k]),)))

        if opt["gain_tokens"] == "all":
            # the error-token gain ignores the correct tokens a candidate would hurt: score the
            # atomic tests, the model's predicates and the best conjunctions again on all tokens
            conj = n_t + n_p + np.argsort(-cg, kind="stable")[: opt["rescore"]]
            conj = conj[np.isfinite(gain[conj])]
            short = np.concatenate([np.arange(n_t + n_p), conj])
            show(f"scoring {short.size:,} candidates again on all tokens ...")
            tuples = [tuple_of(int(i)) for i in short]
            c_ptr = np.zeros(len(tuples) + 1, dtype=np.int64)
            np.cumsum([len(t) for t in tuples], out=c_ptr[1:])
            c_tests = np.fromiter((x for t in tuples for x in t), dtype=np.int32, count=int(c_ptr[-1]))
            rg, rl, rm, _ = conjunction_gains(
                marg_all, self.gold.astype(np.int32), self.test_at, self.line_of.astype(np.int32),
                self.post_ptr, self.post_tok, c_ptr, c_tests, inv_var=inv_var,
                max_newton=opt["newton_iter"], n_threads=self.n_threads)
            gain = np.full(gain.size, -np.inf)
            gain[short], label[short], mu[short] = rg, rl, rm
            stats["rescored"] = int(short.size)

        return (gain, label, mu, tokens, tuple_of), stats

    def select(self, scored):
        """Add the best candidates; returns the list of (gain, predicate, label, mu) added."""
        gain, label, mu, tokens, tuple_of = scored
        order = np.argsort(-gain, kind="stable")
        added = []
        seen = set()
        for i in order.tolist():
            if len(added) >= self.opt["per_round"] or not gain[i] > self.opt["gain_threshold"]:
                break
            # tests that fire on the same error tokens (the padding of every line at the
            # sentence start, a word and its word class...) score the same: keep the first
            if (int(label[i]), int(tokens[i])) in seen:
                continue
            seen.add((int(label[i]), int(tokens[i])))
            pred, y = tuple_of(i), int(label[i])
            j = self.add_predicate(pred)
            if y in self.labels[j]:
                continue        # an existing feature scored again: it keeps training anyway
            self.labels[j].add(y)
            # each Newton weight assumes it is the only feature added: together they overshoot
            self.weight[(pred, y)] = 0.0
            added.append((float(gain[i]), pred, y, float(mu[i])))
        return added


class CrossFit:
    """K models of the inducer's features, each trained on all folds of sentences but one,
    give every training token posteriors from a model that has not seen it."""

    def __init__(self, n_sentences, k):
        self.fold = np.arange(n_sentences) % k
        self.state = [({}, None) for _ in range(k)]     # per model: weights by key, transitions

    def posteriors(self, ind, space, corpus, attr_of, fit):
        """(Viterbi labels, marginals) of every token; ``fit(corpus, w, k)`` trains fold k's model."""
        pred = np.empty(corpus.n_tokens, dtype=np.int32)
        marg = np.empty((corpus.n_tokens, space.n_labels))
        for k, (weight, base) in enumerate(self.state):
            w = fit(corpus.subset(np.flatnonzero(self.fold != k)),
                    ind.vector(space, attr_of, weight, base), k)
            self.state[k] = ind.keyed(space, attr_of, w)
            held = np.flatnonzero(self.fold == k)
            lat = chain_lattices(space, corpus.subset(held))
            tokens = corpus.tokens_of(held)
            pred[tokens] = lat.viterbi(w, ind.n_threads)[0]
            marg[tokens] = lat.marginals(w, ind.n_threads)[0]
        return pred, marg


def induce_rounds(ind, opt, dev_sents, log, t0, *, train_files, dev_file):
    """Induction's rounds on an Inducer (its training data read): returns the model and the report
    lines (the features added in each round with their gain, label and starting weight)."""
    sentences = ind.sentences
    report = []
    history = []

    cross = CrossFit(len(sentences), opt["gain_folds"]) if opt["gain_folds"] else None
    if cross is not None and len(sentences) < opt["gain_folds"]:
        raise CrftkError(f"--gain-folds {opt['gain_folds']} needs at least as many training sentences")

    def fit(space, corpus, w, iterations, epsilon=0.0, what="training"):
        obj = Likelihood.chain(space, corpus, c2=opt["c2"], n_threads=ind.n_threads)
        if iterations == 0:
            return w, obj(w)[0]

        def show(info):
            status(log, f"{what}: L-BFGS iteration {info.iteration} of at most {iterations}, "
                        f"objective {info.f:.6e}")
        res = optimize({**_INNER_FIT, "max_iter": iterations, "epsilon": epsilon}, obj, w,
                       np.zeros(w.size, dtype=bool), log=None, progress=show).result
        return res.x, res.f

    def dev_f1(space, w):
        if not dev_sents:
            return None
        return DevScorer(Chain(space), dev_sents, ind.n_threads)(w).overall.f1

    if opt["start"] == "atomic":
        ind.seed_atomic()
    space, corpus, w, attr_of, pred_of = ind.build()
    if opt["start"] == "atomic":
        # the atomic CRF is the model that the conjunctions are to improve: train it as train does
        w, f = fit(space, corpus, w, _CONVERGE_ITER, epsilon=_CONVERGE_EPS,
                   what="round 0: the atomic tests to convergence")
        f1 = dev_f1(space, w)
        log(f"round 0: {len(ind.predicates)} atomic tests, {ind.n_features()} features, trained to "
            f"convergence: objective {f:.6e}" + (f"; dev F1 {f1:.2f}" if f1 is not None else ""))
    else:
        w, f = fit(space, corpus, w, opt["round_iter"], what="round 0: transitions")
        log(f"round 0: transitions only, objective {f:.6e}")
    ind.absorb(space, attr_of, w)
    rounds = 0
    for r in range(1, opt["rounds"] + 1):
        start = time.perf_counter()
        posteriors = None
        if cross is not None:
            # the fold models follow the main model's schedule on the same features
            iters, eps = ((_CONVERGE_ITER, _CONVERGE_EPS) if r == 1 and opt["start"] == "atomic"
                          else (opt["round_iter"], 0.0))
            posteriors = cross.posteriors(
                ind, space, corpus, attr_of,
                lambda c, v, k: fit(space, c, v, iters, eps, what=f"round {r}: fold model {k + 1} of "
                                                                  f"{opt['gain_folds']}")[0])
        status(log, f"round {r}: decoding the training data and scoring candidates ...")
        scored, stats = ind.candidates(space, corpus, w, pred_of, posteriors,
                                       lambda msg: status(log, f"round {r}: {msg}"))
        added = ind.select(scored) if scored is not None else []
        score_s = time.perf_counter() - start
        if not added:
            log(f"round {r}: {stats['errors']} {'held-out ' if cross else ''}error tokens; no candidate above gain "
                f"{opt['gain_threshold']:g}: induction stops")
            break
        rounds = r
        status(log, f"round {r}: {len(added)} features added; encoding the training data ...")
        space, corpus, w, attr_of, pred_of = ind.build()
        w, f = fit(space, corpus, w, opt["round_iter"], what=f"round {r}: training")
        ind.absorb(space, attr_of, w)
        f1 = dev_f1(space, w)
        seconds = time.perf_counter() - start
        record = {"round": r, **stats, "added": len(added), "predicates": len(ind.predicates),
                  "features": ind.n_features(), "objective": f, "dev_f1": f1,
                  "scoring_seconds": score_s, "seconds": seconds,
                  "best_gain": added[0][0], "last_gain": added[-1][0]}
        history.append(record)
        log(f"round {r}: {stats['errors']} {'held-out ' if cross else ''}error tokens, {stats['tests']} tests + "
            f"{stats['predicates']} features + {stats['conjunctions']} conjunctions scored"
            + (f", {stats['rescored']} again on all tokens" if "rescored" in stats else "")
            + f" ({score_s:.1f}s); added {len(added)} (gain {added[0][0]:.1f} .. {added[-1][0]:.1f}); "
            f"{len(ind.predicates)} predicates, {ind.n_features()} features; objective {f:.6e}"
            + (f"; dev F1 {f1:.2f}" if f1 is not None else "") + f"; {seconds:.1f}s")
        report.append(f"# round {r}: {len(added)} features added, {stats['errors']} error tokens")
        names = space.labels
        report.extend(f"{g:.3f}\t{names[y]}\t{m:+.4f}\t{ind.name(p)}" for g, p, y, m in added)
    if opt["final_iter"] > 0:
        w, f = fit(space, corpus, w, opt["final_iter"], epsilon=_CONVERGE_EPS, what="final training")
        log(f"final training: at most {opt['final_iter']} iterations, objective {f:.6e}"
            + (f"; dev F1 {dev_f1(space, w):.2f}" if dev_sents else ""))
    seconds = time.perf_counter() - t0
    info = {"options": opt, "order": 1, "model_type": "crf", "induced": True,
            "train_files": [str(p) for p in train_files], "dev_file": dev_file,
            "rounds": rounds, "predicates": len(ind.predicates), "features": ind.n_features(),
            "objective": f, "seconds": seconds, "history": history}
    model = Model(space, w, info)
    return model, report
