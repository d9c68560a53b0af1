"""The "pipeline" kind (Sutton & McCallum 2005): trained CRFs that feed each other, written by
crftk compose as one model file holding the stages (one part each) and, for each link, the
column of stage i+1 that stage i's predictions fill. A pipeline reads files in the last stage's
layout, cut after the last column a stage reads that no stage before it fills (a POS tagger
feeding a chunker tags the words alone); every stage reads the columns it was trained on from
them, its fed column replaced by the labels of the stage before.

Decoding (:class:`Pipeline`):

- ``cascade``: each stage's Viterbi labels feed the next;
- ``joint``: the best labeling of all stages together under the sum of their scores
  (the paper's eq. 7). Exact, over the cross product of the label sets with the
  factorized recursion (crftk.structures.joint), when every stage reads its fed
  column at offset 0 only; otherwise the K best labelings of each upstream stage,
  each with the best labeling of the next stages, rescored by the summed score
  (``nbest_upstream``; with K = all labelings this is exact too).
- ``normalized``: the same K-best rescoring by the sum of the stages' conditional
  log-probabilities, log p(y1|x) + log p(y2|y1,x) + ...: each stage's score minus its
  log Z given the labels fed to it. Eq. 7 leaves out the downstream log Z(y1): upstream
  labels under which the downstream stage scores every labeling higher (NN rather than
  JJ before a noun, for a chunker) win, though they make no downstream labeling more
  probable; with log Z(y1) subtracted the downstream stage counts only by how much
  it prefers its labeling given y1. Exact maximization is intractable (log Z(y1) does
  not factorize over positions); K = 1 is the cascade.
"""

import math

import numpy as np

from crftk import _product, params
from crftk.errors import CrftkError, UsageError
from crftk.features.space import FeatureSpace, Positions
from crftk.io.conll import Sentence, describe_widths, input_batches, model_widths
from crftk.io.stream import format_batch, format_scored, gold_ids, tag_stream
from crftk.kinds.base import Job as KindJob
from crftk.kinds.base import dump  # noqa: F401 (this kind's dump: each stage's weights)
from crftk.model import CHAIN_STRUCTURES, Model, Part, _check_kind, check_chain_model
from crftk.progress import plural
from crftk.structures import beam, joint
from crftk.structures.chain import chain_lattices
from crftk.structures.composed import Composed

NAME = "pipeline"
#: Pipelines of more stages than this would need more than 8 chains in the product kernel.
MAX_STAGES = 8
#: Stand-in for the columns a stage's model has but the pipeline input lacks (never read).
_ABSENT = "_"


def _quiet(msg):
    pass


def refuse_train_scheme(model, name=None):
    """A stage trained in another scheme (--train-scheme) is refused: stages pass label ids to each
    other, in cascade and in the joint tables alike, and none is converted back on the way."""
    scheme = model.info.get("train_scheme", "none")
    if scheme != "none" and model.kind == "crf":     # other kinds are no stage at all (check_chain)
        raise CrftkError(f"{name or 'a stage'} was trained with --train-scheme {scheme}: a pipeline feeds its "
                         f"stages' labels to the next stage as they were trained, so compose stages trained "
                         f"without --train-scheme")


class Stage:
    """One model of a pipeline and the column its input gets from the stage before (or None)."""

    def __init__(self, model, feed=None, name=None):
        refuse_train_scheme(model, name)
        self.model = model
        self.feed = feed
        self.name = name

    @property
    def space(self):
        return self.model.space

    @property
    def labels(self):
        return list(self.model.output_labels)

    def rows(self, sentence, fed=None):
        """The sentence in this stage's layout: the input's columns (absent ones filled), the fed
        column holding ``fed`` (a label per token) when given."""
        n = self.space.n_columns
        out = []
        for t, row in enumerate(sentence.rows):
            r = row[:n] + [_ABSENT] * (n - len(row)) if len(row) < n else row[:n]
            if fed is not None:
                r = list(r)
                r[self.feed] = fed[t]
            out.append(r)
        return Sentence(out, sentence.doc, sentence.line, sentence.source)


class Pipeline:
    """Stages that feed each other; decodes sentences in cascade, jointly or normalized."""

    def __init__(self, stages, info=None, *, threads=0, path=None):
        self.stages = stages
        self.info = dict(info or {})
        self.path = path
        self.n_threads = params.resolve_threads(threads)
        last = stages[-1].space
        # the input: the last stage's columns, its gold label column optional when it is the last
        self.n_columns = last.n_columns
        self.optional_gold = last.label_col == last.n_columns - 1
        self._links = None
        self._fed_links, self._beam_links = {}, {}     # per stage, built once (before tag_stream's threads)

    # building and files ------------------------------------------------------------
    @classmethod
    def from_models(cls, models, feeds, *, names=None, threads=0, log=_quiet):
        """A pipeline of Models; ``feeds[i]``: the column of model i+1 that model i fills."""
        for m, n in zip(models, names or [None] * len(models)):
            if m.kind == "crf":     # other kinds (a semi-Markov CRF converts itself) are refused as such below
                refuse_train_scheme(m, n)
        check_chain(models, feeds, names=names, log=log)
        feeds = [None] + [_column(f, m.space.n_columns) for f, m in zip(feeds, models[1:])]
        stages = [Stage(m, f, n) for m, f, n in zip(models, feeds, names or [None] * len(models))]
        return cls(stages, threads=threads)

    @classmethod
    def load(cls, path, *, threads=0):
        """A pipeline from a file written by :func:`compose`."""
        model = Model.load(path)
        return cls.from_model(model, path, threads=threads)

    @classmethod
    def from_model(cls, model, path=None, *, threads=0):
        model.require_kind("pipeline", "crftk.Pipeline.load", path=path)
        spec = model.info.get("pipeline")

        def bad(what):
            return CrftkError(f"pipeline file is inconsistent: {what}", path)

        if not isinstance(spec, dict) or not isinstance(spec.get("stages"), list):
            raise bad("it does not describe its stages")
        entries = spec["stages"]
        if len(entries) != len(model.parts) or not 2 <= len(entries) <= MAX_STAGES:
            raise bad(f"{len(entries)} stages described for {len(model.parts)} parts")
        stages = []
        for i, (entry, part) in enumerate(zip(entries, model.parts)):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), (str, type(None))):
                raise bad(f"stage {i} is malformed")
            structure, info, feed = entry.get("structure"), entry.get("info"), entry.get("feed")
            if structure not in CHAIN_STRUCTURES or not isinstance(info, dict):
                raise bad(f"stage {i} has no valid structure or record")
            if i == 0 and feed is not None or i > 0 and (type(feed) is not int
                                                         or not 0 <= feed < part.space.n_columns
                                                         or feed == part.space.label_col):
                raise bad(f"stage {i} has no valid fed column")
            _check_kind(info, path)
            check_chain_model(structure, info, part.space, path, where=f"stage {i}: ")
            stages.append(Stage(Model(part.space, part.weights, info, structure=structure), feed,
                                entry.get("name")))
        pipeline = cls(stages, model.info, threads=threads, path=path)
        check_chain([s.model for s in stages], [s.feed for s in stages[1:]], path=path)
        return pipeline

    def to_model(self):
        """The pipeline as one Model (structure ``composed``, one part per stage)."""
        entries = []
        for s in self.stages:
            info = {k: v for k, v in s.model.info.items() if k != "history"}
            entries.append({"name": s.name, "structure": s.model.structure_name, "feed": s.feed, "info": info})
        info = dict(self.info)
        info["pipeline"] = {"stages": entries}
        first = self.stages[0].model
        more = [Part(s.model.space, s.model.weights, f"stage{i}") for i, s in enumerate(self.stages) if i]
        model = Model(first.space, first.weights, info, structure=Composed.name, more_parts=more)
        model.parts[0].name = "stage0"
        return model

    def save(self, path):
        self.to_model().save(path)

    def summary(self):
        """``crftk info``'s summary of a pipeline: its stages, links and joint decoding."""
        stages = {}
        for i, s in enumerate(self.stages):
            space = s.space
            stages[f"stage{i + 1}"] = {
                "model": s.name, "structure": s.model.structure_name, "labels": s.labels,
                "n_labels": len(s.labels), "columns": space.n_columns, "label_column": space.label_col,
                "fed_column": s.feed, "attributes": space.n_attrs, "parameters": space.n_params,
                "iterations": s.model.info.get("iterations"), "converged": s.model.info.get("converged")}
        mode = self.joint_mode()
        return {"structure": Composed.name, "stages": stages, "input_columns": self.n_columns,
                "joint_decoding": mode if mode != "nbest" else "nbest-upstream",
                "joint_labels": math.prod(len(s.labels) for s in self.stages),
                "composed_from": self.info.get("composed_from")}

    # input ---------------------------------------------------------------------------
    def input_widths(self):
        """The column counts of the pipeline's input (crftk.io.conll.Widths): the last stage's
        layout, cut after the last column a stage reads that no stage before it fills (a POS
        tagger feeding a chunker tags the words alone)."""
        reads, fed = set(), set()
        for s in self.stages:
            reads |= set(s.space.template.columns) - {s.feed}
            if s.feed is not None:
                fed.add(s.feed)
        return model_widths(reads, self.n_columns, "the pipeline", "the last model's {n}", sorted(fed))

    def input_columns(self, n):
        """True when rows of n columns carry every stage's gold labels (the last stage's layout in
        full), False when they lack some; raises for a count the pipeline cannot read."""
        widths = self.input_widths()
        if n in widths:
            return n == self.n_columns
        raise CrftkError(f"the pipeline reads files in its last model's layout: {describe_widths(widths)}, "
                         f"found {n}: {widths.needs}")

    # decoding ------------------------------------------------------------------------
    def links(self):
        """Why joint decoding of each link cannot be exact (None where it can)."""
        if self._links is None:
            self._links = [joint.exact_link(s.space.template, s.feed) for s in self.stages[1:]]
        return self._links

    def joint_mode(self):
        """'exact' when every link allows the factorized joint decoding, else 'nbest'."""
        if any(s.model.structure_name != "chain" for s in self.stages):
            return None
        return "exact" if all(why is None for why in self.links()) else "nbest"

    def describe_joint(self, nbest_upstream):
        mode = self.joint_mode()
        if mode is None:
            return None
        if mode == "exact":
            sizes = " x ".join(str(len(s.labels)) for s in self.stages)
            return (f"exact, over the product of the label sets ({sizes} = "
                    f"{math.prod(len(s.labels) for s in self.stages):,} joint labels; every fed column "
                    f"is read at offset 0 only)")
        why = "; ".join(f"stage {i + 2} reads column {s.feed}: {w}"
                        for i, (s, w) in enumerate(zip(self.stages[1:], self.links())) if w)
        return (f"rescoring the {nbest_upstream} best labelings of each upstream stage "
                f"by the summed score (not exact: {why})")

    def decode(self, sentences, mode="joint", nbest_upstream=20):
        """Label ids of every stage: a list over stages of a list over sentences of int arrays.

        ``sentences`` are in the pipeline's input layout (checked).
        """
        mode = params.DECODE.check(mode)
        if not sentences:
            return [[] for _ in self.stages]
        self.input_columns(len(sentences[0].rows[0]))
        if mode == "cascade":
            return self._cascade(sentences)
        joint_mode = self.joint_mode()
        if joint_mode is None:
            kinds = ", ".join(sorted({s.model.structure_name for s in self.stages} - {"chain"}))
            raise CrftkError(f"{mode} decoding needs first-order CRF stages (this pipeline has {kinds}); "
                             f"use --decode cascade")
        if mode == "normalized":
            return self._joint_nbest(sentences, _nbest_check(nbest_upstream), normalized=True)
        if joint_mode == "exact":
            return self._joint_exact(sentences)
        return self._joint_nbest(sentences, _nbest_check(nbest_upstream))

    def tag(self, sentences, mode="joint", nbest_upstream=20):
        """Label strings: per sentence, a list over stages of the labels of its tokens."""
        ids = self.decode(sentences, mode, nbest_upstream)
        names = [np.asarray(s.labels, dtype=object) for s in self.stages]
        return [[names[c][ids[c][i]].tolist() for c in range(len(self.stages))] for i in range(len(sentences))]

    def _best(self, stage, sentences):
        """(label ids per sentence, Viterbi score per sentence) of one stage on its own rows."""
        model = stage.model
        inf = model.structure.bind(model.space.encode(sentences), self.n_threads)
        pred, score = inf.best(model.weights)
        return [pred[sl] for sl in inf.corpus.sentence_slices()], score

    def _cascade(self, sentences):
        out, fed = [], None
        for i, stage in enumerate(self.stages):
            rows = [stage.rows(s, None if fed is None else f) for s, f in zip(sentences, fed or [None] * len(sentences))]
            ids, _ = self._best(stage, rows)
            out.append(ids)
            names = np.asarray(stage.labels, dtype=object)
            fed = [names[p].tolist() for p in ids]
        return out

    def joint_tables(self, sentences):
        """(sizes, sent_ptr, first stage's state [N, n0], links [N, n_i, n_i+1], transitions) of the
        composed model on a batch (every link exact)."""
        return self._joint_tables_of([s.space.extractor.values([s.rows(x) for x in sentences]) for s in self.stages])

    def _joint_tables_of(self, values):
        """:meth:`joint_tables` from each stage's value ids of the batch (its fed column unread)."""
        first = self.stages[0]
        v = values[0]
        corpus = first.space.encode_values(v, Positions(v.lengths, v.anchor))
        state0 = chain_lattices(first.space, corpus).state_matrix(first.model.weights)
        trans = [joint.transitions(first.model, corpus)]
        links = []
        for i, (stage, v) in enumerate(zip(self.stages[1:], values[1:]), 1):
            table, corp = self._fed_link(i).tables_of(v)
            links.append(table)
            trans.append(joint.transitions(stage.model, corp))
        sizes = np.array([len(s.labels) for s in self.stages], dtype=np.int32)
        return sizes, corpus.sent_ptr.astype(np.int64), state0, links, trans

    # compiled path: batches of bytes (crftk.io.conll.RawBatch) ----------------------------
    def raw_decodable(self, mode):
        """Whether :meth:`decode_raw` can decode with ``mode``: cascade, or joint when exact, and
        every stage's template reads columns and tests of them only (no lexicons, first mentions)."""
        if mode != "cascade" and (mode != "joint" or self.joint_mode() != "exact"):
            return False
        if not all(type(s.space) is FeatureSpace and s.space.raw_readable() for s in self.stages):
            return False
        if mode == "joint":         # the fed-label tables' links, shared by the threads: built now
            for i in range(1, len(self.stages)):
                self._fed_link(i)
        return True

    def raw_beam_decodable(self, mode):
        """Whether :meth:`decode_raw` can decode with ``mode`` by the compiled beam over the stages
        (normalized, or joint when not exact): every stage raw readable, and each stage fed through
        a link that is not exact reads no real values, no multi-valued macro and no fed column in
        its transition lines. Builds what the beam's threads share, so call it before they run."""
        if mode not in ("joint", "normalized") or self.joint_mode() is None:
            return False
        if mode == "joint" and self.joint_mode() == "exact":
            return False
        if not all(type(s.space) is FeatureSpace and s.space.raw_readable() for s in self.stages):
            return False
        return all(self._beam_link(i) is not None for i in range(1, len(self.stages)))

    def _beam_link(self, i):
        """What the compiled beam reads stage i through (built once): a joint.FedLink when the link
        is exact, a beam.FedLines when not; None when it cannot."""
        cache = self._beam_links
        if i not in cache:
            stage, prev = self.stages[i], self.stages[i - 1]
            if self.links()[i - 1] is None:
                cache[i] = self._fed_link(i)
            else:
                cache[i] = beam.FedLines.of(stage.model, stage.feed, prev.labels)
        return cache[i]

    def _fed_link(self, i):
        """The joint.FedLink of stage i (its state tables for every label of stage i-1), built once."""
        cache = self._fed_links
        if i not in cache:
            stage, prev = self.stages[i], self.stages[i - 1]
            cache[i] = joint.FedLink(stage.model, stage.feed, prev.labels)
        return cache[i]

    def decode_raw(self, batch, mode, nbest_upstream=20):
        """Label ids [stages, tokens] of a RawBatch (one thread), as :meth:`decode` decodes its
        sentences; needs :meth:`raw_decodable` or :meth:`raw_beam_decodable`."""
        C = len(self.stages)
        if mode == "normalized" or mode == "joint" and self.joint_mode() != "exact":
            K = _nbest_check(nbest_upstream)
            if batch.n_tokens:
                max_len = int(batch.sentence_lengths().max())
                for stage in self.stages[:-1]:
                    _nbest_memory(max_len, len(stage.labels), K, self.n_threads)
            links = [None] + [self._beam_link(i) for i in range(1, C)]
            return beam.decode(self.stages, links, batch, K, mode == "normalized")
        out = np.zeros((C, batch.n_tokens), dtype=np.int32)
        if mode == "cascade":
            fed = None
            for c, stage in enumerate(self.stages):
                v = stage.space.raw_values(batch, None if fed is None else (stage.feed, *fed))
                corpus = stage.space.encode_values(v, Positions(v.lengths))
                out[c], _ = stage.model.structure.bind(corpus, 1).best(stage.model.weights)
                fed = (stage.labels, out[c])
            return out
        values = [s.space.raw_values(batch) for s in self.stages]
        n_states = math.prod(len(s.labels) for s in self.stages)
        sent_ptr = batch.sent_ptr.astype(np.int64)
        for a, b in joint.sentence_groups(sent_ptr, n_states):
            sizes, sp, state0, links, trans = self._joint_tables_of([v.sentences(a, b) for v in values])
            state = joint.product_state(state0, links)
            labels, _ = joint.product_viterbi(sizes, sp, state, trans, 1)
            out[:, sent_ptr[a]:sent_ptr[b]] = labels
        return out

    @property
    def gold_cols(self):
        """The input's column of each stage's gold labels: each fed column, the last stage's label."""
        return [s.feed for s in self.stages[1:]] + [self.stages[-1].space.label_col]

    def raw_gold_correct(self, batch, pred):
        """Per stage, and for all stages together, how many tokens of a RawBatch that holds the
        gold columns ``pred`` gets right."""
        gold, _ = gold_ids(batch, self.gold_cols, [s.labels for s in self.stages])
        ok = gold == pred
        return np.append(ok.sum(axis=1), ok.all(axis=0).sum())

    def _groups(self, sentences, sent_ptr, n_states):
        """joint.sentence_groups of a batch, cut between documents only when a stage reads first
        mentions."""
        anchored = any(s.space.template.anchored for s in self.stages)
        return joint.sentence_groups(sent_ptr, n_states, [s.doc for s in sentences] if anchored else None)

    def _joint_exact(self, sentences, marginals=False):
        """Label ids per stage and sentence; with ``marginals`` also the best joint score per
        sentence, the joint marginals per stage and sentence [tokens, labels] and log Z."""
        C = len(self.stages)
        n_states = math.prod(len(s.labels) for s in self.stages)
        lengths = np.array([len(s) for s in sentences], dtype=np.int64)
        sent_ptr = np.concatenate([[0], np.cumsum(lengths)])
        out = [[None] * len(sentences) for _ in range(C)]
        marg = [[None] * len(sentences) for _ in range(C)]
        scores, logz = np.zeros(len(sentences)), np.zeros(len(sentences))
        for a, b in self._groups(sentences, sent_ptr, n_states):
            sizes, sp, state0, links, trans = self.joint_tables(sentences[a:b])
            state = joint.product_state(state0, links)
            labels, scores[a:b] = joint.product_viterbi(sizes, sp, state, trans, self.n_threads)
            if marginals:
                m, logz[a:b] = joint.product_marginals(sizes, sp, state, trans, self.n_threads)
            for k in range(b - a):
                for c in range(C):
                    out[c][a + k] = labels[c, sp[k]:sp[k + 1]]
                    if marginals:
                        marg[c][a + k] = m[c][sp[k]:sp[k + 1]]
        return (out, scores, marg, logz) if marginals else out

    def joint_marginals(self, sentences):
        """Exact joint marginals: (per stage, per sentence [tokens, labels] arrays; log Z per sentence)."""
        self._need_exact("joint marginals")
        if not sentences:
            return [[] for _ in self.stages], np.zeros(0)
        self.input_columns(len(sentences[0].rows[0]))
        _, _, marg, logz = self._joint_exact(sentences, marginals=True)
        return marg, logz

    def tag_with_probabilities(self, sentences):
        """Exact joint decoding with probabilities: per sentence (the probability of the best
        joint labeling, per stage its labels, per stage each label's joint marginal)."""
        self._need_exact("probabilities (-v)")
        if not sentences:
            return []
        self.input_columns(len(sentences[0].rows[0]))
        ids, scores, marg, logz = self._joint_exact(sentences, marginals=True)
        names = [np.asarray(s.labels, dtype=object) for s in self.stages]
        C = len(self.stages)
        return [(math.exp(scores[i] - logz[i]), [names[c][ids[c][i]].tolist() for c in range(C)],
                 [marg[c][i][np.arange(len(sent)), ids[c][i]].tolist() for c in range(C)])
                for i, sent in enumerate(sentences)]

    def tag_nbest(self, sentences, k):
        """The k best joint labelings of each sentence (exact joint decoding): per sentence a list
        of (probability, per stage its labels), best first."""
        self._need_exact("n-best lists (-n)")
        if not sentences:
            return []
        self.input_columns(len(sentences[0].rows[0]))
        C = len(self.stages)
        n_states = math.prod(len(s.labels) for s in self.stages)
        lengths = np.array([len(s) for s in sentences], dtype=np.int64)
        _joint_nbest_memory(int(lengths.max()), C, n_states, k, self.n_threads)
        sent_ptr = np.concatenate([[0], np.cumsum(lengths)])
        names = [np.asarray(s.labels, dtype=object) for s in self.stages]
        out = []
        for a, b in self._groups(sentences, sent_ptr, n_states):
            sizes, sp, state0, links, trans = self.joint_tables(sentences[a:b])
            state = joint.product_state(state0, links)
            labels, scores, counts = joint.product_nbest(sizes, sp, state, trans, k, self.n_threads)
            logz = joint.product_log_partition(sizes, sp, state, trans, self.n_threads)
            for i in range(b - a):
                out.append([(math.exp(scores[i, r] - logz[i]),
                             [names[c][labels[r, c, sp[i]:sp[i + 1]]].tolist() for c in range(C)])
                            for r in range(counts[i])])
        return out

    def _need_exact(self, what):
        if self.joint_mode() != "exact":
            raise CrftkError(f"{what} need exact joint decoding: every fed column read at offset 0 only, "
                             f"by first-order CRF stages")

    def _joint_nbest(self, sentences, K, normalized=False):
        """Beam over the stages: each sentence keeps its K best partial labelings (stages 0..i) by
        summed score; each is extended by the K best labelings of stage i+1 given it (the last
        stage: its best one). The score of a stage's labeling is its Viterbi score (the paper's
        eq. 7) or, with ``normalized``, its log-probability given the labels fed to it, the
        stage's log Z subtracted: the beam then maximizes sum_i log p_i(y_i | y_{i-1}, x)."""
        n = len(sentences)
        # hypotheses per sentence: (score, [label id arrays of the stages so far])
        beams = [[(0.0, [])] for _ in range(n)]
        for i, stage in enumerate(self.stages):
            last = i == len(self.stages) - 1
            names_prev = None if i == 0 else np.asarray(self.stages[i - 1].labels, dtype=object)
            grown = [[] for _ in range(n)]
            k = 1 if last else K
            if i and self.links()[i - 1] is None:
                options_of = self._table_options(i, sentences, beams, k, normalized)
            else:
                options_of = self._stage_options(stage, sentences, beams, names_prev, k, normalized)
            for h, owners, options in options_of:
                for s, opts in zip(owners, options):
                    base, labs = beams[s][h]
                    for sc, path in opts:
                        grown[s].append((base + sc, labs + [path]))
            beams = [sorted(g, key=lambda x: -x[0])[:K] for g in grown]
        best = [beam[0][1] for beam in beams]
        return [[best[s][c] for s in range(n)] for c in range(len(self.stages))]

    def _stage_options(self, stage, sentences, beams, names_prev, k, normalized):
        """Yield (rank h, sentences, per sentence the (score, label ids) of the k best labelings of
        ``stage`` fed with its hypothesis h). One batch per rank h, so a batch holds each sentence
        once and in order: first-mention tests (anchored templates) then find the same earlier
        tokens as in the input. Anchored templates get every sentence in every batch (a sentence
        with fewer hypotheses repeats its last one; those results are dropped)."""
        model = stage.model
        anchored = model.space.template.anchored
        # a first stage's log Z is the same for every hypothesis of a sentence: not computed
        normalized = normalized and names_prev is not None
        for h in range(max(len(b) for b in beams)):
            owners = [s for s, b in enumerate(beams) if h < len(b)]
            rows_of = range(len(sentences)) if anchored else owners
            rows = []
            for s in rows_of:
                labs = beams[s][min(h, len(beams[s]) - 1)][1]
                rows.append(stage.rows(sentences[s], None if names_prev is None else names_prev[labs[-1]].tolist()))
            inf = model.structure.bind(model.space.encode(rows), self.n_threads)
            slices = inf.corpus.sentence_slices()
            if k == 1:
                pred, score = inf.best(model.weights)
                options = [[(float(score[r]), pred[slices[r]])] for r in range(len(rows))]
            else:
                paths, scores, counts = _nbest(inf, model, k, self.n_threads)
                options = [[(float(scores[r, j]), paths[j, slices[r]]) for j in range(counts[r])]
                           for r in range(len(rows))]
            if normalized:
                _, logz = inf.marginals(model.weights)
                options = [[(sc - float(logz[r]), path) for sc, path in opts] for r, opts in enumerate(options)]
            if anchored:
                options = [options[s] for s in owners]
            yield h, owners, options

    def _table_options(self, i, sentences, beams, k, normalized):
        """What _stage_options yields, for a stage that reads its fed column at offset 0 only: its
        state potentials for every fed label (joint.FedLink, the sentences encoded once), of which
        each hypothesis picks its rows; Viterbi, k-best and log Z by the product kernels over this
        one chain. Sentences go in runs (joint.sentence_groups) that bound the tables' size."""
        stage, prev = self.stages[i], self.stages[i - 1]
        sizes = np.array([len(stage.labels)], dtype=np.int32)
        link = self._fed_link(i)
        lengths = np.array([len(s) for s in sentences], dtype=np.int64)
        sent_ptr = np.concatenate([[0], np.cumsum(lengths)])
        nt = self.n_threads
        if k > 1:
            _nbest_memory(int(lengths.max()), len(stage.labels), k, nt)
        for a, b in self._groups(sentences, sent_ptr, len(prev.labels) * len(stage.labels)):
            table, corpus = link.tables([stage.rows(s) for s in sentences[a:b]])
            trans = joint.transitions(stage.model, corpus)
            for h in range(max(len(beams[s]) for s in range(a, b))):
                owners = [s for s in range(a, b) if h < len(beams[s])]
                tok = np.concatenate([np.arange(sent_ptr[s], sent_ptr[s + 1]) for s in owners]) - sent_ptr[a]
                fed = np.concatenate([beams[s][h][1][-1] for s in owners])
                state = table[tok, fed]
                tr = [trans if trans.ndim == 2 else trans[tok]]
                sp = np.concatenate([[0], np.cumsum(lengths[owners])])
                if k == 1:
                    pred, score = _product.viterbi(sizes, sp, state, tr, nt)
                    options = [[(float(score[r]), pred[sp[r]:sp[r + 1]])] for r in range(len(owners))]
                else:
                    paths, scores, counts = _product.nbest(sizes, sp, state, tr, k, nt)
                    options = [[(float(scores[r, j]), paths[j, sp[r]:sp[r + 1]]) for j in range(counts[r])]
                               for r in range(len(owners))]
                if normalized:
                    logz, _, _ = _product.forward_backward(sizes, sp, state, tr, nt, edges=False)
                    options = [[(sc - float(logz[r]), path) for sc, path in opts] for r, opts in enumerate(options)]
                yield h, owners, options


def _nbest_memory(max_len, n_labels, k, n_threads):
    need = max_len * n_labels * k * 16 * n_threads
    if need > params.NBEST_MEMORY:
        raise CrftkError(f"{k}-best lists of a sentence of {max_len} tokens and {n_labels} labels "
                         f"would take {need / 2**30:.1f} GiB; ask for fewer (--nbest-upstream)")


def _nbest(inf, model, k, n_threads):
    max_len = int(np.diff(inf.corpus.sent_ptr).max()) if inf.corpus.n_sentences else 0
    _nbest_memory(max_len, model.space.n_labels, k, n_threads)
    return inf.nbest(model.weights, k)


def _nbest_check(k):
    return params.NBEST_UPSTREAM.check(k)


def _column(col, n_columns):
    return col + n_columns if col < 0 else col


def _name(names, i):
    return names[i] if names and names[i] else f"model {i + 1}"


def check_chain(models, feeds, *, names=None, path=None, log=_quiet):
    """Raise CrftkError unless the models can feed each other through the given columns."""
    if len(models) < 2:
        raise UsageError("a pipeline needs at least two models (-m UPSTREAM -m DOWNSTREAM ...)", path)
    if len(models) > MAX_STAGES:
        raise CrftkError(f"a pipeline has at most {MAX_STAGES} stages, not {len(models)}", path)
    if len(feeds) != len(models) - 1:
        raise UsageError(f"{len(models)} models need {len(models) - 1} --feed column"
                         f"{'s' if len(models) > 2 else ''} (one per link), got {len(feeds)}", path)
    for i, m in enumerate(models):
        if m.structure_name == Composed.name:
            raise CrftkError(f"{_name(names, i)} is itself a pipeline; compose its models instead", path)
        if m.kind != "crf":
            hint = {"bag": ": compose the one CRF that 'crftk bag --export' writes",
                    "factorial": ": train one CRF per label column",
                    "semimarkov": ": train the stage with --model-type crf"}.get(m.kind, "")
            raise CrftkError(f"{_name(names, i)} is {m.describe()}; the stages of a pipeline are CRFs (a chain "
                             f"of any order or an MEMM){hint}", path)
        if m.space.n_columns is None:        # an AttributeSpace: no columns for an upstream stage to fill
            raise CrftkError(f"{_name(names, i)} was trained on attributes (feature dicts or a CRFsuite file); the "
                             "stages of a pipeline read CoNLL columns through their templates", path)
        if m.space.template.aggregates:
            # joint decoding sets a fed column token by token, and batches keep documents whole
            # for first mentions only: values read across sentences would be wrong or vary
            raise CrftkError(f"{_name(names, i)} reads across sentences (%doc, %corpus or %ctx), which a "
                             "pipeline's stages cannot: for a CRF reading another's labels over documents, "
                             "train a two-stage model (crftk train --first-stage)", path)
    last = models[-1].space
    n_in = last.n_columns - 1 if last.label_col == last.n_columns - 1 else last.n_columns
    for i, (up, down, feed) in enumerate(zip(models, models[1:], feeds)):
        space = down.space
        where = f"{_name(names, i + 1)} (fed by {_name(names, i)})"
        if type(feed) is not int or not -space.n_columns <= feed < space.n_columns:
            raise CrftkError(f"--feed {feed!r:.20}: {where} has columns 0..{space.n_columns - 1}", path)
        col = _column(feed, space.n_columns)
        if col == space.label_col:
            raise CrftkError(f"--feed {feed}: column {col} is the gold label column of {where}", path)
        if col not in space.template.columns:
            raise CrftkError(f"--feed {feed}: the template of {where} never reads column {col}, so the "
                             f"link would change nothing", path)
        real = next((m for m in space.template.macros if m.real and m.col == col), None)
        if real is not None:
            raise CrftkError(f"--feed {feed}: {where} reads column {col} with %{real.kind} (real values), not as "
                             f"labels: feed a column its string macros (%x, ...) alone read", path)
        produced = list(up.output_labels)
        known = set(space.vocabs[col].strings)
        shared = [x for x in produced if x in known]
        if not shared:
            raise CrftkError(f"the labels of {_name(names, i)} ({', '.join(produced[:5])}"
                             f"{', ...' if len(produced) > 5 else ''}) never occur in column {col} of "
                             f"{where}'s training data: the label sets cannot combine", path)
        unseen = [x for x in produced if x not in known]
        if unseen:
            log(f"crftk: warning: {plural(len(unseen), 'label')} of {_name(names, i)} never occur in column "
                f"{col} of {_name(names, i + 1)}'s training data (no feature fires for them): "
                f"{', '.join(unseen[:10])}{', ...' if len(unseen) > 10 else ''}")
    for i, m in enumerate(models):
        fed = None if i == 0 else _column(feeds[i - 1], m.space.n_columns)
        for c in m.space.template.columns:
            if c != fed and c >= n_in:
                raise CrftkError(f"{_name(names, i)} reads column {c}, which the pipeline's input (the last "
                                 f"model's {plural(n_in, 'input column')}) does not have", path)


def tag_pipeline(pipeline, inputs, out, *, decode="joint", nbest_upstream=20, marginals=0, nbest=0,
                 batch_tokens=50_000, progress=None, log=None, max_sentence_tokens=None, encoding="utf-8"):
    """Tag CoNLL files (in ``encoding``) with a pipeline, appending one label column per stage; returns
    (sentences, tokens, accuracy counts). When the input holds every stage's gold labels
    (the fed columns and the last stage's gold column), the counts give each stage's token
    accuracy and the accuracy of all stages together. ``marginals`` (exact joint decoding
    only): each stage's label is followed by its joint marginal, and each sentence by a line
    ``# prob P``, the probability of the joint labeling. ``nbest`` K (exact joint decoding
    only): the K best joint labelings of each sentence, each after a line ``# nbest k P``."""
    decode, nbest_upstream, nbest = check_tag_options(pipeline, decode, nbest_upstream, marginals, nbest)
    line = decoding_line(pipeline, decode, nbest_upstream)
    if log is not None and line:
        log(line)
    n_sent, n_tok, (correct, scored) = tag_checked(pipeline, inputs, out, decode=decode,
                                                   nbest_upstream=nbest_upstream, marginals=marginals,
                                                   nbest=nbest, batch_tokens=batch_tokens, progress=progress,
                                                   log=log, max_sentence_tokens=max_sentence_tokens,
                                                   encoding=encoding)
    log_accuracy(log, pipeline, correct, scored)
    return n_sent, n_tok, (correct, scored)


def check_tag_options(pipeline, decode, nbest_upstream, marginals, nbest):
    """(decode, nbest_upstream, nbest) checked for tagging with ``pipeline``: UsageError for a
    combination it cannot print."""
    decode = params.DECODE.check(decode)
    if marginals and (decode != "joint" or marginals > 1):
        raise UsageError("a pipeline prints probabilities with -v and --decode joint only (each stage's "
                         "label and its joint marginal)")
    if marginals:
        pipeline._need_exact("probabilities (-v)")
    if nbest and (decode != "joint" or marginals):
        raise UsageError("a pipeline prints n-best lists with --decode joint and without -v only")
    if nbest:
        nbest = params.Integer(1, params.MAX_NBEST).check(nbest, "--nbest")
        pipeline._need_exact("n-best lists (-n)")
    if decode == "normalized" or (decode == "joint" and pipeline.joint_mode() is not None):
        nbest_upstream = _nbest_check(nbest_upstream)
    return decode, nbest_upstream, nbest


def decoding_line(pipeline, decode, nbest_upstream):
    """What tag logs about the decoding before tagging (None: nothing)."""
    if decode == "joint":
        if pipeline.joint_mode() is not None:
            return f"joint decoding: {pipeline.describe_joint(nbest_upstream)}"
        return None
    if decode == "normalized":
        return (f"normalized decoding: the {nbest_upstream} best labelings of each upstream stage, each "
                f"with the best labeling of the next, rescored by the sum of the stages' log-probabilities "
                f"(log p(y1|x) + log p(y2|y1,x) + ...)")
    return "cascade decoding: each stage's Viterbi labels feed the next"


def tag_checked(pipeline, inputs, out, *, decode, nbest_upstream, marginals, nbest, batch_tokens=50_000,
                progress=None, log=None, max_sentence_tokens=None, encoding="utf-8"):
    """tag_pipeline with options from check_tag_options, without its log lines about decoding and
    accuracy: (sentences, tokens, (correct per stage and all stages, tokens scored))."""
    from crftk.io.conll import MAX_SENTENCE_TOKENS
    if max_sentence_tokens is None:
        max_sentence_tokens = MAX_SENTENCE_TOKENS
    allowed = pipeline.input_widths()
    C = len(pipeline.stages)
    correct = np.zeros(C + 1, dtype=np.int64)
    scored = 0
    compiled = None
    if not marginals and not nbest and (pipeline.raw_decodable(decode) or pipeline.raw_beam_decodable(decode)):
        labels = [s.labels for s in pipeline.stages]

        def plain(batch, sep):
            pred = pipeline.decode_raw(batch, decode, nbest_upstream)
            counted = None
            if batch.n_columns == pipeline.n_columns:
                counted = pipeline.raw_gold_correct(batch, pred), batch.n_tokens
            return format_batch(batch, pred, labels, sep), counted
        compiled = plain
    elif (marginals or nbest) and pipeline.raw_decodable("joint"):     # exact joint (check_tag_options)
        def with_probabilities(batch, sep):
            data, pred = _scored_batch(pipeline, batch, sep, nbest)
            # -n counts nothing, as the Python path
            gold = marginals and batch.n_columns == pipeline.n_columns
            return data, (pipeline.raw_gold_correct(batch, pred), batch.n_tokens) if gold else None
        compiled = with_probabilities
    if compiled is not None:
        n_sent, n_tok, found = tag_stream(compiled, inputs, out, allowed, pipeline.n_threads,
                                          batch_tokens=batch_tokens, progress=progress, log=log,
                                          max_sentence_tokens=max_sentence_tokens, encoding=encoding)
        for ok, n in found:
            correct += ok
            scored += n
        return n_sent, n_tok, (correct, scored)
    counts = [0, 0]
    by_document = any(s.space.template.anchored for s in pipeline.stages)
    gold_cols = pipeline.gold_cols
    for batch, sep in input_batches(inputs, allowed, batch_tokens, by_document=by_document,
                                    max_sentence_tokens=max_sentence_tokens, progress=progress, log=log,
                                    counts=counts, encoding=encoding):
        sents = [it for it in batch if not isinstance(it, str)]
        if nbest:
            lists = iter(pipeline.tag_nbest(sents, nbest))
            for it in batch:
                if isinstance(it, str):
                    out.write(it + "\n")
                    continue
                for r, (prob, labels) in enumerate(next(lists)):
                    out.write(f"# nbest {r} {prob:.6f}\n" + "".join(
                        sep.join(row) + sep + sep.join(x) + "\n" for row, x in zip(it.rows, zip(*labels))) + "\n")
            continue
        if marginals:
            tags = iter(pipeline.tag_with_probabilities(sents))
        else:
            tags = iter((None, labels, None) for labels in pipeline.tag(sents, decode, nbest_upstream))
        for it in batch:
            if isinstance(it, str):
                out.write(it + "\n")
                continue
            prob, labels, probs = next(tags)
            rows = it.rows
            if marginals:
                extra = [[x for c in range(C) for x in (labels[c][t], f"{probs[c][t]:.6f}")] for t in range(len(rows))]
                out.write(f"# prob {prob:.6f}\n")
            else:
                extra = list(zip(*labels))
            out.write("".join(sep.join(r) + sep + sep.join(x) + "\n" for r, x in zip(rows, extra)) + "\n")
            if len(rows[0]) == pipeline.n_columns:
                gold = np.array([[r[c] for c in gold_cols] for r in rows], dtype=object)
                ok = gold == np.array(list(zip(*labels)), dtype=object)
                correct[:C] += ok.sum(axis=0)
                correct[C] += ok.all(axis=1).sum()
                scored += len(rows)
    return counts[0], counts[1], (correct, scored)


def _scored_batch(pipeline, batch, sep, nbest):
    """(output bytes, best labels [stages, tokens]) of a RawBatch with -v (``nbest`` 0) or -n, as
    tag_with_probabilities and tag_nbest give them (the same tables, kernels and arithmetic, one
    thread: tag_stream's threads run batches), the rows written by compiled code: each row's
    labels, one per stage (all stages' labels in one list, each stage's ids shifted past the
    previous stages'), with -v each followed by its joint marginal."""
    C, S, N = len(pipeline.stages), batch.n_sentences, batch.n_tokens
    names = [x for s in pipeline.stages for x in s.labels]
    if S == 0:          # pass-through lines alone
        return format_batch(batch, np.zeros((1, 0), dtype=np.int32), [names], sep), np.zeros((C, 0), np.int32)
    sizes = [len(s.labels) for s in pipeline.stages]
    shift = np.cumsum([0] + sizes[:-1])[:, None]
    n_states = math.prod(sizes)
    K = nbest or 1
    sent_ptr = batch.sent_ptr.astype(np.int64)
    if nbest:
        _joint_nbest_memory(int(batch.sentence_lengths().max()), C, n_states, nbest, pipeline.n_threads)
    pred = np.zeros((K, C, N), dtype=np.int64)
    logp = np.zeros((S, K))
    blocks = np.ones(S, dtype=np.int32)
    marg = np.zeros((N, 0 if nbest else sum(sizes)))
    values = [s.space.raw_values(batch) for s in pipeline.stages]
    for a, b in joint.sentence_groups(sent_ptr, n_states):
        lo, hi = int(sent_ptr[a]), int(sent_ptr[b])
        tables, sp, state0, links, trans = pipeline._joint_tables_of([v.sentences(a, b) for v in values])
        state = joint.product_state(state0, links)
        if nbest:
            labels, scores, blocks[a:b] = joint.product_nbest(tables, sp, state, trans, nbest, 1)
            logz = joint.product_log_partition(tables, sp, state, trans, 1)
            pred[:, :, lo:hi] = labels
            logp[a:b] = scores - logz[:, None]
            continue
        pred[0, :, lo:hi], score = joint.product_viterbi(tables, sp, state, trans, 1)
        m, logz = joint.product_marginals(tables, sp, state, trans, 1)
        logp[a:b, 0] = score - logz
        for c in range(C):
            marg[lo:hi, shift[c, 0]:shift[c, 0] + sizes[c]] = m[c]
    ids = pred + shift
    data = format_scored(batch, ids, blocks, logp, marg, None if nbest else ids, names, None, sep,
                         "nbest" if nbest else "prob", per_row=C)
    return data, pred[0].astype(np.int32)


def _joint_nbest_memory(max_len, C, n_states, k, n_threads):
    need = max_len * C * n_states * k * 16 * n_threads
    if need > params.NBEST_MEMORY:
        raise CrftkError(f"{k}-best lists of a sentence of {max_len} tokens over {n_states:,} joint "
                         f"labels would take {need / 2**30:.1f} GiB; ask for fewer")


def log_accuracy(log, pipeline, correct, scored):
    if scored and log is not None:
        C = len(pipeline.stages)
        acc = [f"stage {c + 1} {100 * correct[c] / scored:.2f}" for c in range(C)]
        log(f"token accuracy against the input's columns {pipeline.gold_cols}: {', '.join(acc)}, "
            f"all stages together {100 * correct[C] / scored:.2f}")




class Job(KindJob):
    """crftk tag with a pipeline: cascade, joint or normalized decoding (--decode), the options
    checked against what the pipeline can print."""

    force_refusal = ("a pipeline, whose stages label columns of their own (one forced column "
                     "cannot constrain them all)")

    def __init__(self, model, name, options):
        super().__init__(model, name, options)
        decode, combine, weights = options["decode"], options["combine"], options["weights"]
        if decode not in (None,) + params.DECODE.choices:
            raise UsageError(f"--decode {decode} applies to bags combined by seq-mixture; {name} "
                             "is a pipeline (cascade, joint or normalized)")
        if combine not in (None, "chosen") or weights is not None:
            raise UsageError(f"--combine and --weights are for bags (crftk bag); {name} is a pipeline")
        self.pipeline = Pipeline.from_model(model, name, threads=options["threads"])
        nbest_upstream = options["nbest_upstream"]
        if nbest_upstream is None:
            nbest_upstream = params.NBEST_UPSTREAM.default
        o = self.options
        o["decode"], o["nbest_upstream"], o["nbest"] = check_tag_options(
            self.pipeline, decode or params.DECODE.default, nbest_upstream, options["marginals"], options["nbest"])
        self.by_document = any(s.space.template.anchored for s in self.pipeline.stages)

    def decoding_line(self):
        return decoding_line(self.pipeline, self.options["decode"], self.options["nbest_upstream"])

    def tag(self, out, inputs, **read):
        o = self.options
        return tag_checked(self.pipeline, inputs, out, decode=o["decode"], nbest_upstream=o["nbest_upstream"],
                           marginals=o["marginals"], nbest=o["nbest"], **read)

    def merge(self, gold, more):
        return gold[0] + more[0], gold[1] + more[1]

    def without(self, gold, first):
        return gold[0] - first[0], gold[1] - first[1]

    def report(self, log, gold):
        log_accuracy(log, self.pipeline, *gold)


def summary(model, path=None):
    """``crftk info``'s summary of a pipeline: its stages, links and joint decoding."""
    return Pipeline.from_model(model, path).summary()
