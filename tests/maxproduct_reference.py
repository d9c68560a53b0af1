"""Loopy max-product on one factorial grid in plain Python floats, operation for operation as
csrc/messages.pxd ran it before its max-product sweeps were rewritten (every message set with
set_log_message: normalized to max 0, its change max |exp(new) - exp(old)| through math.exp,
the C library's exp; the spine through chain_max_scores): the same sums in the same order, so
the kernel must give the same labels, score, sweeps and convergence bit for bit. For tiny grids
(tests), and for studying how sentences converge or cycle (``history``)."""

import math

NEG = -math.inf
FWD, BWD, ABOVE, BELOW = range(4)
SKIP_FWD, SKIP_BWD, SKIP_ABOVE, SKIP_BELOW = 1, 2, 4, 8
MASK64 = (1 << 64) - 1


class MaxProduct:
    """One grid: node[c] [T][n_c], trans[c] [n_c][n_c], pair[c] [T][n_c][n_c+1] (nested lists or
    arrays of floats)."""

    def __init__(self, node, trans, pair):
        self.C, self.T = len(node), len(node[0])
        self.n = [len(node[c][0]) for c in range(self.C)]
        self.node = [[[float(x) for x in row] for row in a] for a in node]
        self.trans = [[[float(x) for x in row] for row in a] for a in trans]
        self.pair = [[[[float(x) for x in row] for row in m] for m in a] for a in pair]
        self.msg = [[[[0.0] * self.n[c] for _ in range(self.T)] for c in range(self.C)] for _ in range(4)]

    def cavity(self, c, t, skip):
        out = list(self.node[c][t])
        for k in range(4):
            if not (skip >> k) & 1:
                m = self.msg[k][c][t]
                out = [a + b for a, b in zip(out, m)]
        return out

    def set_message(self, k, c, t, v):
        """set_log_message with maxp: returns the largest change in probability."""
        m = NEG
        for x in v:
            m = x if x > m else m
        v = [0.0] * len(v) if m == NEG else [x - m for x in v]
        change = 0.0
        old = self.msg[k][c][t]
        for a, o in zip(v, old):
            d = abs(math.exp(a) - math.exp(o))
            change = d if d > change else change
        self.msg[k][c][t] = v
        return change

    @staticmethod
    def send_values(cav, M, col_sender):
        """send_message's maxima: from the a side, out[b] = max_a cav[a] + M[a][b]; from the b
        side (col_sender), out[a] = max_b cav[b] + M[a][b]."""
        na, nb = len(M), len(M[0])
        nu, nv = (nb, na) if col_sender else (na, nb)
        out = []
        for a in range(nv):
            best = NEG
            for b in range(nu):
                x = cav[b] + (M[a][b] if col_sender else M[b][a])
                best = x if x > best else best
            out.append(best)
        return out

    def send(self, e, way):
        C, T = self.C, self.T
        nchain = C * (T - 1)
        if e < nchain:
            c, t = e // (T - 1), e % (T - 1) + 1
            if way == 0:
                out = self.send_values(self.cavity(c, t - 1, SKIP_BWD), self.trans[c], False)
                return self.set_message(FWD, c, t, out)
            out = self.send_values(self.cavity(c, t, SKIP_FWD), self.trans[c], True)
            return self.set_message(BWD, c, t - 1, out)
        k = e - nchain
        c, t = k // T, k % T
        if way == 0:
            out = self.send_values(self.cavity(c, t, SKIP_BELOW), self.pair[c][t], False)
            return self.set_message(ABOVE, c + 1, t, out)
        out = self.send_values(self.cavity(c + 1, t, SKIP_ABOVE), self.pair[c][t], True)
        return self.set_message(BELOW, c, t, out)

    def spine(self, c):
        """grid_spine with maxp: chain_max_scores, then the messages from its scores."""
        T, n, E = self.T, self.n[c], self.trans[c]
        s = [[self.node[c][t][i] + self.msg[ABOVE][c][t][i] + self.msg[BELOW][c][t][i] for i in range(n)]
             for t in range(T)]
        fwd = [list(s[0])] + [None] * (T - 1)
        bwd = [None] * (T - 1) + [[0.0] * n]
        for t in range(1, T):
            fwd[t] = [into + s[t][j] for j, into in enumerate(_max_into(fwd[t - 1], E, n))]
        for t in range(T - 1, 0, -1):
            row = []
            for i in range(n):
                best = NEG
                for j in range(n):
                    v = E[i][j] + s[t][j] + bwd[t][j]
                    best = v if v > best else best
                row.append(best)
            bwd[t - 1] = row
        change = 0.0
        for t in range(T):
            if t < T - 1:
                change = max(change, self.set_message(BWD, c, t, list(bwd[t])))
            if t > 0:
                change = max(change, self.set_message(FWD, c, t, _max_into(fwd[t - 1], E, n)))
        return change

    def comb(self, c):
        C, T = self.C, self.T
        base = C * (T - 1)
        change = 0.0
        for t in range(T):
            for d in range(c):
                change = max(change, self.send(base + d * T + t, 0))
            for d in range(C - 1, c, -1):
                change = max(change, self.send(base + (d - 1) * T + t, 1))
        change = max(change, self.spine(c))
        for t in range(T):
            for d in range(c, 0, -1):
                change = max(change, self.send(base + (d - 1) * T + t, 1))
            for d in range(c, C - 1):
                change = max(change, self.send(base + d * T + t, 0))
        return change

    def random_sweep(self, rng):
        """rng: a one-element list holding splitmix64's state."""
        E = self.C * (self.T - 1) + (self.C - 1) * self.T
        perm = list(range(E))
        for i in range(E - 1, 0, -1):
            j = splitmix64(rng) % (i + 1)
            perm[i], perm[j] = perm[j], perm[i]
        change = 0.0
        for way in range(2):
            for e in perm:
                change = max(change, self.send(e, way))
        return change

    def sweep(self, schedule, rng):
        tree = self.C == 1 or self.T == 1
        if schedule == 0:
            return max(self.comb(c) for c in range(1 if tree else self.C))
        return self.random_sweep(rng)

    def run(self, schedule=0, tol=1e-3, max_sweeps=100, seed=0, history=None):
        """grid_bp_run with maxp: (sweeps, converged). history: a list that gets each sweep's
        change and messages (a tuple of floats)."""
        tree = self.C == 1 or self.T == 1
        rng = [seed & MASK64]
        sweeps = 0
        while sweeps < max_sweeps:
            change = self.sweep(schedule, rng)
            sweeps += 1
            if history is not None:
                history.append((change, self.state()))
            if change <= tol or (tree and schedule == 0):
                return sweeps, True
        return sweeps, False

    def state(self):
        return tuple(x for k in self.msg for ch in k for row in ch for x in row)

    def decode(self):
        """grid_bp_max's decoding from the current messages: (labels [C][T], score)."""
        C, T = self.C, self.T
        lab = [[0] * T for _ in range(C)]
        for t in range(T - 1, -1, -1):
            for c in range(C):
                skip = (SKIP_BWD if t < T - 1 else 0) | (SKIP_ABOVE if c > 0 else 0)
                cav = self.cavity(c, t, skip)
                if c > 0:
                    pr = self.pair[c - 1][t][lab[c - 1][t]]
                    cav = [a + b for a, b in zip(cav, pr)]
                if t < T - 1:
                    cav = [a + self.trans[c][i][lab[c][t + 1]] for i, a in enumerate(cav)]
                best, k = cav[0], 0
                for i in range(1, len(cav)):
                    if cav[i] > best:
                        best, k = cav[i], i
                lab[c][t] = k
        return lab, self.score(lab)

    def score(self, lab):
        s = 0.0
        for c in range(self.C):
            for t in range(self.T):
                s += self.node[c][t][lab[c][t]]
                if t > 0:
                    s += self.trans[c][lab[c][t - 1]][lab[c][t]]
                if c < self.C - 1:
                    s += self.pair[c][t][lab[c][t]][lab[c + 1][t]]
        return s


def splitmix64(state):
    state[0] = (state[0] + 0x9E3779B97F4A7C15) & MASK64
    z = state[0]
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def bp_max(node, trans, pair, schedule=0, tol=1e-3, max_sweeps=100, seed=0):
    """(labels [C][T], score, sweeps, converged) as the kernel's bp_max gives them for one grid."""
    mp = MaxProduct(node, trans, pair)
    sweeps, converged = mp.run(schedule, tol, max_sweeps, seed)
    lab, score = mp.decode()
    return lab, score, sweeps, converged


def _max_into(prev, E, n):
    """max over i of prev[i] + E[i][j], for each j (the order of the kernel's compares)."""
    out = []
    for j in range(n):
        best = NEG
        for i in range(n):
            v = prev[i] + E[i][j]
            best = v if v > best else best
        out.append(best)
    return out
