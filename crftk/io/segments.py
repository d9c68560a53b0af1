"""Segmentations of a label column, for the semi-Markov CRF.

A semi-Markov CRF labels segments: (start, end_exclusive, label) spans that cover every token
of a sentence. Chunks are read by conlleval's rules (:func:`crftk.io.schemes.read_chunks`), so
any scheme conlleval reads gives the same segmentation; a token in no chunk is a one-token
segment of label :data:`OUTSIDE`. The model's token part is trained on the IOBES position tags
of the segmentation (:func:`position_tags`), which :class:`SegmentConversion` writes into the
label column.
"""

import dataclasses

from crftk.io.schemes import Detector, check_chunk_tags, read_chunks

#: the label of the one-token segments outside every chunk
OUTSIDE = "O"


def gold_segments(tags):
    """The segmentation of one sentence's tags (any scheme conlleval reads): (start, end, label)
    in order, covering every token; no checks (see :class:`SegmentConversion`)."""
    out = []
    t = 0
    for kind, start, end in read_chunks(tags):
        out.extend((i, i + 1, OUTSIDE) for i in range(t, start))
        out.append((start, end, kind))
        t = end
    out.extend((i, i + 1, OUTSIDE) for i in range(t, len(tags)))
    return out


def split_long(segments, cap):
    """(segments, number of segments split): each segment longer than ``cap`` tokens cut into
    pieces of ``cap`` tokens (the last one shorter); ``cap`` None leaves them as they are."""
    if cap is None or all(end - start <= cap for start, end, _ in segments):
        return list(segments), 0
    out, n_split = [], 0
    for start, end, label in segments:
        if end - start > cap:
            n_split += 1
            out.extend((a, min(a + cap, end), label) for a in range(start, end, cap))
        else:
            out.append((start, end, label))
    return out, n_split


def position_tags(segments):
    """The IOBES tags of a segmentation (``O`` for outside segments)."""
    tags = []
    for start, end, label in segments:
        if label == OUTSIDE:
            tags.extend([OUTSIDE] * (end - start))
        elif end - start == 1:
            tags.append(f"S-{label}")
        else:
            tags.append(f"B-{label}")
            tags.extend([f"I-{label}"] * (end - start - 2))
            tags.append(f"E-{label}")
    return tags


class SegmentConversion:
    """Sentences with the label column rewritten as the IOBES position tags of their gold
    segmentation, segments longer than ``cap`` split (counted in ``n_split``); the corpus's
    scheme is detected on the way (``detector``) and the longest segment of each label kept
    (``longest``: label -> tokens, after splitting; ``O`` is 1 when there is an outside token)."""

    def __init__(self, label_col, cap=None, marker=None):
        self.label_col, self.cap, self.marker = label_col, cap, marker
        self.detector = Detector()
        self.n_split = 0
        self.longest = {}

    def sentences(self, sentences, detect=True):
        """Yield the sentences converted; ``detect``: count them in ``detector``, ``n_split`` and
        ``longest`` (the training data), else convert only (development data)."""
        c = self.label_col
        for s in sentences:
            tags = [row[c] for row in s.rows]
            check_chunk_tags(s, tags, self.marker,
                             "a semi-Markov CRF trains on whole segments, and label {label} is partial (unknown "
                             "or a set): train partial labels with the chain CRF",
                             "a semi-Markov CRF reads segments from chunk tags (B/I/E/S-TYPE or O); label {label} "
                             "is not one")
            segments, n_split = split_long(gold_segments(tags), self.cap)
            if detect:
                self.detector.add(tags)
                self.n_split += n_split
                longest = self.longest
                for start, end, label in segments:
                    if end - start > longest.get(label, 0):
                        longest[label] = end - start
            rows = [list(row) for row in s.rows]
            for row, tag in zip(rows, position_tags(segments)):
                row[c] = tag
            yield dataclasses.replace(s, rows=rows)
