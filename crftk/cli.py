"""The crftk command line: one small function per subcommand."""

import json
import signal
import sys
import threading

import click

# Each command imports the library it runs inside its function: `crftk --help` and a
# mistyped option answer at once, without loading numpy and the kernels.
from crftk import __version__, params
from crftk.errors import CrftkError, UsageError
from crftk.params import MAX_COUNT, MAX_LEXICON_FOLDS, MAX_NBEST, Integer, Real, Threads, column_index

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class CrftkGroup(click.Group):
    """Turns crftk errors into one line on stderr and a non-zero exit, never a traceback.

    Click's own usage errors (a missing option, a bad value) take the same form,
    ``crftk: error: ...``, with the exit status 2 that click gives them.
    """

    def main(self, args=None, prog_name=None, **extra):
        extra.pop("standalone_mode", None)
        previous = _interrupt_on_termination()
        try:
            code = super().main(args=args, prog_name=prog_name, standalone_mode=False, **extra)
        except click.ClickException as e:
            if type(e).__name__ == "NoArgsIsHelpError":     # bare 'crftk': the help, as usual
                click.echo(e.ctx.get_help())
                sys.exit(0)
            where = ""
            ctx = getattr(e, "ctx", None)
            if ctx is not None:
                where = f" (see '{ctx.command_path} --help')"
            message = _sentence(e.format_message())
            if isinstance(e, click.NoSuchOption) and ctx is not None:
                message = _foreign_option_message(e, ctx) or message
            click.echo(f"crftk: error: {message}{where}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("crftk: interrupted", err=True)
            sys.exit(130)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CrftkError as e:
            click.echo(f"crftk: error: {e}", err=True)
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("crftk: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # downstream closed the pipe (e.g. `crftk tag ... | head`): quiet exit
            sys.stderr.close()
            ctx.exit(0)
        except MemoryError:
            click.echo("crftk: error: out of memory (try --min-freq, fewer templates or fewer threads)",
                       err=True)
            ctx.exit(1)


@click.group(cls=CrftkGroup, context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="crftk")
def main():
    """Conditional random fields for sequence labeling on CoNLL column files.

    \b
    Typical use:
      crftk train -t templates/chunking-crfpp.tmpl -m chunk.model train.txt --dev dev.txt
      crftk tag -m chunk.model test.txt > tagged.txt
      crftk eval tagged.txt
    """


def _foreign_option_message(error, ctx):
    """For an option of another CRF tool (--iterations, -c, --maxiter ...), the message that
    names crftk's option for it, or None (then click's guess by spelling stands)."""
    known = {opt for p in ctx.command.params for opt in p.opts + p.secondary_opts}
    hit = params.foreign_option(error.option_name, known)
    if hit is None:
        return None
    option, note = hit
    return f"no such option {error.option_name!r}: did you mean {option}?" + (f" ({note})" if note else "")


def _interrupt_on_termination():
    """SIGTERM and SIGHUP interrupt like Ctrl-C: outputs in progress are removed (or, for
    train, the weights so far are saved) instead of the process dying in mid-write; returns the
    handlers they replace."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    previous = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, interrupt)
    return previous


def _sentence(message):
    """Click's messages start with a capital and end with a period; crftk's lines do neither."""
    message = message.strip().rstrip(".")
    return message[:1].lower() + message[1:] if message[:2] != message[:2].upper() else message


def _log(msg):
    click.echo(msg, err=True)


def threads_option(f):
    return click.option("--threads", "-p", type=Threads(), default=0, show_default=True,
                        help="Worker threads; 0 uses all cores.")(f)


def _option(p, **extra):
    """The click option of a Param declaration: a numeric Param's type is a bounded click type,
    so the CLI and the library share one declaration and its bounds."""
    kind = click.Choice(p.choices) if p.choices else p.type
    names = f"{p.option}/--no-{p.option[2:]}" if isinstance(p.type, params.Flag) else p.option
    return click.option(names, p.name, type=kind, default=p.default, show_default=True, help=p.help,
                        **extra)


def _file_option(*names, help, required=False):
    """An option naming a file (metavar FILE)."""
    return click.option(*names, required=required, metavar="FILE", help=help)


def max_sentence_option(f):
    return _option(params.MAX_SENTENCE_TOKENS)(max_line_option(f))


def _set_max_line_bytes(ctx, param, value):
    from crftk.io.conll import set_max_line_bytes
    set_max_line_bytes(value)


def max_line_option(f):
    """--max-line-bytes: every reader of the process takes it (set as the option is parsed)."""
    p = params.MAX_LINE_BYTES
    return click.option(p.option, type=p.type, default=p.default, show_default=True, help=p.help,
                        metavar="N", expose_value=False, callback=_set_max_line_bytes)(f)


def encoding_option(f):
    return _option(params.ENCODING, metavar="NAME")(f)


def _param_options(declarations, multiple=()):
    """Click options generated from Param declarations (one declaration of each parameter);
    the options named in ``multiple`` may be repeated (their value is then a tuple)."""
    def decorate(f):
        for p in reversed(declarations):
            if p.name == "threads":
                f = threads_option(f)
            elif p.name in multiple:
                f = click.option(p.option, p.name, type=p.type, multiple=True, help=p.help
                                 + f" [default: {p.default}]")(f)
            else:
                f = _option(p)(f)
        return f
    return decorate


def _factorial_options(declarations):
    """Options of factorial CRFs: default None, so that a linear chain can refuse them when given."""
    def decorate(f):
        for p in reversed(declarations):
            kind = click.Choice(p.choices) if p.choices else p.type
            f = click.option(p.option, p.name, type=kind, default=None,
                             help=p.help + f" [default: {p.default}]")(f)
        return f
    return decorate


#: crftk train's options of two-stage models: (option, parameter, metavar, help)
_FIRST_STAGE = (
    ("--first-stage", "first_stage", "MODEL",
     "Train the second stage of a two-stage model (Krishnan & Manning 2006): MODEL (one CRF) tags the input "
     "first, its labels go in as a column at its label column (the gold labels move one right), and --template "
     "reads them there, also aggregated over the document and the corpus (%doc, %corpus). The model file holds "
     "both stages."),
    ("--first-stage-labels", "first_stage_labels", "FILE",
     "With --first-stage (or --init of a two-stage model): read the training data's first-stage labels from "
     "FILE (the training files with the label column replaced, as --first-stage-output writes them) instead of "
     "training K folds."),
    ("--first-stage-output", "first_stage_output", "FILE",
     "With --first-stage (or --init of a two-stage model): also write the out-of-fold first-stage labels (the "
     "training files with the label column replaced; written atomically, and once every fold has finished even "
     "if the second stage's training is then interrupted), for --first-stage-labels."),
)


def _first_stage_options(f):
    """--first-stage, --first-stage-folds, --first-stage-labels, --first-stage-output (listed so)."""
    first, *more = _FIRST_STAGE
    for option, name, metavar, text in reversed(more):
        f = click.option(option, name, metavar=metavar, help=text)(f)
    folds = params.FIRST_STAGE_FOLDS      # default None: given without --first-stage it is refused
    f = click.option(folds.option, folds.name, type=folds.type, default=None, metavar="K",
                     help=folds.help + f"  [default: {folds.default}]")(f)
    option, name, metavar, text = first
    return click.option(option, name, metavar=metavar, help=text)(f)


_train_options = _param_options(params.TRAIN)
_train_command_options = _param_options(params.TRAIN, multiple=("label_col",))
_induce_options = _param_options(params.INDUCE)


@main.command(context_settings=CONTEXT)
@click.argument("train_files", nargs=-1, required=True, metavar="TRAIN_FILE...")
@click.option("--template", "-t", "template", metavar="FILE",
              help="Feature template file (CRF++ syntax); required unless --init is given.")
@click.option("--model", "-m", "model_path", required=True, metavar="FILE",
              help="Where to write the trained model (written atomically).")
@click.option("--dev", "dev_file", metavar="FILE",
              help="Development set scored every iteration; the best iteration's weights are kept.")
@click.option("--trace", "trace_file", metavar="FILE",
              help="Write one line per objective evaluation (TSV): evaluation, forward-backward "
                   "passes, seconds, objective, dev F1 (with --dev).")
@click.option("--init", "init_model", metavar="MODEL",
              help="Start from this model's weights and feature space (MAP weights for --objective "
                   "mce, or a checkpoint to resume from); --template may be omitted, and if given must be "
                   "the model's own.")
@_option(params.INIT_SPACE)
@_option(params.CHECKPOINT_EVERY, metavar="N")
@click.option(params.STREAM.option, params.STREAM.name, is_flag=True, help=params.STREAM.help)
@_option(params.STREAM_BATCH_TOKENS, metavar="N")
@click.option(params.VECTORS.option, "vectors", multiple=True, metavar="NAME=FILE", help=params.VECTORS.help)
@_option(params.VECTORS_LOOKUP)
@_option(params.CROSS_PREDICT, metavar="K")
@click.option("--cross-output", "cross_output", metavar="FILE",
              help="With --cross-predict: the training files with their label column replaced by the "
                   "out-of-fold predictions (written atomically).")
@_first_stage_options
@click.option("--quiet", "-q", is_flag=True, help="Do not log progress to stderr.")
@max_sentence_option
@encoding_option
@_option(params.SCHEDULER, metavar="ADDRESS")
@_option(params.WORKERS, metavar="N")
@_factorial_options(params.FACTORIAL)
@click.option("--warm-start", "warm_start", is_flag=True,
              help="Factorial CRFs, --inference trp: start each objective evaluation's message passing "
                   "from the messages of the one before (a float32 state of about 2 numbers per token "
                   "and label of chains 2..C); fewer sweeps, an objective that depends on the "
                   "evaluations before it.")
@_option(params.DATA_FORMAT)
@_train_command_options
def train(train_files, template, model_path, dev_file, trace_file, init_model, init_space, checkpoint_every, stream,
          stream_batch_tokens, vectors, vectors_lookup, cross_predict, cross_output, first_stage, first_stage_folds,
          first_stage_labels, first_stage_output, quiet, max_sentence_tokens, encoding, scheduler, workers, warm_start,
          format, **options):
    """Train a CRF on CoNLL files (gold label in --label-col, default last column).

    With --scheduler or --workers the objective and gradient are computed data-parallel
    on a Dask cluster (the training data in shards on the workers); the optimizer runs here.

    With two or more --label-col, a factorial CRF (Sutton et al. 2004): one chain per label
    column, adjacent chains coupled at every token by a factor on their label pair (the
    template's P lines condition it on observations); see --inference.
    """
    cols = options.get("label_col") or (-1,)
    options["label_col"] = cols[0] if len(cols) == 1 else list(cols)
    from crftk.progress import Reporter
    from crftk.commands.train import train as run
    run(list(train_files), template, model_path, dev_file=dev_file, trace_file=trace_file, init_model=init_model,
        init_space=init_space, log=Reporter(quiet=quiet), max_sentence_tokens=max_sentence_tokens,
        checkpoint_every=checkpoint_every, cross_predict=cross_predict, cross_output=cross_output,
        vectors=vectors, vectors_lookup=vectors_lookup, scheduler=scheduler, workers=workers, warm_start=warm_start,
        encoding=encoding, data_format=format, first_stage=first_stage, first_stage_folds=first_stage_folds,
        first_stage_labels=first_stage_labels, first_stage_output=first_stage_output, stream=stream,
        stream_batch_tokens=stream_batch_tokens, **options)


@main.command(context_settings=CONTEXT)
@click.argument("train_files", nargs=-1, required=True, metavar="TRAIN_FILE...")
@click.option("--template", "-t", "template", required=True, metavar="FILE",
              help="Template of atomic tests: one macro per U line (a test at one offset), and a "
                   "'B' line for label transitions.")
@click.option("--model", "-m", "model_path", required=True, metavar="FILE",
              help="Where to write the induced model (an ordinary model file; written atomically).")
@click.option("--dev", "dev_file", metavar="FILE", help="Development set scored after every round.")
@click.option("--report", "report_path", metavar="FILE",
              help="Write the features added in each round with their gain, label and starting weight.")
@click.option("--quiet", "-q", is_flag=True, help="Do not log progress to stderr.")
@max_sentence_option
@encoding_option
@_induce_options
def induce(train_files, template, model_path, dev_file, report_path, quiet, max_sentence_tokens, encoding,
           **options):
    """Grow a CRF's features by induction (McCallum 2003): conjunctions of atomic tests that
    raise the likelihood, a round at a time."""
    from crftk.commands.induce import induce as run
    from crftk.progress import Reporter
    run(list(train_files), template, model_path, dev_file=dev_file, report_path=report_path,
        log=Reporter(quiet=quiet), max_sentence_tokens=max_sentence_tokens, encoding=encoding, **options)


@main.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, metavar="[FILE...]")
@click.option("--model", "-m", "model_path", required=True, metavar="FILE", help="Trained model.")
@click.option("--output", "-o", default="-", show_default=True, metavar="FILE|DIR",
              help="Output file ('-' for stdout), or an existing directory: one output per input file, "
                   "named like it. Written atomically (into a directory: all the outputs, or none).")
@click.option("--marginals", "-v", count=True, type=click.IntRange(0, 2),
              help="-v: add the probability of each predicted label and a '# prob P' line with the "
                   "sequence probability per sentence; -vv: also every label's probability "
                   "(like CRF++ -v1/-v2).")
@click.option("--nbest", "-n", type=Integer(0, MAX_NBEST), default=0, show_default=True,
              help="Print the N best labelings of each sentence, each after a '# nbest K P' line "
                   "(P: its probability); with -v each token also gets its label's marginal.")
@click.option("--batch-tokens", type=Integer(1, MAX_COUNT), default=50_000, show_default=True,
              help="Tokens decoded per batch: memory stays bounded on any input size.")
@_option(params.TAG_COMBINE)
@click.option("--weights", "weights", metavar="FILE",
              help="For a bag: its weights from this file ('NAME WEIGHT' per bag, or 'COMBINATION "
                   "NAME=WEIGHT ...' lines) instead of those crftk bag chose.")
@max_sentence_option
@encoding_option
@threads_option
@click.option("--decode", type=click.Choice(params.DECODE.choices + params.TAG_DECODE.choices[1:]),
              default=None, help="Pipelines (crftk compose): cascade, joint or normalized (default joint). "
              + params.DECODE.help.split(". ", 1)[1] + " Bags (crftk bag) combined by seq-mixture: "
              "viterbi or max-marginal (default: the bag's choice).")
@_option(params.NBEST_UPSTREAM, metavar="K")
@_option(params.SCHEDULER, metavar="ADDRESS")
@_option(params.WORKERS, metavar="N")
@_option(params.PIECE_BYTES, metavar="N")
@_factorial_options(params.FACTORIAL)
@_option(params.DATA_FORMAT)
@click.option(params.REFERENCE.option, "reference", is_flag=True, help=params.REFERENCE.help)
@_option(params.FORCE_COL, metavar="COL")
@_option(params.UNKNOWN_LABEL, metavar="TEXT")
def tag(**options):
    """Label CoNLL files (or stdin) with a model: appends the predicted label column (a pipeline
    of crftk compose: one column per stage; a bag of crftk bag: its combination's labels).

    With --scheduler or --workers the files are tagged on a Dask cluster, in pieces cut
    at sentence boundaries.

    The output is written in the input's --encoding.
    """
    # both paths take every option, and build the same TagJob from them
    options["data_format"] = options.pop("format")
    if options["scheduler"] is not None or options["workers"]:
        from crftk.distributed.tagging import run
    else:
        from crftk.commands.tag import run
        for name in ("scheduler", "workers", "piece_bytes"):      # how to cut the files for a cluster
            del options[name]
    run(log=_log, **options)


@main.command(context_settings=CONTEXT)
@click.option("--model", "-m", "models", required=True, multiple=True, metavar="MODEL",
              help="A trained model, upstream first; repeat for each stage (at least two).")
@click.option("--feed", "feeds", required=True, multiple=True, type=column_index(), metavar="COL",
              help="For each link, in order: the input column of the next model that this model's "
                   "predictions fill (e.g. 1, the POS column of a chunker fed by a POS tagger).")
@click.option("--output", "-o", required=True, metavar="PIPELINE",
              help="The pipeline's model file (written atomically); tag it with crftk tag -m.")
@_option(params.MAX_JOINT_LABELS, metavar="N")
def compose(models, feeds, output, max_joint_labels):
    """Compose trained models into a pipeline (Sutton & McCallum 2005): each model's predictions
    fill an input column of the next. `crftk tag -m PIPELINE` decodes it in cascade or jointly."""
    from crftk.commands.compose import compose as run
    run(list(models), list(feeds), output, log=_log, max_joint_labels=max_joint_labels)


@main.command(context_settings=CONTEXT)
@click.argument("train_files", nargs=-1, required=True, metavar="TRAIN_FILE...")
@click.option("--template", "-t", "templates", multiple=True, required=True, metavar="FILE",
              help="A feature bag's template (CRF++ syntax); give one per bag, or one with --random-bags.")
@_file_option("--model", "-m", "model_path", required=True,
              help="Where to write the bag: one model file holding every bag's CRF and the weights.")
@_file_option("--dev", "dev_file", help="Development set on which each combination's weights and the "
                                       "default combination are chosen (unless --cv).")
@_file_option("--weights", "weights_file", help="Use these weights ('NAME WEIGHT' per bag, or 'COMBINATION "
                                               "NAME=WEIGHT ...' lines) instead of choosing them.")
@_file_option("--export", "export_path", help="Also write the seq-poe combination as one ordinary model file "
                                             "(the bags' weights averaged over the union of their "
                                             "features: tags as fast as one CRF).")
@click.option("--quiet", "-q", is_flag=True, help="Do not log progress to stderr.")
@max_sentence_option
@encoding_option
@_param_options(params.BAG)
@_train_options
def bag(train_files, templates, model_path, dev_file, weights_file, export_path, quiet, max_sentence_tokens,
        encoding, **options):
    """Feature bagging (Sutton, Sindelar & McCallum 2006): one CRF per feature bag, combined by
    seq-poe, seq-mixture, trans-mixture or trans-poe (choose at tag time with --combine)."""
    from crftk.commands.bag import bag as run
    from crftk.progress import Reporter
    run(list(train_files), list(templates), model_path, dev_file=dev_file, weights_file=weights_file,
        export_path=export_path, log=Reporter(quiet=quiet), max_sentence_tokens=max_sentence_tokens,
        encoding=encoding, **options)


@main.command("eval", context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE [PRED_FILE]")
@click.option("--gold-col", type=column_index(), multiple=True,
              help="Gold label column (default: second to last with one file, last with two). "
                   "Repeat it with --pred-col to score several pairs of one file (the stages of a "
                   "pipeline, the chains of a factorial CRF) and their joint accuracy.")
@click.option("--pred-col", type=column_index(), multiple=True,
              help="Predicted label column [default: -1]. 'crftk tag' appends one column per stage of a "
                   "pipeline or chain of a factorial model, and -v/-vv add probabilities after each: "
                   "eval refuses columns that cannot be a gold and a predicted labeling (probabilities, "
                   "labels of two tasks) and says which to pass.")
@click.option("--nbest-rank", type=Integer(0, MAX_NBEST - 1), default=0, show_default=True,
              help="Of 'crftk tag -n K' output, score the labelings of this rank, counted from 0 as in "
                   "the '# nbest RANK P' lines: 0 is the best labeling of each sentence, K-1 the last. "
                   "Every sentence needs one (a sentence with fewer than K labelings lists fewer).")
@click.option("--scheme", type=click.Choice(["auto", "iob1", "iob2", "ioe1", "ioe2", "iobes"]),
              default="auto", show_default=True,
              help="Chunk encoding; auto follows conlleval's rules (handles IOB1/IOB2/IOE/IOBES).")
@click.option("--mcnemar", "other", metavar="FILE",
              help="A second system's output on the same data: McNemar's test between the two.")
@click.option("--unit", type=click.Choice(["token", "sentence"]), default="token", show_default=True,
              help="What McNemar's test compares: per-token or per-sentence correctness.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the scores as JSON (precision, recall, F1 and accuracies in percent).")
@max_line_option
@encoding_option
def eval_(files, gold_col, pred_col, nbest_rank, scheme, other, unit, as_json, encoding):
    """Score labels like conlleval: chunk P/R/F1 per type, token and sentence accuracy.

    With one FILE, gold and predicted labels are its last two columns (conlleval's
    convention, as `crftk tag` writes them). With two files, the gold labels come
    from FILE and the predictions from PRED_FILE. Columns that cannot be a gold and
    a predicted labeling (probabilities, labels of two tasks such as the chunk and
    NER columns of an untagged file) are an error that says what to pass. Labels
    without chunk prefixes (POS tags) get token accuracy only.
    """
    from crftk.evaluation.conlleval import evaluate, evaluate_columns, mcnemar, read_labels, refuse_unknown_gold
    if len(files) > 2:
        raise UsageError("eval takes one file (gold and predicted columns) or two (gold, predicted)")
    if len(gold_col) > 1 or len(pred_col) > 1:
        if len(files) != 1 or other or nbest_rank:
            raise UsageError("several --gold-col/--pred-col pairs score one file, without --mcnemar and "
                             "--nbest-rank")
        if len(gold_col) != len(pred_col):
            raise UsageError(f"give as many --gold-col as --pred-col (one pair per chain), not {len(gold_col)} "
                             f"and {len(pred_col)}")
        result = evaluate_columns(files[0], list(gold_col), list(pred_col), scheme=scheme, encoding=encoding)
        click.echo(json.dumps(result.to_dict(), indent=2) if as_json else result.format())
        return
    gold_col = gold_col[0] if gold_col else None
    pred_col = pred_col[0] if pred_col else -1
    labels = read_labels(*files, gold_col=gold_col, pred_col=pred_col, nbest_rank=nbest_rank, encoding=encoding)
    refuse_unknown_gold(labels)
    if labels.nbest:
        _log(f"crftk: note: n-best output ({labels.nbest} labelings per sentence at most): scoring the "
             f"labeling of rank {nbest_rank} of each sentence (--nbest-rank; 0 is the best)")
    result = evaluate(labels.gold, labels.pred, scheme=scheme, locate=labels.locate)
    test = None
    if other:
        theirs = read_labels(other, gold_col=-2 if gold_col is None else gold_col, pred_col=pred_col,
                             nbest_rank=nbest_rank, encoding=encoding)
        theirs.check_same_gold(labels)
        test = mcnemar(labels.gold, labels.pred, theirs.pred, unit=unit)
    if as_json:
        doc = result.to_dict()
        if labels.nbest:
            doc["nbest_rank"] = nbest_rank
        if test is not None:
            doc["mcnemar"] = test.to_dict()
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(result.format())
        if test is not None:
            click.echo(test.format())


@main.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="LABELED_FILE...")
@click.option("--output", "-o", "out_dir", required=True, metavar="DIR",
              help="Directory for the lexicons: one TYPE.lex file per entity type (made if missing; its "
                   "parent must exist, as for every output).")
@click.option("--label-col", type=column_index(), default=-1, show_default=True, help="Gold label column.")
@click.option("--scheme", type=click.Choice(["auto", "iob1", "iob2", "ioe1", "ioe2", "iobes"]),
              default="auto", show_default=True, help="Chunk encoding of the labels.")
@click.option("--folds", type=Integer(2, MAX_LEXICON_FOLDS, also=(0,)), default=0, show_default=True,
              help="Jackknife: record in which of K folds of documents (document number mod K) each "
                   "entry occurs; a training token then only matches entries seen in other folds, so "
                   "training entries do not leak into their own features. 0: no jackknife.")
@click.option("--icase", is_flag=True, help="Match ignoring case.")
@click.option("--min-count", type=Integer(1, MAX_COUNT), default=1, show_default=True,
              help="Keep entries seen at least this many times.")
@max_line_option
@encoding_option
def lexicon(inputs, out_dir, label_col, scheme, folds, icase, min_count, encoding):
    """Build one lexicon per entity type from labeled CoNLL files (WebListing's seed step).

    Use them in a template with '@lexicon NAME DIR/TYPE.lex' and '%lex[row,NAME]'. The
    lexicons are written in UTF-8 whatever the input's --encoding (templates read them so).
    """
    from crftk.features.lexicon import lexicon_command
    from crftk.progress import Reporter
    lexicon_command(list(inputs), out_dir, label_col=label_col, scheme=scheme, folds=folds,
                    ignore_case=icase, min_count=min_count, log=Reporter(), encoding=encoding)


@main.command(context_settings=CONTEXT)
@click.argument("model_path", metavar="MODEL")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def info(model_path, as_json):
    """Summarise a model: labels, templates, features, training record."""
    from crftk.kinds import kind_of
    from crftk.model import Model, format_summary
    model = Model.load(model_path)
    summary = kind_of(model).summary(model, model_path)
    click.echo(json.dumps(summary, indent=2) if as_json else format_summary(summary))


@main.command(context_settings=CONTEXT)
@click.argument("model_path", metavar="MODEL")
@click.option("--output", "-o", default="-", show_default=True, metavar="FILE", help="Output file.")
@click.option("--min-abs", type=Real(0), default=0.0, show_default=True,
              help="Only state/edge features whose |weight| exceeds this (0: all non-zero).")
def dump(model_path, output, min_abs):
    """Write a model's weights as text (like CRF++ -t or crfsuite dump)."""
    from crftk.io.atomic import AtomicWriter
    from crftk.io.outputs import check_apart, check_output
    from crftk.kinds import kind_of
    from crftk.model import Model
    check_output(output)
    check_apart([("output", output)], [("model", model_path)])
    model = Model.load(model_path)
    with AtomicWriter(output) as out:
        kind_of(model).dump(model, out, min_abs=min_abs)


if __name__ == "__main__":
    main(prog_name="crftk")
