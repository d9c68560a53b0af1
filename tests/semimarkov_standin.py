"""Pure-Python stand-ins for the semi-Markov kernel (crftk._semimarkov.Segments) and the segment
feature space (crftk.features.segments), installed only while the real modules are missing, so
that the structure/kind plumbing can be tested on tiny data. Never imported by crftk itself.

The kernel enumerates every segmentation of each sentence (tiny inputs only). The segment space
has no attributes (a template without S lines), which is all the plumbing needs."""

import sys
import types

import numpy as np

from crftk.errors import CrftkError


def _segmentations(n, seg_map, seg_max):
    """Every labeling of n tokens (IOBES ids) that a segmentation under seg_map/seg_max makes."""
    Y = seg_map.shape[0]

    def rec(t):
        if t == n:
            yield []
            return
        for y in range(Y):
            for ln in range(1, int(seg_max[y]) + 1):
                if t + ln > n:
                    break
                s, b, i, e = (int(x) for x in seg_map[y])
                tags = [s] if ln == 1 else [b] + [i] * (ln - 2) + [e]
                if min(tags) < 0:
                    continue
                for rest in rec(t + ln):
                    yield tags + rest
    return list(rec(0))


class Segments:
    def __init__(self, sent_ptr, attr_ptr, attrs, feat_ptr, feat_label, n_labels, offsets, seg_map, seg_max,
                 seg_ptr, seg_attrs, n_seg_attrs, off_seg, values=None):
        self.sent_ptr, self.attr_ptr, self.attrs = sent_ptr, attr_ptr, attrs
        self.feat_ptr, self.feat_label, self.K = feat_ptr, feat_label, int(n_labels)
        self.trans, self.start, self.end, _, self.n_tok = offsets
        self.seg_map, self.seg_max = np.asarray(seg_map), np.asarray(seg_max)
        self.P = int(off_seg) + int(n_seg_attrs) * self.seg_map.shape[0]
        self.paths = [_segmentations(int(self.sent_ptr[k + 1] - self.sent_ptr[k]), self.seg_map, self.seg_max)
                      for k in range(len(self.sent_ptr) - 1)]

    def _features(self, t0, y):
        """The parameter ids that fire on a labeling y of the sentence starting at token t0."""
        out = []
        for j, lab in enumerate(y):
            t = t0 + j
            for a in self.attrs[self.attr_ptr[t]:self.attr_ptr[t + 1]]:
                for f in range(self.feat_ptr[a], self.feat_ptr[a + 1]):
                    if self.feat_label[f] == lab:
                        out.append(f)
            if j:
                out.append(self.trans + y[j - 1] * self.K + lab)
        if y:
            out += [self.start + y[0], self.end + y[-1]]
        return out

    def _vec(self, t0, y):
        return np.bincount(self._features(t0, list(y)), minlength=self.P).astype(float)

    def _score(self, w, t0, y):
        return float(sum(w[f] for f in self._features(t0, list(y))))

    def _sentences(self, w):
        for k, paths in enumerate(self.paths):
            t0 = int(self.sent_ptr[k])
            scores = np.array([self._score(w, t0, p) for p in paths])
            yield k, t0, paths, scores

    def loglik(self, w, labels, n_threads=1):
        nll, grad = 0.0, np.zeros(self.P)
        for k, t0, paths, scores in self._sentences(w):
            if not paths:
                continue
            gold = [int(x) for x in labels[t0:t0 + len(paths[0])]]
            if gold not in paths:
                raise CrftkError("the gold labeling is no segmentation")
            logz = np.logaddexp.reduce(scores)
            p = np.exp(scores - logz)
            nll += logz - self._score(w, t0, gold)
            for path, q in zip(paths, p):
                grad += q * self._vec(t0, path)
            grad -= self._vec(t0, gold)
        return nll, grad

    def viterbi(self, w, n_threads=1):
        out, best = np.zeros(int(self.sent_ptr[-1]), dtype=np.int32), []
        for k, t0, paths, scores in self._sentences(w):
            if paths and paths[0]:
                i = int(np.argmax(scores))
                out[t0:t0 + len(paths[i])] = paths[i]
                best.append(scores[i])
            else:
                best.append(0.0)
        return out, np.array(best)

    def marginals(self, w, n_threads=1):
        m, logzs = np.zeros((int(self.sent_ptr[-1]), self.K)), []
        for k, t0, paths, scores in self._sentences(w):
            if not paths or not paths[0]:
                logzs.append(0.0)
                continue
            logz = np.logaddexp.reduce(scores)
            for path, q in zip(paths, np.exp(scores - logz)):
                m[np.arange(t0, t0 + len(path)), path] += q
            logzs.append(logz)
        return m, np.array(logzs)

    def nbest(self, w, k, n_threads=1):
        N, S = int(self.sent_ptr[-1]), len(self.paths)
        out, sc, counts = np.zeros((k, N), dtype=np.int32), np.zeros((S, k)), np.zeros(S, dtype=np.int32)
        for s, t0, paths, scores in self._sentences(w):
            order = np.argsort(-scores, kind="stable")[:k]
            counts[s] = len(order)
            for r, i in enumerate(order):
                out[r, t0:t0 + len(paths[i])] = paths[i]
                sc[s, r] = scores[i]
        return out, sc, counts

    def counts(self, labels, sentence_weights=None):
        total = np.zeros(self.P)
        for k in range(len(self.paths)):
            t0, t1 = int(self.sent_ptr[k]), int(self.sent_ptr[k + 1])
            total += self._vec(t0, labels[t0:t1])
        return total


class SegmentCorpus:
    def __init__(self, n_tokens, longest):
        self.longest = int(longest)
        self.seg_ptr = np.zeros(n_tokens * self.longest + 1, dtype=np.int64)
        self.seg_attrs = np.zeros(0, dtype=np.int32)


class SegmentSpace:
    """No segment attributes: labels and each label's longest segment only."""

    def __init__(self, labels, max_len):
        self.labels = list(labels)
        self.max_len = np.asarray(max_len, dtype=np.int32)
        self.n_attrs = 0

    @property
    def n_params(self):
        return self.n_attrs * len(self.labels)

    @property
    def longest(self):
        return int(self.max_len.max())

    @classmethod
    def fit(cls, sentences, template, *, labels, max_len, min_freq=1):
        space = cls(labels, max_len)
        return space, space.encode(sentences)

    def encode(self, sentences):
        return SegmentCorpus(sum(len(s.rows) for s in sentences), self.longest)

    def attribute_strings(self):
        return []

    def to_arrays(self):
        return {"labels": self.labels}, {"max_len": self.max_len}

    @classmethod
    def from_arrays(cls, meta, arrays, path=None):
        labels = meta.get("labels")
        max_len = arrays.get("max_len")
        if not isinstance(labels, list) or max_len is None or max_len.shape != (len(labels),):
            raise CrftkError("model file is inconsistent: its segment part is malformed", path)
        return cls(labels, max_len)


def install():
    """Put the stand-ins where crftk imports the real modules from, if those are missing;
    returns the names of the modules that are stand-ins (installed now or before)."""
    installed = [name for name in ("crftk._semimarkov", "crftk.features.segments")
                 if getattr(sys.modules.get(name), "STANDIN", False)]
    if installed:
        return installed
    try:
        import crftk._semimarkov  # noqa: F401
    except ImportError:
        sys.modules["crftk._semimarkov"] = types.SimpleNamespace(Segments=Segments, STANDIN=True)
        installed.append("crftk._semimarkov")
    try:
        import crftk.features.segments  # noqa: F401
    except ImportError:
        module = types.ModuleType("crftk.features.segments")
        module.SegmentSpace, module.SegmentCorpus, module.STANDIN = SegmentSpace, SegmentCorpus, True
        sys.modules["crftk.features.segments"] = module
        installed.append("crftk.features.segments")
    return installed


