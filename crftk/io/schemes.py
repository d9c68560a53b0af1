"""Chunk tagging schemes of CoNLL label columns: their names and the prefixes each allows.

A tag is ``PREFIX-TYPE`` split on its first dash (``B-NP``: prefix ``B``, type
``NP``), or the bare ``O``. Evaluation (conlleval's chunk rules) and the hard
constraints of training and decoding read tags through this module.
"""

from crftk.errors import CrftkError

SCHEMES = ("iob1", "iob2", "ioe1", "ioe2", "iobes")
#: other spellings of a scheme ("bioes" is how --constraints first named IOBES)
ALIASES = {"bioes": "iobes"}
#: the chunk prefixes each scheme allows besides the bare "O" (one letter each)
PREFIXES = {"iob1": "BI", "iob2": "BI", "ioe1": "IE", "ioe2": "IE", "iobes": "BIES"}


def canonical(scheme, choices=SCHEMES, what="tagging scheme"):
    """The scheme's own name (an alias resolved), refused unless it is one of ``choices``."""
    name = ALIASES.get(scheme, scheme)
    if name not in choices:
        raise CrftkError(f"unknown {what} {scheme!r} (choose from {', '.join(choices)})")
    return name


def allows(scheme, prefix):
    """Whether the scheme has this chunk prefix (one of its letters, not "" or "BI")."""
    return len(prefix) == 1 and prefix in PREFIXES[scheme]


def split(tag):
    """(prefix, type) of a tag: "B-NP" -> ("B", "NP"), "O" -> ("O", "")."""
    prefix, _, kind = tag.partition("-")
    return prefix, kind
