"""crftk induce: read the files, grow a chain CRF's features (crftk.training.induction), write the
model and the report of the features added."""


import time

from crftk import params
from crftk.commands.train import _stderr_log, data_inputs, template_inputs
from crftk.errors import CrftkError
from crftk.features.extract import load_lexicons
from crftk.features.templates import read_template
from crftk.io.atomic import AtomicWriter
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, check_inputs, read_corpus
from crftk.io.outputs import check_apart, check_output
from crftk.progress import status
from crftk.training.induction import Inducer, induce_rounds

INDUCE_PARAMS = params.INDUCE
DEFAULTS = params.defaults(INDUCE_PARAMS)


def check_options(options, log=_stderr_log):
    """All induction options, defaults filled in, checked against INDUCE_PARAMS; CrftkError
    on a bad value (a thread count above the cap is cut, with a warning)."""
    return params.check_params(INDUCE_PARAMS, options, "induction", warn=log)


def induce(train_files, template_path, model_path=None, *, dev_file=None, report_path=None,
           log=_stderr_log, max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING, **options):
    """Induce features on the training files (in ``encoding``, as the dev file); saves the model
    (if model_path) and returns it."""
    opt = check_options(options, log)
    encoding = params.ENCODING.check(encoding)
    if max_sentence_tokens is not None:      # None: no limit
        max_sentence_tokens = params.MAX_SENTENCE_TOKENS.check(max_sentence_tokens)
    if isinstance(train_files, str):
        train_files = [train_files]
    check_output(model_path, "model")
    check_output(report_path, "report")
    check_inputs([*train_files, dev_file, template_path])
    t0 = time.perf_counter()
    template = read_template(template_path)
    template.refuse_segments()
    load_lexicons(template)            # every input before any work
    check_apart([("model", model_path), ("report", report_path)],
                [*data_inputs(train_files, dev_file), *template_inputs(template)])
    if not template.label_bigram:
        raise CrftkError("induce needs a label bigram: add a line 'B' to the template", template_path)
    real = next((line for line in template.unigrams if line.real is not None), None)
    if real is not None:
        raise CrftkError(f"induce conjoins tests of strings; %{real.real.kind} makes real-valued attributes "
                         "(train them with crftk train)", template.path, real.lineno)
    status(log, "reading and encoding the training data ...")
    sentences = read_corpus(train_files, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
    if not sentences:
        raise CrftkError("no training sentences", train_files[0])
    ind = Inducer(sentences, template, opt, log)
    log(f"read {len(sentences)} sentences, {ind.gold.size} tokens; {ind.atomic.n_labels} labels, "
        f"{ind.n_tests} atomic tests from {len(template.unigrams)} template lines "
        f"({time.perf_counter() - t0:.1f}s)")
    dev_sents = (read_corpus(dev_file, n_columns=ind.atomic.n_columns, max_sentence_tokens=max_sentence_tokens,
                             encoding=encoding) if dev_file else [])

    model, report = induce_rounds(ind, opt, dev_sents, log, t0, train_files=train_files, dev_file=dev_file)
    if report_path is not None:
        with AtomicWriter(report_path) as out:
            out.write("# gain\tlabel\tweight\tfeature (atomic tests joined by &)\n")
            out.write("\n".join(report) + "\n")
    if model_path is not None:
        model.save(model_path)
        log(f"saved {model_path}: {ind.n_features()} features on {len(ind.predicates)} predicates, "
            f"{model.info['rounds']} rounds, {model.info['seconds']:.1f}s")
    return model
