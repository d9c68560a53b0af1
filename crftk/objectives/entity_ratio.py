"""The expected entity ratio loss (Effland & Collins 2021) added to the likelihood.

With only some entities annotated and every other token unknown, the marginal likelihood is
maximized by labeling every unknown token as an entity or as none at all; the hinge
``LAMBDA * N * max(0, |rho_hat - RHO| - GAMMA)`` keeps the model's expected share of entity
tokens, ``rho_hat = E[entity tokens] / N``, near the share RHO the user expects. It is scaled by
the token count N because crftk's likelihood is a sum over tokens, not a mean. The kernel gives
the expected count and its gradient in the likelihood's pass (``loglik(..., entity=mask)``).

The hinge's corner is rounded over the first SMOOTHING of excess (a quadratic there, the hinge
less SMOOTHING / 2 beyond): the paper trains by stochastic gradient steps, which step over the
corner, while L-BFGS's line search needs a continuous gradient; with the bare hinge it failed
within three iterations on CoNLL-2003 (measured), the gradient jumping there by LAMBDA times the
gradient of the expected count.
"""

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.objectives.likelihood import Likelihood


#: The width, in units of the share, over which the hinge's corner is rounded.
SMOOTHING = 0.01


def rounded_hinge(excess):
    """(value, slope) of max(0, excess) with its corner rounded over [0, SMOOTHING]."""
    if excess <= 0.0:
        return 0.0, 0.0
    if excess < SMOOTHING:
        return excess * excess / (2 * SMOOTHING), excess / SMOOTHING
    return excess - SMOOTHING / 2, 1.0


class EntityRatio(Likelihood):
    """Penalized negative log-likelihood (of partial labels, if any) plus the entity ratio hinge.

    ``ratio`` RHO, ``margin`` GAMMA, ``weight`` LAMBDA; ``outside``: the one label that is no
    entity (for label pairs: the current tag's). ``rho_hat``: the expected share at the last pass.
    """

    def __init__(self, inference, *, ratio, margin=0.05, weight=10.0, outside="O", c2=1.0, frozen=None):
        super().__init__(inference, c2=c2, frozen=frozen)
        tags = list(self.structure.output_labels)
        if outside not in tags:
            raise CrftkError(f"--outside-label {shown(outside)} is not a label of the training data, so every "
                             "token would count as an entity: give the label of tokens outside entities")
        self.entity = np.ascontiguousarray([tag != outside for tag in tags], dtype=np.uint8)
        self.ratio, self.margin, self.weight = float(ratio), float(margin), float(weight)
        self.n_tokens = max(1, self.corpus.n_tokens)
        self.rho_hat = None

    def _pass(self, w, h):
        loss, grad, expected, expected_grad = self.inference.loglik(w, self.labels, h, allowed=self.allowed,
                                                                    entity=self.entity)
        self.rho_hat = expected / self.n_tokens
        gap = self.rho_hat - self.ratio
        value, slope = rounded_hinge(abs(gap) - self.margin)
        if slope:        # d/dw of LAMBDA * N * h(|E/N - RHO| - GAMMA) = LAMBDA * h' * sign * dE/dw
            loss = loss + self.weight * self.n_tokens * value
            grad = grad + (self.weight * slope * np.sign(gap)) * np.asarray(expected_grad)
        return loss, grad
