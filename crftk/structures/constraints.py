"""Hard constraints on label sequences of chunk encodings (IOB2, IOB1, IOBES, BILOU).

A constraint set says which labels may start or end a sentence and which may
follow which, e.g. in IOB2 no ``I-X`` after ``O``. Training and decoding
enforce it by pinning the weights of forbidden transitions, starts and ends
at FORBIDDEN: exponentiated, that is exactly zero probability, and Viterbi
never takes such a step while an allowed path exists.
"""

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.io.schemes import PREFIXES, allows, canonical, readable, split

SCHEMES = ("iob2", "iob1", "iobes", "bilou")
FORBIDDEN = -1e4
def _split(label, scheme):
    if label == "O":
        return "O", ""
    prefix, kind = split(label)
    if not allows(scheme, prefix) or not kind:
        raise CrftkError(f"label {shown(label)} is not an {scheme.upper()} tag "
                         f"({'/'.join(PREFIXES[scheme])}-TYPE or O)")
    return split(readable(label, scheme))[0], kind      # bilou's L and U as iobes's E and S


def _allowed(prev, cur, scheme):
    """May label cur follow label prev (both (prefix, type))?"""
    (pp, pt), (cp, ct) = prev, cur
    if scheme == "iob2":
        return cp != "I" or (pp in "BI" and pt == ct)
    if scheme == "iob1":
        return cp != "B" or (pp in "BI" and pt == ct)
    inside = pp in "BI"                        # iobes: a chunk is open after B or I
    if inside:
        return cp in "IE" and pt == ct
    return cp in "BSO"


def allowed(labels, scheme):
    """(transitions [L, L], starts [L], ends [L]) boolean masks of what is allowed."""
    scheme = canonical(scheme, SCHEMES, "constraint scheme")
    parts = [_split(lab, scheme) for lab in labels]
    trans = np.array([[_allowed(p, c, scheme) for c in parts] for p in parts], dtype=bool)
    starts = np.array([_allowed(("O", ""), c, scheme) for c in parts], dtype=bool)
    if scheme in ("iobes", "bilou"):
        ends = np.array([p in "ESO" for p, _ in parts], dtype=bool)
    else:
        ends = np.ones(len(labels), dtype=bool)
    return trans, starts, ends


def forbidden_parameters(space, scheme):
    """Boolean mask over the parameter vector: the weights pinned at FORBIDDEN."""
    scheme = canonical(scheme, SCHEMES, "constraint scheme")
    return pinned_mask(space, *allowed(space.labels, scheme))


def pinned_mask(space, trans, starts, ends):
    """The parameters to pin, given what is allowed (transition [L, L], start [L], end [L])."""
    lay = space.layout()
    mask = np.zeros(space.n_params, dtype=bool)
    mask[lay["trans"]] = ~trans.reshape(-1)
    mask[lay["start"]] = ~starts
    mask[lay["end"]] = ~ends
    return mask


def check_gold(labels, y, sent_ptr, scheme, locate=None):
    """Raise if a gold labeling breaks the constraints (it would have zero probability).

    ``labels``: the tag names; ``y``: each token's tag id; ``sent_ptr``: the sentences'
    first tokens (and the end). ``locate(sentence, token)`` gives the (file, line) of a token
    for the message.
    """
    scheme = canonical(scheme, SCHEMES, "constraint scheme")
    sent_ptr = np.asarray(sent_ptr)
    check_scheme_labels(labels, y, sent_ptr, scheme, locate)
    trans, starts, ends = allowed(labels, scheme)
    first, last = sent_ptr[:-1], sent_ptr[1:] - 1
    inner = np.ones(y.size, dtype=bool)
    inner[first] = False
    t = np.flatnonzero(inner)
    bad = t[~trans[y[t - 1], y[t]]]
    problems = []
    if bad.size:
        problems.append((int(bad[0]), f"{shown(labels[y[bad[0] - 1]])} followed by "
                                      f"{shown(labels[y[bad[0]]])}"))
    bad = first[~starts[y[first]]]
    if bad.size:
        problems.append((int(bad[0]), f"a sentence starts with {shown(labels[y[bad[0]]])}"))
    bad = last[~ends[y[last]]]
    if bad.size:
        problems.append((int(bad[0]), f"a sentence ends with {shown(labels[y[bad[0]]])}"))
    if problems:
        tok, what = min(problems)
        _raise_at(sent_ptr, tok, locate, f"the gold labels break the {scheme} constraints ({what}); "
                                       f"choose another --constraints scheme or none")


def check_scheme_labels(labels, y, sent_ptr, scheme, locate=None):
    """Raise at the first token whose label (id in ``y``; -1: none, skipped) is not a tag of the
    scheme."""
    scheme = canonical(scheme, SCHEMES, "constraint scheme")
    parts = [_split_or_none(lab, scheme) for lab in labels]
    bad_labels = [i for i, p in enumerate(parts) if p is None]
    hits = np.flatnonzero(np.isin(y, bad_labels)) if bad_labels else ()
    if len(hits):
        tok = int(hits[0])
        _raise_at(np.asarray(sent_ptr), tok, locate, f"label {shown(labels[y[tok]])} is not an "
                  f"{scheme.upper()} tag ({'/'.join(PREFIXES[scheme])}-TYPE or O); choose another "
                  f"--constraints scheme or none")


def _split_or_none(label, scheme):
    try:
        return _split(label, scheme)
    except CrftkError:
        return None


def _raise_at(sent_ptr, tok, locate, message):
    sentence = int(np.searchsorted(sent_ptr, tok, side="right")) - 1
    path, line = (None, None)
    if locate is not None:
        path, line = locate(sentence, tok - int(sent_ptr[sentence]))
    if path is None and line is None:
        message += f" (sentence {sentence + 1})"
    raise CrftkError(message, path, line)


def first_infeasible(trans, starts, ends, allowed, sent_ptr):
    """(sentence, token) where the first sentence whose allowed labels (uint8 [N, L]) admit no
    labeling that the allowed transitions [L, L], starts and ends [L] permit runs dry, or None.
    Forward reachability, one position of every sentence at a time."""
    sent_ptr = np.asarray(sent_ptr, dtype=np.int64)
    lengths = np.diff(sent_ptr)
    if lengths.size == 0:
        return None
    ok = np.asarray(allowed, dtype=bool)
    step = np.asarray(trans, dtype=np.float32)
    reach = ok[sent_ptr[:-1]] & starts
    dead = np.where(reach.any(axis=1), -1, 0)           # the position where nothing is reachable
    for p in range(1, int(lengths.max())):
        active = np.flatnonzero((lengths > p) & (dead < 0))
        if active.size == 0:
            break
        reach[active] = ((reach[active].astype(np.float32) @ step) > 0) & ok[sent_ptr[active] + p]
        gone = active[~reach[active].any(axis=1)]
        dead[gone] = p
    ended = (dead < 0) & ~(reach & ends).any(axis=1)
    dead[ended] = lengths[ended] - 1
    bad = np.flatnonzero(dead >= 0)
    if not bad.size:
        return None
    k = int(bad[0])
    return k, int(sent_ptr[k] + dead[k])


def check_feasible(trans, starts, ends, allowed, sent_ptr, locate=None, why=""):
    """Raise at the first sentence whose allowed labels (uint8 [N, L], crftk.io.partial) admit no
    labeling that the allowed transitions [L, L], starts and ends [L] permit: its likelihood would
    be log 0."""
    bad = first_infeasible(trans, starts, ends, allowed, sent_ptr)
    if bad is not None:
        sent_ptr = np.asarray(sent_ptr, dtype=np.int64)
        _raise_at(sent_ptr, bad[1], locate,
                  f"the partial labels of this sentence admit no labeling{why} (the allowed labels up to here "
                  "cannot follow one another)")
