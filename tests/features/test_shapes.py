"""The shape tests (crftk.features.observations), kept per class string, against their definitions."""

import random
import re

from crftk.features import observations as obs


def classes(word):
    return "".join("D" if c.isdigit() else "A" if c.isupper() else "a" if c.isalpha() else c for c in word)


def test_shapes_and_word_classes_follow_their_definitions():
    rng = random.Random(11)
    alphabet = "aZ9-.é Ü_,:/İß日"
    words = ["", "McDonald", "U.S.", "eBay", "1,000.5", "3:1", "Rolls-Royce", "B52", "well-known"] + \
        ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(3000)]
    for w in words * 2:                      # the second time from the caches
        cc = classes(w)
        shape = "".join({"A": "X", "a": "x", "D": "d"}.get(c, c) for c in cc)
        assert obs.full_shape(w) == shape
        assert obs.collapsed_shape(w) == re.sub(r"(.)\1+", r"\1", shape, flags=re.S)
        assert obs.word_classes(w) == [name for name, rx in obs.WORD_CLASSES if re.fullmatch(rx, cc)]
    # each call gives a list of its own
    a = obs.word_classes("Paris")
    a.append("x")
    assert obs.word_classes("Paris") == ["Aa+"]
