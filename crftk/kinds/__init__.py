"""Kinds of model file, each owning its runtime: how crftk tag tags with it (its tagger and
the tag options it takes), its crftk info summary and its crftk dump text.

A model file's kind is read from it (crftk.model.Model.kind: its structure, and a bag's record);
the module of each kind gives ``NAME``, ``Job`` (crftk.kinds.base.Job: crftk tag's options checked
against the kind, and the tagging), ``summary(model, path)`` and ``dump(model, out, min_abs=)``.
A kind that trains gives a trainer too (the training driver's questions, crftk.training.driver),
which ``trainer_for`` picks from the training options. A new kind is a module here, registered in
``KINDS`` (its module's path; and, if it trains, in ``trainer_for``). A model that
crftk induce grows is a chain CRF like any other (same structure, same runtime): the "crf" kind.
"""

from crftk.kinds.base import refuse_factorial_training
from crftk.registry import LazyRegistry

#: kind name (crftk.model.KINDS) -> the module of that kind, imported when first asked for: a
#: process that trains one kind loads no other kind's modules and kernels
KINDS = LazyRegistry({"crf": "crftk.kinds.chain", "bag": "crftk.kinds.bag", "pipeline": "crftk.kinds.pipeline",
                      "factorial": "crftk.kinds.factorial", "two-stage": "crftk.kinds.twostage",
                      "semimarkov": "crftk.kinds.semimarkov"})


def kind_of(model):
    """The module of a model's kind."""
    return KINDS[model.kind]


def tagger_for(model, **options):
    """The tagger of a CRF or a bag (crftk.kinds.bag.tagger_for)."""
    from crftk.kinds.bag import tagger_for as bag_tagger_for
    return bag_tagger_for(model, **options)


def trainer_for(options, inference=None, tolerance=None, max_sweeps=None, warm_start=False):
    """The trainer (crftk.training.driver) of the kind the training options ask for: a factorial
    CRF for two or more label columns (``options["label_col"]`` is then removed), a semi-Markov CRF
    for --model-type semimarkov, else a chain; those two refuse the factorial options. (A list of
    label columns or the semi-Markov model type is what imports those kinds.)"""
    if isinstance(options.get("label_col"), (list, tuple)):
        trainer = KINDS["factorial"].trainer(options, inference, tolerance, max_sweeps, warm_start)
        if trainer is not None:
            return trainer
    if options.get("model_type") == "semimarkov":
        trainer = KINDS["semimarkov"].trainer(options)
        refuse_factorial_training(inference, tolerance, max_sweeps, warm_start)
        return trainer
    return KINDS["crf"].ChainTrainer.refusing(inference, tolerance, max_sweeps, warm_start)
