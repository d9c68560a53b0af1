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
from crftk.features.templates import parse_template
from crftk.features.union import union_spaces
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


def merge_spaces(spaces):
    """(union FeatureSpace, [per member: (state attribute map, edge attribute map)]); the union's
    state features are left to the caller."""
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
    feature_set = spaces[0].feature_set if all(s.feature_set == spaces[0].feature_set for s in spaces) else "supported"
    union, maps = union_spaces(spaces, template=template, lexicons=lexicons, labels=spaces[0].labels,
                               feature_set=feature_set, features=False)
    return union, [(m.attrs, m.edge_attrs) for m in maps]


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
