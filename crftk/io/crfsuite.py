"""CRFsuite's data: sequences of items, an item a list of (attribute, value) with a label.

:class:`AttributeSequences` holds them flat in memory, however they came (python-crfsuite's
feature dicts flattened by crftk.features.attributes, or a CRFsuite data file read here).
"""

from dataclasses import dataclass

import numpy as np

from crftk.errors import CrftkError


@dataclass
class AttributeSequences:
    """Sequences of tokens, each token a run of attribute occurrences.

    ``sent_ptr`` (n_sequences + 1) and ``tok_ptr`` (n_tokens + 1) are int64 offsets into the
    tokens and into ``names`` (one attribute string per occurrence); ``values`` the float64
    value of each occurrence, None when every one is 1; ``labels`` one label string per token,
    or None. ``source`` and ``lines`` (the file line of each token) place a token in errors;
    in memory ``name`` and ``index`` (each sequence's number in the caller's list) do.
    """

    sent_ptr: np.ndarray
    tok_ptr: np.ndarray
    names: list
    values: object = None
    labels: object = None
    source: object = None
    lines: object = None
    name: str = "X"
    index: object = None

    @property
    def n_sequences(self):
        return self.sent_ptr.size - 1

    @property
    def n_tokens(self):
        return int(self.sent_ptr[-1])

    def __len__(self):
        return self.n_sequences

    def locate(self, k, t):
        """(path, line) of token t of sequence k for an error: the file and line it was read from,
        or, in memory, ``X[i][t]`` as the path."""
        if self.lines is not None:
            return self.source, int(self.lines[int(self.sent_ptr[k]) + t])
        i = k if self.index is None else int(self.index[k])
        return f"{self.name}[{i}][{t}]", None

    def error(self, message, token):
        """A CrftkError about a token (its id among all tokens), placed where it came from."""
        k = int(np.searchsorted(self.sent_ptr, token, side="right")) - 1
        return CrftkError(message, *self.locate(k, int(token - self.sent_ptr[k])))

    def gold(self):
        """The labels as one list per sequence."""
        p = self.sent_ptr.tolist()
        return [self.labels[p[k]:p[k + 1]] for k in range(len(p) - 1)]

    def slice(self, k0, k1):
        """Sequences k0 .. k1-1 as data of their own."""
        t0, t1 = int(self.sent_ptr[k0]), int(self.sent_ptr[k1])
        o0, o1 = int(self.tok_ptr[t0]), int(self.tok_ptr[t1])
        return AttributeSequences(self.sent_ptr[k0:k1 + 1] - t0, self.tok_ptr[t0:t1 + 1] - o0, self.names[o0:o1],
                                  None if self.values is None else self.values[o0:o1],
                                  None if self.labels is None else self.labels[t0:t1], self.source,
                                  None if self.lines is None else self.lines[t0:t1], self.name,
                                  None if self.index is None else self.index[k0:k1])

    def with_labels(self, labels):
        """The same tokens with other labels (one string per token)."""
        return AttributeSequences(self.sent_ptr, self.tok_ptr, self.names, self.values, list(labels),
                                  self.source, self.lines, self.name, self.index)
