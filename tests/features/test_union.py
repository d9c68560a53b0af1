"""The union of feature spaces (crftk.features.union): the union of the fits of a corpus's pieces,
in order, is the fit of the whole corpus; maps and weights follow attributes and labels into it."""

import random

import numpy as np
import pytest

from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.features.union import map_chain_weights, same_space, union_spaces
from crftk.features.vectors import VectorTable
from crftk.io.conll import iter_corpus, read_corpus

from corpora import REPO

TEMPLATE = """# a comment stays in the template text
U00:%x[-2,0]
U01:%x[0,0]/%x[1,1]
U02:%x[-1,0]/%x[0,0]/%x[1,0]
U03:%X[0,0]/%x[0,1]
U04:%suf[0,0,2]
U05:%shape[1,0]
U09:%ngram[0,0,2,3]
U06:%num[0,2]
U07:%vec[0,0,emb]
U08:%X[0,0]
B00:%x[0,1]
B
"""
WORDS = ["the", "The", "cat", "Cat", "sat", "é", "Éa", "naïve", "unk", "1997", "dog", "Dogs", "ran"]


def _text(rng, n_sents, labels=("B-NP", "I-NP", "O")):
    lines = []
    for _ in range(n_sents):
        for _ in range(rng.randint(1, 6)):
            lines.append(f"{rng.choice(WORDS)} {rng.choice(['NN', 'VB', 'DT'])} "
                         f"{rng.choice(['0', '1.5', '-2'])} {rng.choice(labels)}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _template():
    t = parse_template(TEMPLATE, "<union test>")
    t.vectors = {"emb": VectorTable("emb", ["the", "cat", "é"], np.arange(6, dtype=np.float32).reshape(3, 2))}
    return t


def _pieces(tmp_path, texts):
    paths = []
    for i, text in enumerate(texts):
        p = tmp_path / f"piece{i}.txt"
        p.write_text(text, encoding="utf-8")
        paths.append(str(p))
    return paths


def _fit(paths, template, **kw):
    return FeatureSpace.fit(iter_corpus(paths), template, **kw)


@pytest.mark.parametrize("min_freq", [1, 2, 3])
@pytest.mark.parametrize("feature_set", ["supported", "complete"])
@pytest.mark.parametrize("seed", [0, 1])
def test_union_of_pieces_is_the_fit_of_the_whole(tmp_path, min_freq, feature_set, seed):
    rng = random.Random(seed)
    # the last piece brings a label and words the others lack
    texts = [_text(rng, rng.randint(1, 8)) for _ in range(3)] + [_text(rng, 3, ("B-VP", "O")) + "zebra NN 1 O\n\n"]
    paths = _pieces(tmp_path, texts)
    template = _template()
    whole, corpus = _fit(paths, template, min_freq=min_freq, feature_set=feature_set)
    parts = [_fit([p], template, feature_set=feature_set)[0] for p in paths]
    union, maps = union_spaces(parts, min_freq=min_freq)
    assert same_space(union, whole) == (True, "")
    # the pieces encoded with the union are the corpus the whole fit encoded
    encoded = union.encode(read_corpus(paths))
    for name in ("sent_ptr", "attr_ptr", "attrs", "eattr_ptr", "eattrs", "labels", "values"):
        assert np.array_equal(getattr(encoded, name), getattr(corpus, name)), name
    # nested unions (pruned at the last level only) give the same
    inner = union_spaces(parts[:2])[0]
    nested = union_spaces([inner, *parts[2:]], min_freq=min_freq)[0]
    assert same_space(nested, whole) == (True, "")
    # each piece's attributes map to the union's attributes of the same strings
    strings = union.attribute_strings()
    for part, m in zip(parts, maps):
        mine = part.attribute_strings()
        for a, u in enumerate(m.attrs.tolist()):
            if u >= 0:
                assert strings[u] == mine[a]
        assert [union.labels[j] for j in m.labels.tolist()] == part.labels


def test_counts_and_pruning(tmp_path):
    paths = _pieces(tmp_path, ["a NN 0 O\nb NN 0 O\n\n", "a NN 0 O\nc VB 0 B-NP\n\n"])
    template = parse_template("U00:%x[0,0]\n", "<t>")
    parts = [_fit([p], template)[0] for p in paths]
    assert parts[0].unigram_lines[0].counts.tolist() == [1, 1]
    union, maps = union_spaces(parts, min_freq=2)
    assert union.attribute_strings() == ["U00:a"]
    assert union.unigram_lines[0].counts.tolist() == [2]
    assert maps[0].attrs.tolist() == [0, -1] and maps[1].attrs.tolist() == [0, -1]
    # a kept space's attributes stay whatever their counts
    union, maps = union_spaces(parts, min_freq=2, keep=(1,))
    assert union.attribute_strings() == ["U00:a", "U00:c"]
    assert union.labels == ["B-NP", "O"]
    assert maps[0].labels.tolist() == [1]


def test_loaded_spaces_keep_every_attribute(tmp_path):
    paths = _pieces(tmp_path, ["a NN 0 O\nb NN 0 O\n\n", "a NN 0 O\n\n"])
    template = parse_template("U00:%x[0,0]\n", "<t>")
    old = _fit([paths[0]], template)[0]
    for cl in old.unigram_lines:
        cl.counts = None            # as a model file gives it
    union, _ = union_spaces([old, _fit([paths[1]], template)[0]], min_freq=5)
    assert union.attribute_strings() == ["U00:a", "U00:b"]


def test_spaces_of_other_templates_are_refused(tmp_path):
    paths = _pieces(tmp_path, ["a NN 0 O\n\n"])
    a = _fit(paths, parse_template("U00:%x[0,0]\n", "<t>"))[0]
    b = _fit(paths, parse_template("U00:%x[0,1]\n", "<t>"))[0]
    with pytest.raises(CrftkError, match="different templates"):
        union_spaces([a, b])


def test_map_chain_weights_keeps_every_old_parameter(tmp_path):
    rng = random.Random(3)
    paths = _pieces(tmp_path, [_text(rng, 6), _text(rng, 6, ("B-VP", "I-VP", "O"))])
    template = _template()
    old = _fit([paths[0]], template)[0]
    new = _fit([paths[1]], template)[0]
    union, maps = union_spaces([old, new], keep=(0,))
    w = np.random.default_rng(0).normal(size=old.n_params)
    mapped = map_chain_weights(old, w, union, maps[0])
    assert mapped.size == union.n_params
    # every old parameter is somewhere in the union, with its value; the rest are 0
    assert np.isclose(np.abs(mapped).sum(), np.abs(w).sum())
    ol, ul, lab = old.layout(), union.layout(), maps[0].labels
    assert np.array_equal(ul.transitions(mapped)[np.ix_(lab, lab)], ol.transitions(w))
    assert np.array_equal(mapped[ul.start][lab], w[ol.start])
    assert np.array_equal(ul.edge_blocks(mapped)[maps[0].edge_attrs][:, lab][:, :, lab], ol.edge_blocks(w))
    # state features by (attribute string, label)
    def features(space, weights):
        strings = space.attribute_strings()
        attr = np.repeat(np.arange(space.n_attrs), np.diff(space.feat_ptr))
        return {(strings[a], space.labels[y]): weights[i]
                for i, (a, y) in enumerate(zip(attr.tolist(), space.feat_label.tolist()))}
    before, after = features(old, w[ol.state]), features(union, mapped[ul.state])
    assert all(after[k] == v for k, v in before.items())
    assert all(v == 0 for k, v in after.items() if k not in before)


@pytest.mark.skipif(not (REPO.parent / "shared" / "data" / "conll2000" / "train.txt").exists(),
                    reason="CoNLL-2000 not found in ../shared/data/conll2000")
def test_union_on_conll2000_pieces(tmp_path):
    text = (REPO.parent / "shared" / "data" / "conll2000" / "train.txt").read_text(encoding="utf-8")
    blocks = text.split("\n\n")[:3000]
    paths = _pieces(tmp_path, ["\n\n".join(blocks[i:i + 1000]) + "\n\n" for i in range(0, 3000, 1000)])
    template = parse_template((REPO / "templates" / "chunking-crfpp.tmpl").read_text(), "chunking-crfpp.tmpl")
    whole = _fit(paths, template, min_freq=2)[0]
    union = union_spaces([_fit([p], template)[0] for p in paths], min_freq=2)[0]
    assert same_space(union, whole) == (True, "")
