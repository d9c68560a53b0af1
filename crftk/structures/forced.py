"""Constrained decoding (crftk tag --force-col, CRF.predict(constraints=...)): each token's
annotation, a known label, unknown (any label) or a set of labels, as the uint8 [tokens, states]
mask that the chain kernels take as ``allowed``, checked against the model's pinned transitions.

In a file a cell is a label, the unknown marker (``--unknown-label``, ``?``) or labels joined by
``|``; in Python a token's annotation is a label, None, or a set (any collection) of labels.
"""

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.io.partial import SET_SEP
from crftk.structures.constraints import FORBIDDEN, first_infeasible


def name_mask(annotations, names, locate, what="forced label"):
    """uint8 [tokens, len(names)]: 1 where a token's annotation allows the name. ``locate(t)``
    gives the (file, line) of token t for the message naming a label outside ``names``."""
    index = {n: j for j, n in enumerate(names)}
    mask = np.ones((len(annotations), len(names)), dtype=np.uint8)
    for t, a in enumerate(annotations):
        if a is None:
            continue
        labels = (a,) if isinstance(a, str) else tuple(a)
        single = len(labels) == 1
        if not labels:
            raise CrftkError("an empty set of labels allows no labeling", *locate(t))
        row = mask[t]
        row[:] = 0
        for lab in labels:
            j = index.get(lab)
            if j is None:
                said = (f"{what} {shown(lab)} is" if single else
                        f"the set {shown(SET_SEP.join(map(str, labels)))} names {shown(lab)}, which is")
                raise CrftkError(f"{said} not one of the model's {len(names)} labels", *locate(t))
            row[j] = 1
    return mask


def recoded_mask(mask, recoder, sent_ptr):
    """A mask over a Recoder's corpus-scheme names converted to one over the model's training
    labels (crftk.io.schemes.Recoder), token by token: a training label is allowed where, with
    some neighbours (the sentence boundary at either end), it converts to an allowed name."""
    table = recoder.table                           # [previous + boundary, current, next + boundary]
    B = recoder.boundary_id
    N = mask.shape[0]
    # per training label: the names it converts to inside a sentence, at its start, end, or alone
    inner = _reachable(table[:B, :, :B], mask)
    first = _reachable(table[B:, :, :B], mask)
    last = _reachable(table[:B, :, B:], mask)
    alone = _reachable(table[B:, :, B:], mask)
    out = inner
    is_first = np.zeros(N, dtype=bool)
    is_last = np.zeros(N, dtype=bool)
    p = np.asarray(sent_ptr, dtype=np.int64)
    is_first[p[:-1][p[:-1] < N]] = True
    is_last[p[1:][p[1:] > 0] - 1] = True
    out[is_first & ~is_last] = first[is_first & ~is_last]
    out[is_last & ~is_first] = last[is_last & ~is_first]
    out[is_first & is_last] = alone[is_first & is_last]
    return out


def _reachable(table, mask):
    """[tokens, labels]: whether label c converts, in one of the contexts of ``table`` [a, c, b],
    to a name the token's row of ``mask`` allows."""
    L = table.shape[1]
    out = np.zeros((mask.shape[0], L), dtype=np.uint8)
    for c in range(L):
        codes = np.unique(table[:, c, :])
        out[:, c] = mask[:, codes].any(axis=1)
    return out


def infeasible_sentence(w, layout, allowed, sent_ptr):
    """The first sentence (index) whose allowed states admit no labeling that avoids the pinned
    (FORBIDDEN) transitions, starts and ends of kernel weights ``w``; None if every one does."""
    L = allowed.shape[1]
    half = FORBIDDEN / 2
    bad = first_infeasible(w[layout["trans"]].reshape(L, L) > half, w[layout["start"]] > half,
                           w[layout["end"]] > half, allowed, sent_ptr)
    return None if bad is None else bad[0]
