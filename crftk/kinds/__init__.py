"""Kinds of model file, each owning its runtime: how crftk tag tags with it (its tagger and
the tag options it takes), its crftk info summary and its crftk dump text.

A model file's kind is read from it (crftk.model.Model.kind: its structure, and a bag's record);
the module of each kind gives ``NAME``, ``Job`` (crftk.kinds.base.Job: crftk tag's options checked
against the kind, and the tagging), ``summary(model, path)`` and ``dump(model, out, min_abs=)``.
A kind that trains gives a trainer too (the training driver's questions, crftk.training.driver),
which ``trainer_for`` picks from the training options. A new kind is a module here, registered in
``KINDS`` (and, if it trains, in ``trainer_for``). A model that crftk induce grows is a chain
CRF like any other (same structure, same runtime): the "crf" kind.
"""

from crftk.kinds import bag, chain, factorial, pipeline, semimarkov, twostage
from crftk.kinds.bag import tagger_for  # noqa: F401 (the tagger of a CRF or a bag)

#: kind name (crftk.model.KINDS) -> the module of that kind
KINDS = {k.NAME: k for k in (chain, bag, pipeline, factorial, twostage, semimarkov)}


def kind_of(model):
    """The module of a model's kind."""
    return KINDS[model.kind]


def trainer_for(options, inference=None, tolerance=None, max_sweeps=None, warm_start=False):
    """The trainer (crftk.training.driver) of the kind the training options ask for: a factorial
    CRF for two or more label columns (``options["label_col"]`` is then removed), a semi-Markov CRF
    for --model-type semimarkov, else a chain; those two refuse the factorial options."""
    trainer = factorial.trainer(options, inference, tolerance, max_sweeps, warm_start)
    if trainer is not None:
        return trainer
    trainer = semimarkov.trainer(options)
    if trainer is not None:
        factorial.refuse_factorial_options(inference, tolerance, max_sweeps, warm_start)
        return trainer
    return chain.ChainTrainer.refusing(inference, tolerance, max_sweeps, warm_start)
