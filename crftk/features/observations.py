"""Observational tests on one token string: shapes, affixes, character n-grams, regexes.

Each function maps a string to a value string, to ``None`` (the test does not
apply: no attribute), or, for the multi-valued tests, to a list of values
(one attribute each). The template macros of crftk/features/templates.py name them.
A test with arguments is a ``functools.partial`` of a module function, never a
closure: a compiled template pickles as its declaration (function name, arguments).

Character classes are Unicode-aware: an upper-case letter is ``A``, a
lower-case (or caseless) letter ``a``, a digit ``D``; anything else stands for
itself. McCallum & Li (2003) used "16 character-level regular expressions,
mostly concerning capitalization and digit patterns, such as A, A+, Aa+,
Aa+Aa*, A., D+"; WORD_CLASSES is such a set, written over that class string.
"""

import re
from functools import lru_cache, partial


@lru_cache(maxsize=1 << 16)
def char_classes(word):
    """'McDonald-2' -> 'AaAaaaaa-D'."""
    out = []
    for ch in word:
        if ch.isdigit():
            out.append("D")
        elif ch.isupper():
            out.append("A")
        elif ch.isalpha():
            out.append("a")
        else:
            out.append(ch)
    return "".join(out)


# (name, regex over char_classes(word)); several may hold for one word.
WORD_CLASSES = [
    ("A", r"A"),                          # one capital letter
    ("A+", r"A+"),                        # all capitals
    ("Aa+", r"Aa+"),                      # capitalized word
    ("Aa+Aa*", r"Aa+A[Aa]*"),             # capitals inside: McDonald, iPhone-like after a capital
    ("A.", r"A\."),                       # initial
    ("(A.)+", r"(A\.){2,}"),              # dotted acronym: U.S.
    ("a+", r"a+"),                        # lower case word
    ("a+A", r"a+A[Aa]*"),                 # lower then capital: eBay
    ("Aa*-Aa*", r"Aa*(-[Aa]+)+"),         # hyphenated, capitalized
    ("a+-a+", r"a+(-a+)+"),               # hyphenated, lower case
    ("D+", r"D+"),                        # number
    ("DD", r"DD"),                        # two digits
    ("DDDD", r"DDDD"),                    # four digits: years
    ("D+.D+", r"D+([.,]D+)+"),            # decimal or thousands separators
    ("D-D", r"D+([-/:]D+)+"),             # dates, scores, ranges
    ("AD", r"(?=[AaD]*D)(?=[AaD]*[Aa])[AaD]+"),  # letters and digits mixed
    ("P", r"[^AaD]+"),                    # punctuation only
]
_CLASS_RES = [(name, re.compile(rx)) for name, rx in WORD_CLASSES]


def word_classes(word):
    """Names of the WORD_CLASSES that match the whole word (a list, possibly empty)."""
    return list(_classes_of(char_classes(word)))


@lru_cache(maxsize=1 << 16)
def _classes_of(cc):
    # a word's classes depend on its class string alone, which far fewer words than a vocabulary spell
    return tuple(name for name, rx in _CLASS_RES if rx.fullmatch(cc))


_SHAPE = {"A": "X", "a": "x", "D": "d"}


def full_shape(word):
    """'Bush-12' -> 'Xxxx-dd'."""
    return _full_shape_of(char_classes(word))


@lru_cache(maxsize=1 << 16)
def _full_shape_of(cc):
    return "".join(_SHAPE.get(c, c) for c in cc)


def collapsed_shape(word):
    """Runs of one class cut to one character: 'Bush-12' -> 'Xx-d', 'U.S.' -> 'X.X.'."""
    return _collapsed_of(char_classes(word))


@lru_cache(maxsize=1 << 16)
def _collapsed_of(cc):
    out = []
    for c in _full_shape_of(cc):
        if not out or out[-1] != c:
            out.append(c)
    return "".join(out)


def prefix(word, n):
    """First n characters, or None for a shorter word."""
    return word[:n] if len(word) >= n else None


def suffix(word, n):
    """Last n characters, or None for a shorter word."""
    return word[-n:] if len(word) >= n else None


def char_ngrams(word, lo, hi):
    """Character n-grams of lengths lo..hi of '<word>' ('<' and '>' mark the ends)."""
    w = "<" + word + ">"
    return [w[i:i + n] for n in range(lo, hi + 1) for i in range(len(w) - n + 1)]


def regex_test(rx):
    """Wapiti's %t: 'true' when the regex matches anywhere in the value, else 'false'."""
    return partial(_regex_holds, rx)


def _regex_holds(rx, word):
    return "true" if rx.search(word) else "false"


def regex_match(rx):
    """Wapiti's %m: the text the regex matches first, or None."""
    return partial(_regex_first, rx)


def _regex_first(rx, word):
    m = rx.search(word)
    return m.group(0) if m and m.group(0) else None


def apply(test, words):
    """``[test(w) for w in words]``; the regex and affix tests without a Python call per word: a
    lookup table over a vocabulary tests each of its words at every start of ``crftk tag``."""
    func = getattr(test, "func", None)
    if func is _regex_holds and len(test.args) == 1 and not test.keywords:
        return ["true" if m else "false" for m in map(test.args[0].search, words)]
    if func in (prefix, suffix) and not test.args and set(test.keywords) == {"n"}:
        n = test.keywords["n"]
        if func is prefix:
            return [w[:n] if len(w) >= n else None for w in words]
        return [w[-n:] if len(w) >= n else None for w in words]
    return [test(w) for w in words]
