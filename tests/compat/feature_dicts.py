"""Feature dicts of the demo corpus made as sklearn-crfsuite's tutorial makes them (word2features),
for the drop-ins' tests."""

from corpora import REPO


def read_demo(name="demo.train", limit=None):
    """(sentences of (word, POS) pairs, chunk label sequences) of data/NAME."""
    sentences, labels, sent, lab = [], [], [], []
    with open(REPO / "data" / name, encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if not fields:
                if sent:
                    sentences.append(sent)
                    labels.append(lab)
                    sent, lab = [], []
                    if limit is not None and len(sentences) == limit:
                        break
                continue
            sent.append((fields[0], fields[1]))
            lab.append(fields[-1])
    if sent and (limit is None or len(sentences) < limit):
        sentences.append(sent)
        labels.append(lab)
    return sentences, labels


def word2features(sent, i):
    """The tutorial's token features: the word's shape and POS, and its neighbours'."""
    word, pos = sent[i]
    features = {"bias": 1.0, "word.lower()": word.lower(), "word[-3:]": word[-3:], "word[-2:]": word[-2:],
                "word.isupper()": word.isupper(), "word.istitle()": word.istitle(),
                "word.isdigit()": word.isdigit(), "postag": pos, "postag[:2]": pos[:2]}
    for offset, name in ((-1, "-1"), (1, "+1")):
        j = i + offset
        if 0 <= j < len(sent):
            w, p = sent[j]
            features.update({f"{name}:word.lower()": w.lower(), f"{name}:word.istitle()": w.istitle(),
                             f"{name}:word.isupper()": w.isupper(), f"{name}:postag": p,
                             f"{name}:postag[:2]": p[:2]})
        else:
            features["BOS" if offset < 0 else "EOS"] = True
    return features


def sent2features(sent):
    return [word2features(sent, i) for i in range(len(sent))]


def demo_dicts(name="demo.train", limit=None):
    """(X, y): the demo corpus as feature dicts and labels."""
    sentences, labels = read_demo(name, limit)
    return [sent2features(s) for s in sentences], labels
