#!/usr/bin/env python
"""A CRFsuite data file from a CoNLL file, with sklearn-crfsuite's tutorial features.

Each token becomes the feature dict of ``bench_ner.sentence_features``, sklearn-crfsuite's
tutorial features (the word lowercased, its last 3 and 2 characters, isupper, istitle, isdigit, the POS tag and its
first two characters, the same of the neighbours, BOS/EOS), flattened as python-crfsuite
flattens it (crftk.features.attributes.flatten) and written in CRFsuite's data format
(``LABEL<TAB>attr[:value]...``). The flattening, the encoding and the reading back are timed.

    python benchmarks/crfsuite_data.py /work/shared/data/conll2003/eng.train eng.train.crfsuite
    crftk train --format crfsuite eng.train.crfsuite -m model
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from crftk.api import read_conll                                  # noqa: E402
from crftk.features.attributes import AttributeSpace, flatten     # noqa: E402
from crftk.io.crfsuite import read_crfsuite, write_crfsuite       # noqa: E402
from bench_ner import sentence_features                           # noqa: E402  (the tutorial's features)



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("conll", help="CoNLL file: word, POS, ..., label (last column)")
    ap.add_argument("output", help="the CRFsuite data file to write")
    args = ap.parse_args()
    X, y = read_conll(args.conll, label_col=-1)
    X = [[row for row in s if row[0] != "-DOCSTART-"] for s in X]
    t = time.perf_counter()
    dicts = [sentence_features(s) for s in X]
    made = time.perf_counter() - t
    t = time.perf_counter()
    data = flatten(dicts, y)
    flat = time.perf_counter() - t
    t = time.perf_counter()
    space, corpus = AttributeSpace.fit(data)
    fit = time.perf_counter() - t
    t = time.perf_counter()
    space.encode(data)
    encode = time.perf_counter() - t
    with open(args.output, "w", encoding="utf-8") as out:
        write_crfsuite(data, out)
    t = time.perf_counter()
    back = read_crfsuite(args.output)
    read = time.perf_counter() - t
    n, occ = data.n_tokens, len(data.names)
    print(f"{n:,} tokens, {occ:,} attribute occurrences, {space.n_attrs:,} attributes, "
          f"{space.n_features:,} state features")
    for what, s in (("sentence_features", made), ("flatten", flat), ("AttributeSpace.fit", fit),
                    ("encode", encode), ("read_crfsuite", read)):
        print(f"{what:20s} {s:6.2f}s  {n / s:12,.0f} tokens/s")
    assert back.names == data.names and back.labels == data.labels


if __name__ == "__main__":
    main()
