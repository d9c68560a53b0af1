"""FeatureSpace.from_predicates: conjunctions of atomic tests as a feature space."""

import itertools
import random

import numpy as np
import pytest

from corpora import sentences
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.model import Model
from crftk.structures.chain import chain_lattices
from crftk.features.templates import parse_template

# one macro per U line; a multi-valued one (%shape); a B line with a macro
ATOMIC = """# atomic tests
U00:%x[-1,0]
U01:%x[0,0]
U02:%x[1,0]
U03:%x[0,1]
U04:%x[-1,1]
U05:%shape[0,0]
B
B06:%x[0,1]
"""

WORDS = ["the", "The", "IBM", "1996", "a", "U.S.", "said", "Bush", "x-ray", "12"]


def corpus(n_sentences, seed, words=WORDS):
    """Word, POS, label: random words from a small vocabulary, so conjunctions recur."""
    rng = random.Random(seed)
    rows = [[[rng.choice(words), rng.choice("NVD"), rng.choice(["B-X", "I-X", "O"])]
             for _ in range(rng.randint(1, 8))] for _ in range(n_sentences)]
    return sentences(rows)


def token_sets(enc):
    p = enc.attr_ptr
    return [enc.attrs[p[i]:p[i + 1]].tolist() for i in range(enc.n_tokens)]


def line_of(space):
    return np.repeat(np.arange(len(space.unigram_lines)), [cl.size for cl in space.unigram_lines])


def random_predicates(atomic, enc, rng, n):
    """Predicates of 1-4 tests that co-occur on a token, plus a few that never do."""
    lines = line_of(atomic)
    toks = token_sets(enc)
    preds = set()
    while len(preds) < n:
        tok = rng.choice(toks)
        by_line = {}
        for a in tok:
            by_line.setdefault(int(lines[a]), []).append(a)
        k = rng.randint(1, min(4, len(by_line)))
        preds.add(frozenset(rng.choice(by_line[i]) for i in rng.sample(sorted(by_line), k)))
    for _ in range(10):     # random tests of distinct lines: mostly never together on a token
        chosen = rng.sample(range(len(atomic.unigram_lines)), rng.randint(2, 4))
        preds.add(frozenset(int(rng.choice(np.flatnonzero(lines == i))) for i in chosen))
    preds = [tuple(rng.sample(sorted(p), len(p))) for p in preds]     # order inside is irrelevant
    rng.shuffle(preds)
    return preds


def random_labels(rng, n_labels, n):
    return [np.array(sorted(rng.sample(range(n_labels), rng.randint(1, n_labels)))) for _ in range(n)]


@pytest.fixture(scope="module")
def built():
    train = corpus(80, seed=1)
    atomic, enc = FeatureSpace.fit(train, parse_template(ATOMIC))
    rng = random.Random(2)
    preds = random_predicates(atomic, enc, rng, 150)
    labels = random_labels(rng, atomic.n_labels, len(preds))
    space, attr_of = FeatureSpace.from_predicates(atomic, preds, labels)
    return train, atomic, preds, labels, space, attr_of


def expected(atomic, preds, attr_of, sents):
    """Attributes of each token, straight from the definition: every test of the predicate holds."""
    out = []
    for tok in token_sets(atomic.encode(sents)):
        have = set(tok)
        out.append(sorted(int(attr_of[j]) for j, p in enumerate(preds) if have.issuperset(p)))
    return out


def test_predicates_of_every_size_are_drawn(built):
    _, _, preds, _, space, attr_of = built
    assert {len(p) for p in preds} == {1, 2, 3, 4}
    assert sorted(attr_of.tolist()) == list(range(len(preds))) == list(range(space.n_attrs))
    assert max(len(cl.steps) for cl in space.unigram_lines) == 2       # 4-macro lines exist


def test_encoding_fires_exactly_the_conjunctions_that_hold(built):
    train, atomic, preds, _, space, attr_of = built
    got = [sorted(t) for t in token_sets(space.encode(train))]
    assert got == expected(atomic, preds, attr_of, train)
    assert sum(len(t) for t in got) > len(got)       # many tokens fire several conjunctions
    # held-out sentences, with words training never saw (their shapes are still known)
    test = corpus(30, seed=3, words=WORDS + ["Zurich", "quux", "2001", "N.Y."])
    got = [sorted(t) for t in token_sets(space.encode(test))]
    assert got == expected(atomic, preds, attr_of, test)
    assert any(t for t in got)


def test_state_features_carry_the_given_labels(built):
    _, _, preds, labels, space, attr_of = built
    assert space.feat_ptr.size == space.n_attrs + 1
    assert space.n_features == sum(lab.size for lab in labels)
    for j, a in enumerate(attr_of):
        assert space.feat_label[space.feat_ptr[a]:space.feat_ptr[a + 1]].tolist() == labels[j].tolist()


def test_same_labels_vocabularies_and_edge_features(built):
    train, atomic, _, _, space, _ = built
    assert space.labels == atomic.labels and space.vocabs is atomic.vocabs
    assert space.extractor.keys == atomic.extractor.keys
    assert (space.n_columns, space.label_col, space.feature_set) == \
        (atomic.n_columns, atomic.label_col, atomic.feature_set)
    assert space.template.label_bigram and space.n_edge_attrs == atomic.n_edge_attrs
    assert space.attribute_strings(edge=True) == atomic.attribute_strings(edge=True)
    a, b = atomic.encode(train), space.encode(train)
    assert np.array_equal(a.eattrs, b.eattrs) and np.array_equal(a.labels, b.labels)


def test_attribute_strings_join_the_atomic_strings(built):
    _, atomic, preds, _, space, attr_of = built
    lines, names, atoms = line_of(atomic), space.attribute_strings(), atomic.attribute_strings()
    for j, p in enumerate(preds):
        assert names[attr_of[j]] == "/".join(atoms[a] for a in sorted(p, key=lambda a: lines[a]))
    assert any(n.count("/U") == 3 for n in names)


def test_template_text_appends_one_line_per_signature(built):
    _, atomic, preds, _, space, _ = built
    text = space.template.text
    assert text.startswith(ATOMIC)
    lines = line_of(atomic)
    sigs = sorted({tuple(sorted(int(lines[a]) for a in p)) for p in preds if len(p) > 1})
    tl = atomic.template.unigrams
    assert text[len(ATOMIC):].splitlines() == ["/".join(tl[i].text for i in s) for s in sigs]
    assert [t.text for t in parse_template(text).unigrams] == [t.text for t in space.template.unigrams]
    assert space.template.unigrams[len(tl)].macros == [tl[i].macros[0] for i in sigs[0]]


def test_hand_made_conjunction():
    train = sentences([[["the", "D", "O"], ["cat", "N", "O"]], [["the", "D", "O"], ["dog", "N", "O"]]])
    atomic, _ = FeatureSpace.fit(train, parse_template("U01:%x[-1,0]\nU05:%x[0,1]\n"))
    names = atomic.attribute_strings()
    pred = (names.index("U05:N"), names.index("U01:the"))
    space, attr_of = FeatureSpace.from_predicates(atomic, [pred], [[0]])
    assert space.template.text == "U01:%x[-1,0]\nU05:%x[0,1]\nU01:%x[-1,0]/U05:%x[0,1]\n"
    assert space.attribute_strings() == ["U01:the/U05:N"] and attr_of.tolist() == [0]
    assert [cl.size for cl in space.unigram_lines] == [0, 0, 1]     # atomic lines kept, empty
    assert token_sets(space.encode(train)) == [[], [0], [], [0]]


@pytest.mark.parametrize("sig", [(0, 3), (0, 1, 5), (4, 0, 5, 2), (5, 3, 1)])
def test_packing_matches_fit(sig):
    """All the combinations seen in training, as predicates, give fit's own steps and keys."""
    train = corpus(60, seed=4)
    tmpl = parse_template(ATOMIC)
    atomic, enc = FeatureSpace.fit(train, tmpl)
    lines = line_of(atomic)
    sig = sorted(sig)
    preds = set()
    for tok in token_sets(enc):
        per_line = [[a for a in tok if lines[a] == i] for i in sig]
        preds.update(itertools.product(*per_line))
    preds = sorted(preds)
    space, attr_of = FeatureSpace.from_predicates(atomic, preds, [[0]] * len(preds))
    joined = "/".join(tmpl.unigrams[i].text for i in sig)
    ref, _ = FeatureSpace.fit(train, parse_template(ATOMIC + joined + "\n"))
    mine, theirs = space.unigram_lines[-1], ref.unigram_lines[-1]
    assert mine.line.text == theirs.line.text == joined
    assert len(mine.steps) == len(sig) - 2
    for a, b in zip(mine.steps + [mine.keys], theirs.steps + [theirs.keys]):
        assert np.array_equal(a, b)


def test_round_trip_through_arrays_and_model_file(built, tmp_path):
    _, _, _, _, space, _ = built
    meta, arrays = space.to_arrays()
    back = FeatureSpace.from_arrays(meta, arrays)
    test = corpus(20, seed=5, words=WORDS + ["Zurich", "quux"])
    a, b = space.encode(test), back.encode(test)
    for name in ("attr_ptr", "attrs", "eattr_ptr", "eattrs"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert back.attribute_strings() == space.attribute_strings()
    assert np.array_equal(back.feat_ptr, space.feat_ptr) and np.array_equal(back.feat_label, space.feat_label)

    model = Model(space, np.random.default_rng(0).normal(size=space.n_params))
    model.save(tmp_path / "m.crftk")
    loaded = Model.load(tmp_path / "m.crftk")
    b = loaded.space.encode(test)
    assert np.array_equal(a.attrs, b.attrs)
    want = chain_lattices(space, a).viterbi(model.weights)[0]
    assert np.array_equal(chain_lattices(loaded.space, b).viterbi(loaded.weights)[0], want)


def test_errors(built):
    _, atomic, preds, labels, _, _ = built
    lines = line_of(atomic)
    first = [int(np.flatnonzero(lines == i)[0]) for i in range(len(atomic.unigram_lines))]
    second = int(np.flatnonzero(lines == 0)[1])
    ok = [(first[0], first[3])]
    FeatureSpace.from_predicates(atomic, ok, [[1]])
    for bad in ([(first[0], second)], [(first[1], first[1])], [()], [(atomic.n_attrs,)], [(-1,)]):
        with pytest.raises(ValueError):
            FeatureSpace.from_predicates(atomic, bad, [[0]])
    with pytest.raises(ValueError, match="twice"):
        FeatureSpace.from_predicates(atomic, ok + [(first[3], first[0])], [[0], [1]])
    for lab in ([], [1, 0], [0, 0], [atomic.n_labels]):
        with pytest.raises(ValueError, match="labels"):
            FeatureSpace.from_predicates(atomic, ok, [lab])
    with pytest.raises(ValueError):
        FeatureSpace.from_predicates(atomic, ok, [[0], [1]])
    train = corpus(10, seed=6)
    for text in ("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,1]\n", "U00:%x[0,0]\nU01:const\n"):
        other, _ = FeatureSpace.fit(train, parse_template(text))
        with pytest.raises(CrftkError, match="one macro"):
            FeatureSpace.from_predicates(other, [(0,)], [[0]])


def test_colliding_generated_lines_are_refused():
    # (0, 1) and (2, 3) both join into "U1:%x[0,0]/U/U:%x[0,1]", which the parser would merge
    tmpl = parse_template("U1:%x[0,0]/U\nU:%x[0,1]\nU1:%x[0,0]\nU/U:%x[0,1]\n")
    atomic, _ = FeatureSpace.fit(corpus(5, seed=1), tmpl)
    o = [cl.offset for cl in atomic.unigram_lines]
    with pytest.raises(CrftkError, match="collide"):
        FeatureSpace.from_predicates(atomic, [(o[0], o[1]), (o[2], o[3])], [[0], [0]])
