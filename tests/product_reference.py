"""A Python transcription of product-chain n-best as the eager merge made it (crftk._product's
lists before they were made lazily), for the kernel tests and the fuzz properties."""

import numpy as np

from crftk import _product


def merged_nbest(sizes, sp, state, trans, K):
    """The K best joint labelings as product_nbest found them before nbest.h, every list in full, in Python floats
    (the same additions): at each stage every output merges its n_c predecessor lists by their
    heads, K times over all of them, the lower label on ties. (paths [K, N], scores, counts)."""
    sizes = [int(n) for n in sizes]
    C, S = len(sizes), int(np.prod(sizes))
    stride = [int(np.prod(sizes[c + 1:])) for c in range(C)]
    N = int(sp[-1])
    paths = np.zeros((K, N), dtype=np.int64)
    scores = np.full((len(sp) - 1, K), -np.inf)
    counts = np.zeros(len(sp) - 1, dtype=np.int64)
    for s in range(len(sp) - 1):
        t0, T = int(sp[s]), int(sp[s + 1] - sp[s])
        lists = [[[float(state[t0, y])] + [-np.inf] * (K - 1) for y in range(S)]]
        links = [[None] * S]
        for t in range(1, T):
            prev, link = lists[-1], None
            for c in range(C):
                nc, post = sizes[c], stride[c]
                m = trans[c] if trans[c].ndim == 2 else trans[c][t0 + t]
                out, link = [], []
                for y in range(S):
                    j = (y // post) % nc
                    base = y - j * post
                    heads, row, ptr = [0] * nc, [], []
                    for _ in range(K):
                        bi, top = -1, -np.inf
                        for i in range(nc):
                            if heads[i] < K and prev[base + i * post][heads[i]] != -np.inf:
                                v = prev[base + i * post][heads[i]] + float(m[i, j])
                                if bi < 0 or v > top:
                                    top, bi = v, i
                        if bi < 0:
                            row.append(-np.inf)
                            ptr.append(None)
                        else:
                            row.append(top)
                            ptr.append((base + bi * post, heads[bi]))
                            heads[bi] += 1
                    out.append(row)
                    link.append(ptr)
                prev = out
                links.append(link)
            lists.append([[v + float(state[t0 + t, y]) for v in row] for y, row in enumerate(prev)])
        heads = [0] * S
        for o in range(K):
            bi, top = -1, -np.inf
            for y in range(S):
                if heads[y] < K and lists[-1][y][heads[y]] != -np.inf:
                    v = lists[-1][y][heads[y]]
                    if bi < 0 or v > top:
                        top, bi = v, y
            if bi < 0:
                break
            scores[s, o], counts[s] = top, o + 1
            y, q = bi, heads[bi]
            heads[bi] += 1
            paths[o, t0 + T - 1] = y
            for t in range(T - 1, 0, -1):
                for c in range(C - 1, -1, -1):
                    y, q = links[1 + (t - 1) * C + c][y][q]
                paths[o, t0 + t - 1] = y
    return paths, scores, counts


def assert_nbest_is_the_merge(sizes, sp, state, trans, K, threads):
    """crftk._product.nbest's paths, scores (to the bit) and counts are merged_nbest's."""
    want_paths, want_scores, want_counts = merged_nbest(sizes, sp, state, trans, K)
    paths, scores, counts = _product.nbest(np.array(sizes, dtype=np.int32), sp, state, trans, K, threads)
    np.testing.assert_array_equal(counts, want_counts)
    assert scores.tobytes() == want_scores.tobytes()
    for s in range(len(sp) - 1):
        np.testing.assert_array_equal(paths[:counts[s], sp[s]:sp[s + 1]], want_paths[:counts[s], sp[s]:sp[s + 1]])
