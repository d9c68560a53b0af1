"""What every kind of model file gives (crftk.kinds): how ``crftk tag`` tags with it, its
``crftk info`` summary and its ``crftk dump`` text. A kind module subclasses :class:`Job` and
overrides what differs from one CRF."""

from crftk import params
from crftk.errors import CrftkError


class Job:
    """``crftk tag`` with a model of one kind: the options (crftk.commands.tag.JOB_OPTIONS)
    checked against the kind, defaults filled in (``options``), and the tagging itself.

    ``tag`` returns (sentences, tokens, gold): ``gold`` is what ``report`` scores against
    the input's gold columns (None: nothing); ``merge``/``without`` add and remove the gold
    evidence of runs over pieces of one input (crftk.distributed.tagging), never given None.
    """

    #: whether the input must be cut between documents only (a template reads first mentions)
    by_document = False
    #: why the kind takes no --force-col (None: it does)
    force_refusal = "its decoding takes no constraints"

    def __init__(self, model, name, options):
        refuse_factorial_options(model, name, options)
        refuse_forcing(self, name, options)
        self.model, self.name = model, name
        self.options = dict(options)

    def decoding_line(self):
        """What tag logs once before tagging about how it decodes (None: nothing)."""
        return None

    def tag(self, out, inputs, **read):
        raise NotImplementedError

    def merge(self, gold, more):
        return more

    def without(self, gold, first):
        return gold

    def report(self, log, gold):
        pass


def refuse_forcing(job, name, options):
    """--force-col (constrained decoding) where the kind's job takes it; else one line saying why."""
    if options.get("force_col") is not None and job.force_refusal is not None:
        raise CrftkError(f"--force-col: {name} is {job.force_refusal}")


def refuse_factorial_options(model, name, options):
    """--inference, --tolerance and --max-sweeps are for factorial models only."""
    if (options["inference"], options["tolerance"], options["max_sweeps"]) != (None, None, None):
        raise CrftkError(f"--inference, --tolerance and --max-sweeps are for factorial models; {name} "
                         f"is a {model.structure_name} model")


def refuse_factorial_training(inference=None, tolerance=None, max_sweeps=None, warm_start=False):
    """A linear chain (one label column) takes none of the factorial options: bad input, exit 1
    (issue 16), like a label column that does not exist. (Here, not in kinds.factorial, so that
    training a chain does not import the factorial kind.)"""
    given = [p.option for p, v in zip(params.FACTORIAL, (inference, tolerance, max_sweeps)) if v is not None]
    given += ["--warm-start"] if warm_start else []
    if given:
        raise CrftkError(f"{', '.join(given)} {'is an option' if len(given) == 1 else 'are options'} of factorial "
                         f"CRFs: give two or more --label-col (one per chain)")


def summary(model, path=None):
    """``crftk info``'s summary (a dict) of a model of a kind whose file says it all."""
    return model.summary()


def dump(model, out, *, min_abs=0.0):
    """``crftk dump``: the weights as text."""
    model.dump(out, min_abs=min_abs)
