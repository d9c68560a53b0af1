"""The "two-stage" kind (Krishnan & Manning 2006): a first CRF tags the input, its labels go into a
column, and a second CRF, whose template reads them aggregated over the document and the corpus
(``%doc``/``%corpus``, crftk.features.aggregates), tags again. One model file holds both stages.

The first stage's labels sit in the second stage's layout at the first stage's label column (the
gold labels, when present, move one column right): for ``word POS chunk NER`` files the second
stage reads ``word POS chunk FIRST NER``, its template the first stage's labels in column 3.
``crftk train --first-stage MODEL`` trains the second stage on out-of-fold labels of the first
stage's configuration (crftk.training.twostage); ``crftk tag`` runs both stages on whole
documents, and on whole input files when the template reads ``%corpus``: the corpus is the file
being tagged.
"""

from crftk.errors import CrftkError, UsageError
from crftk.features.templates import AGGREGATES
from crftk.io.conll import Sentence, Widths, model_widths
from crftk.kinds import base, chain
from crftk.model import CHAIN_STRUCTURES, Model, Part, _check_kind, check_chain_model
from crftk.structures.twostage import TwoStage as TwoStageStructure

NAME = "two-stage"


class TwoStage:
    """A first-stage CRF and a second one that reads its labels in column ``col``."""

    def __init__(self, first, second, col, info=None, *, path=None):
        self.first, self.second, self.col = first, second, col
        self.info = dict(info or {})
        self.path = path
        check_stages(first, second, col, path)

    @property
    def corpus_level(self):
        """Whether the second stage reads %corpus aggregates (then a whole input file is its corpus)."""
        return chain.whole_files(self.second.space.template)

    def second_sentences(self, sentences, labels):
        """The sentences in the second stage's layout (:func:`with_first_labels`)."""
        return with_first_labels(sentences, labels, self.col)

    # files ----------------------------------------------------------------------------
    @classmethod
    def load(cls, path):
        return cls.from_model(Model.load(path), path)

    @classmethod
    def from_model(cls, model, path=None):
        model.require_kind(NAME, "crftk.TwoStage.load", path=path)
        spec = model.info.get("two_stage")

        def bad(what):
            return CrftkError(f"two-stage model file is inconsistent: {what}", path)

        if not isinstance(spec, dict) or not isinstance(spec.get("stages"), list) or len(spec["stages"]) != 2:
            raise bad("it does not describe its two stages")
        col = spec.get("column")
        if type(col) is not int:
            raise bad("it names no column for the first stage's labels")
        stages = []
        for i, (entry, part) in enumerate(zip(spec["stages"], model.parts)):
            structure, info = (entry.get("structure"), entry.get("info")) if isinstance(entry, dict) else (None, None)
            if structure not in CHAIN_STRUCTURES or not isinstance(info, dict):
                raise bad(f"stage {i + 1} has no valid structure or record")
            _check_kind(info, path)
            check_chain_model(structure, info, part.space, path, where=f"stage {i + 1}: ")
            given = (info.get("options") or {}).get("label_col") if isinstance(info.get("options"), dict) else None
            if type(given) is int and given % part.space.n_columns != part.space.label_col:
                raise bad(f"stage {i + 1}'s record was trained on label column {given}, its features on "
                          f"{part.space.label_col}")
            stages.append(Model(part.space, part.weights, info, structure=structure))
        return cls(stages[0], stages[1], col, model.info, path=path)

    def to_model(self):
        """Both stages as one Model (structure ``twostage``, parts ``first`` and ``second``)."""
        entries = [{"structure": m.structure_name, "info": {k: v for k, v in m.info.items() if k != "history"}}
                   for m in (self.first, self.second)]
        info = dict(self.info)
        info["two_stage"] = {"stages": entries, "column": self.col}
        model = Model(self.first.space, self.first.weights, info, structure=TwoStageStructure.name,
                      more_parts=[Part(self.second.space, self.second.weights, "second")])
        model.parts[0].name = "first"
        return model

    def input_widths(self):
        """The column counts of the input (crftk.io.conll.Widths): the first stage's layout, at least
        up to the column the first stage's labels go in (else they would land short of it) and
        every column either stage reads; the gold labels may be left out."""
        c = self.col
        reads = set(self.first.space.template.columns)
        reads |= {k if k < c else k - 1 for k in self.second.space.template.columns if k != c}
        n = self.first.space.n_columns
        needs = model_widths(reads, n, "the two-stage model", "the {n} its first stage was trained on").needs
        return Widths(range(max(max(reads, default=0) + 1, c), n + 1),
                      f"{needs}; its first stage's labels go in as column {c}")

    def save(self, path):
        self.to_model().save(path)

    def summary(self):
        """``crftk info``'s summary: each stage's labels and size, and where the second reads the first."""
        stages = {}
        for i, m in enumerate((self.first, self.second)):
            space = m.space
            stages[f"stage{i + 1}"] = {
                "structure": m.structure_name, "labels": list(m.output_labels), "columns": space.n_columns,
                "label_column": space.label_col, "attributes": space.n_attrs, "parameters": space.n_params,
                "iterations": m.info.get("iterations"), "converged": m.info.get("converged")}
        aggregates = sorted({str(m) for m in self.second.space.template.macros if m.kind in AGGREGATES})
        return {"structure": TwoStageStructure.name, "stages": stages, "first_stage_column": self.col,
                "aggregates": aggregates, "corpus": "each input file" if self.corpus_level else None,
                "out_of_fold": self.info.get("out_of_fold")}


def with_first_labels(sentences, labels, col):
    """The sentences with the first stage's labels (one list per sentence) inserted at column ``col``."""
    return [Sentence([row[:col] + [lab] + row[col:] for row, lab in zip(s.rows, tags)], s.doc, s.line, s.source)
            for s, tags in zip(sentences, labels)]


def check_stages(first, second, col, path=None):
    """The second stage's layout is the first's with one column inserted at ``col``, its labels'."""
    def bad(what):
        return CrftkError(f"two-stage model is inconsistent: {what}", path)

    n1, n2 = first.space.n_columns, second.space.n_columns
    if n2 != n1 + 1:
        raise bad(f"the second stage reads {n2} columns, the first {n1}: it must read one more (the first "
                  "stage's labels)")
    if not 0 <= col < n2 or col == second.space.label_col or col != first.space.label_col:
        raise bad(f"the first stage's labels are in column {col}, which is not the first stage's label column")


class Tagger(chain.Tagger):
    """Decodes batches of whole documents: the first stage, then the second on its labels; --force-col
    constrains the second stage, whose labels are the output (the first stage's are features)."""

    compiled = False

    def __init__(self, two, *, threads=0, force=None):
        super().__init__(two.second, threads=threads, force=force)
        self.two = two
        self.first = chain.Tagger(two.first, threads=threads)

    def inference(self, sentences):
        second = self.two.second_sentences(sentences, self.first.tag(sentences))
        return self.structure.bind(self.space.encode(second), self.n_threads)

    def spaces(self):
        return [self.first.space, self.space]

    def input_widths(self):
        """The first stage's layout, as both stages read it (TwoStage.input_widths)."""
        return self.two.input_widths()


class Job(chain.Job):
    """crftk tag with a two-stage model: whole documents (whole files for %corpus) through both stages."""

    def make_tagger(self):
        o = self.options
        if o["combine"] not in (None, "chosen") or o["weights"] is not None:
            raise UsageError(f"--combine and --weights are for bags (crftk bag); {self.name} is a two-stage model")
        self.two = TwoStage.from_model(self.model, self.name)
        return Tagger(self.two, threads=o["threads"], force=self.force())

    def decoding_line(self):
        if self.two.corpus_level:
            return "two-stage model: the corpus of its %corpus features is each input file, tagged whole"
        return "two-stage model: documents are tagged whole"

    def tag(self, out, inputs, **read):
        o = self.options
        return chain.tag_with(self.tagger, inputs, out, marginals=o["marginals"], nbest=o["nbest"], **read) + (None,)


def dump(model, out, *, min_abs=0.0):
    """``crftk dump``: each stage's weights, once the file's two stages are checked."""
    TwoStage.from_model(model, model.source)
    base.dump(model, out, min_abs=min_abs)


def summary(model, path=None):
    return TwoStage.from_model(model, path).summary()
