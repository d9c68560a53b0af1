"""The per-sequence product of experts as one ordinary model: the bag's weights averaged over
the union of its feature spaces.

sum_i l_i log p_i(y|x) is, up to normalization, the score of a CRF whose template
holds every member's lines and whose weight of each feature is sum_i l_i w_i (a
member without the feature counts 0). The union space is built from the members'
dictionaries alone (no data): vocabularies are merged by string, each line's
attribute keys are re-packed over the merged vocabularies, and a line that several
members share (same text) holds the union of their attributes.
"""

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.ensemble.combine import check_weights
from crftk.features.extract import Extractor, Vocab
from crftk.features.space import CompiledLine, FeatureSpace, pack_rows
from crftk.features.templates import padding_value, parse_template
from crftk.model import Model


def union_template_text(templates):
    """Every member's lines once, lexicon declarations once, in order of first appearance."""
    seen, out = set(), []
    for t in templates:
        for line in t.text.splitlines():
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            if s not in seen:
                seen.add(s)
                out.append(s)
    return "\n".join(out) + "\n"


def _repack(rows, steps, radices):
    """Final keys of value-id rows over a line's union steps (as encoding packs them: space.pack_rows)."""
    if rows.shape[1] == 0:
        return np.zeros(rows.shape[0], dtype=np.int64)
    key = rows[:, 0]
    for i in range(1, rows.shape[1]):
        key = key * radices[i] + rows[:, i]
        if i < rows.shape[1] - 1:
            key = np.searchsorted(steps[i - 1], key)
    return key


def merge_spaces(spaces):
    """(union FeatureSpace, [per member: (state attribute map, edge attribute map)])."""
    first = spaces[0]
    template = parse_template(union_template_text([s.template for s in spaces]), "<bag union>")
    lexicons = {}
    for s in spaces:
        for name, lex in s.extractor.lexicons.items():
            if name in lexicons and lexicons[name].to_lines() != lex.to_lines():
                raise CrftkError(f"two bags declare lexicon {shown(name)} with different entries: the "
                                 "seq-poe model cannot hold both")
            lexicons[name] = lex
    for s in spaces:
        for name, table in s.extractor.vectors.items():
            held = template.vectors.setdefault(name, table)
            if held is not table and (held.words != table.words or held.lookup != table.lookup
                                      or not np.array_equal(held.table, table.table)):
                raise CrftkError(f"two bags read vectors {shown(name)} from different tables: the seq-poe "
                                 "model cannot hold both")
    pads = [padding_value(d) for k in range(1, template.max_offset + 1) for d in (-k, k)]
    extractor = Extractor(template, lexicons, {})
    vocabs = {}
    for key in extractor.keys:
        v = Vocab(pads)
        for s in spaces:
            if key in s.vocabs:
                v.add_ids(s.vocabs[key].strings)
        vocabs[key] = v
    extractor = Extractor(template, lexicons, vocabs)
    radix = {key: len(v) for key, v in vocabs.items()}
    # a real-valued line (%num, %vec) has no vocabulary: its keys number its attributes
    radix.update({m.source: 1 if m.kind == "num" else template.vectors[m.args[0]].dim
                  for m in template.macros if m.real})

    def member_rows(s, cl):
        """A member line's value-id rows, over the union vocabularies (a real-valued line's: its keys)."""
        if cl.line.real is not None:
            return np.asarray(cl.keys, dtype=np.int64)[:, None]
        rows = s.value_ids(cl, cl.keys)
        for j, m in enumerate(cl.line.macros):
            to_union = vocabs[m.source].ids(s.vocabs[m.source].strings)
            rows[:, j] = to_union[rows[:, j]]
        return rows

    def union_lines(kind):
        lines, maps = [], [[] for _ in spaces]
        for tl in (template.unigrams if kind == "u" else template.bigrams):
            owned = []
            for i, s in enumerate(spaces):
                for cl in (s.unigram_lines if kind == "u" else s.bigram_lines):
                    if cl.line.text == tl.text:
                        owned.append((i, cl, member_rows(s, cl)))
            rows = np.concatenate([r for _, _, r in owned])
            rows = np.unique(rows, axis=0) if rows.shape[1] else rows[:1]
            radices = [radix[m.source] for m in tl.macros]
            steps, key = pack_rows(rows, radices) if rows.shape[1] else ([], np.zeros(rows.shape[0], np.int64))
            ucl = CompiledLine(tl, steps, np.unique(key))
            lines.append(ucl)
            for i, cl, r in owned:
                maps[i].append((cl, ucl, np.searchsorted(ucl.keys, _repack(r, steps, radices))))
        return lines, maps

    unigram, umaps = union_lines("u")
    bigram, bmaps = union_lines("b")
    feature_set = first.feature_set if all(s.feature_set == first.feature_set for s in spaces) else "supported"
    # the space numbers its lines' attributes (their offsets), which the maps read
    union = FeatureSpace(template, first.n_columns, first.label_col, first.labels, extractor, unigram, bigram,
                         np.zeros(1, np.int32), np.zeros(0, np.int32), feature_set)

    def attr_map(s, maps, n):
        out = np.full(n, -1, dtype=np.int64)
        for cl, ucl, rank in maps:
            out[cl.offset:cl.offset + cl.size] = ucl.offset + rank
        return out

    amaps = [(attr_map(s, umaps[i], s.n_attrs), attr_map(s, bmaps[i], s.n_edge_attrs))
             for i, s in enumerate(spaces)]
    return union, amaps


def seq_poe_model(bag, weights):
    """One chain Model equal to the bag's per-sequence product of experts with these weights."""
    lam = check_weights(weights, len(bag.members))
    spaces = [m.space for m in bag.members]
    union, amaps = merge_spaces(spaces)
    L = union.n_labels
    keys, vals = [], []
    for m, (amap, _), l in zip(bag.members, amaps, lam):
        s = m.space
        attr = np.repeat(np.arange(s.n_attrs, dtype=np.int64), np.diff(s.feat_ptr))
        keys.append(amap[attr] * L + s.feat_label)
        vals.append(l * m.weights[s.layout().state])
    keys, vals = np.concatenate(keys), np.concatenate(vals)
    uniq, inv = np.unique(keys, return_inverse=True)
    state_w = np.bincount(inv.reshape(-1), weights=vals, minlength=uniq.size)
    counts = np.bincount(uniq // L, minlength=union.n_attrs)
    union.feat_ptr = np.zeros(union.n_attrs + 1, dtype=np.int32)
    np.cumsum(counts, out=union.feat_ptr[1:])
    union.feat_label = (uniq % L).astype(np.int32)
    lay = union.layout()
    w = np.zeros(lay.n_params)
    w[lay.state] = state_w
    for m, (_, emap), l in zip(bag.members, amaps, lam):
        ml = m.space.layout()
        for part in ("trans", "start", "end"):
            w[lay[part]] += l * m.weights[ml[part]]
        if m.space.n_edge_attrs:
            lay.edge_blocks(w)[emap] += l * ml.edge_blocks(m.weights)
    info = {"order": 1, "model_type": "crf",
            "bag_export": {"combine": "seq-poe", "members": bag.names, "weights": [float(x) for x in lam]}}
    return Model(union, w, info)
