"""crftk compose: trained models into one pipeline file (crftk.kinds.pipeline decodes it).

The file holds the stages (one part each) and, for each link, the column of stage i+1 that
stage i's predictions fill.
"""

import math

from crftk import params
from crftk.errors import CrftkError
from crftk.kinds.pipeline import Pipeline, _quiet
from crftk.kinds.pipeline import tag_pipeline  # noqa: F401 (re-exported: crftk.commands.compose.tag_pipeline)
from crftk.model import Model


def compose(model_paths, feeds, output, *, log=_quiet, max_joint_labels=params.MAX_JOINT):
    """Write the pipeline of the given model files (``feeds[i]``: the column of model i+1
    that model i's labels fill) to ``output``; returns the Pipeline. A joint label set (the
    product of the stages' label counts) of more than ``max_joint_labels`` is refused."""
    from crftk.io.conll import check_inputs
    from crftk.io.outputs import check_apart, check_output
    max_joint_labels = params.MAX_JOINT_LABELS.check(max_joint_labels)
    check_output(output, "pipeline")
    check_inputs(model_paths)
    check_apart([("pipeline", output)], [("stage model", list(model_paths))])
    models = []
    for p in model_paths:
        m = Model.load(p)
        models.append(m)
    names = [str(p) for p in model_paths]
    pipeline = Pipeline.from_models(models, list(feeds), names=names, log=log)
    _check_joint_size([len(s.labels) for s in pipeline.stages], max_joint_labels)
    pipeline.info["composed_from"] = names
    for s, p in zip(pipeline.stages, names):
        s.name = p
    pipeline.save(output)
    links = "; ".join(f"{s.name} fills column {t.feed} of {t.name}"
                      for s, t in zip(pipeline.stages, pipeline.stages[1:]))
    log(f"composed {len(models)} models into {output}: {links}")
    desc = pipeline.describe_joint("--nbest-upstream K")
    if desc:
        log(f"crftk tag --decode joint: {desc}")
    return pipeline


def _check_joint_size(label_counts, most):
    """CrftkError when the product of the stages' label counts exceeds ``most`` (it would
    only fail at tag time, out of memory)."""
    joint = math.prod(label_counts)
    if joint > most:
        raise CrftkError(f"the joint label set has {joint:,} labels ({' x '.join(map(str, label_counts))}), more "
                         f"than --max-joint-labels {most:,}: joint decoding keeps tables of that many labels "
                         f"per token (raise the limit if the memory is there)")
