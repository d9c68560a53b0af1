"""crftk bag: read the files, train a bag of CRFs (Sutton, Sindelar & McCallum 2006;
crftk.training.bagging: one CRF per template or per random subset of one template's U lines,
the combinations' weights chosen on held-out data), save it as one model file
(crftk.ensemble.bag) and, if asked, its per-sequence product of experts as one ordinary model
(crftk.ensemble.merge). ``tag`` uses the combination and weights chosen here unless told
otherwise."""

import os
import sys

from crftk import params
from crftk.commands.train import data_inputs, template_inputs, training_files
from crftk.ensemble.bag import Bag
from crftk.ensemble.merge import seq_poe_model
from crftk.features.extract import load_lexicons
from crftk.features.templates import read_template
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, check_inputs, read_corpus
from crftk.io.outputs import check_apart, check_output
from crftk.training.bagging import BagInterrupted, fit_bag


def _stderr_log(msg):
    print(msg, file=sys.stderr, flush=True)


def _silent(msg):
    pass


def bag(train_files, templates, model_path=None, *, dev_file=None, weights_file=None, export_path=None,
        log=_stderr_log, max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING, **options):
    """Train a bag from CoNLL files (in ``encoding``) and template files; saves it to model_path (if
    given), the seq-poe model to export_path (if given), and returns the bag's Model.

    ``options``: the bag options (params.BAG) and the training options (params.TRAIN).
    Every output is checked before work starts and written only when all of it is done.
    """
    log = log or _silent
    encoding = params.ENCODING.check(encoding)
    check_output(model_path, "model")
    check_output(export_path, "exported model")
    train_files = training_files(train_files)
    if isinstance(templates, (str, os.PathLike)):
        templates = [templates]
    check_inputs([*train_files, *templates, dev_file, weights_file])
    parsed = [read_template(str(t)) for t in templates]
    for t in parsed:
        load_lexicons(t)          # every input before any work (fit_bag checks them again, cheaply)
    check_apart([("model", model_path), ("exported model", export_path)],
                [*data_inputs(train_files, dev_file), ("weights file", weights_file),
                 *(i for t in parsed for i in template_inputs(t))])
    sentences = read_corpus(train_files, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
    dev = None
    if dev_file is not None:
        dev = read_corpus(dev_file, max_sentence_tokens=max_sentence_tokens, encoding=encoding) or None
        if dev is None:
            log(f"crftk: warning: the development set {dev_file} has no sentences; it is not used")
    try:
        model = fit_bag(sentences, parsed, dev=dev, weights_file=weights_file, log=log, source=train_files[0],
                        keep_on_interrupt=model_path is not None, **options)
    except BagInterrupted as e:
        if model_path is not None:
            _save_members(e, model_path, log)
        raise
    exported = None
    if export_path is not None:
        exported = seq_poe_model(Bag.from_model(model), model.info["bag"]["weights"]["seq-poe"])
    model.info.update(train_files=train_files, dev_file=None if dev_file is None else str(dev_file))
    if model_path is not None:
        model.save(model_path)
        log(f"saved {model_path}")
    if exported is not None:
        exported.save(export_path)
        log(f"saved the seq-poe model (one CRF, the weighted average of the bags) to {export_path}")
    if model.info["bag"].get("interrupted"):
        raise KeyboardInterrupt     # saved; the command still ends as interrupted
    return model


def _save_members(interrupted, model_path, log):
    """An interrupted bag without weights for every member: the members that have some, each as
    an ordinary model beside the bag (to resume with crftk train --init)."""
    saved = []
    for name, member in zip(interrupted.names, interrupted.members):
        if member is not None:
            path = f"{model_path}.{name}.model"
            member.save(path)
            saved.append(path)
    missing = [n for n, m in zip(interrupted.names, interrupted.members) if m is None]
    log(f"interrupted before {', '.join(missing)} had weights: no bag saved"
        + (f"; the members trained so far saved to {', '.join(saved)}" if saved else ""))
