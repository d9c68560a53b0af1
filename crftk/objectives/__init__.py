"""Training objectives: callables ``(params) -> (value, gradient)`` over a structure's inference.

likelihood: the penalized negative log-likelihood (MAP training) of any structure;
mce: Suzuki et al.'s minimum classification error objectives for first-order chains;
penalty: the L2 term and the frozen parameters, shared by all of them.
"""

from crftk.objectives.likelihood import Likelihood, label_counts
from crftk.objectives.penalty import Penalty

__all__ = ["Likelihood", "Penalty", "label_counts"]
