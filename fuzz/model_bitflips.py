"""Bit flips in a model file: each must be rejected with a CrftkError or change nothing.

Builds a small model on data/demo.train (a template with several macros per
line, derived tests, a plain B line and observation-conditioned B lines),
then loads damaged copies of its bytes with ``Model.from_bytes``:

- every single-bit flip of everything before the payload (preamble and header);
- ``--cases`` random flips of 1 to 16 bits anywhere in the file;
- ``--cli`` cases (half of them header flips, half random flips) through the
  command line, ``crftk tag -vv`` in a subprocess.

A case is *rejected* when loading raises CrftkError (one line; through the
CLI: exit status 1 and one ``crftk: error:`` line on stderr), *harmless* when
the model loads and tagging a test file (``tag -vv``: labels and every
probability) gives byte-identical output, and a *failure* otherwise: another
exception, while loading or later (tagging, ``info``, ``dump``), or a model
that loads and tags differently. A crash of the interpreter (segfault) is a
failure too; faulthandler then prints where it happened.

    python fuzz/model_bitflips.py --cases 10000 --seed 1
    python fuzz/model_bitflips.py --format-version 1    # the previous format
    python fuzz/model_bitflips.py --model my.model      # a model of yours (header flips only
                                                        # take a while on a big header)

Exit status 0 when there is no failure, 1 otherwise. The code tested is the
checkout this script lives in.
"""

import argparse
import faulthandler
import io
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from crftk.io import container  # noqa: E402
from crftk.io.conll import read_corpus  # noqa: E402
from crftk.commands.tag import Tagger  # noqa: E402
from crftk.errors import CrftkError  # noqa: E402
from crftk.model import Model  # noqa: E402
from crftk.features.templates import parse_template  # noqa: E402
from crftk.commands.train import fit  # noqa: E402

TEMPLATE = """\
U00:%x[0,0]
U01:%x[-1,0]/%x[0,0]
U02:%x[-1,1]/%x[0,1]/%x[1,1]
U03:%X[0,0]/%suf[0,0,3]/%x[0,1]
U04:%shape[0,0]/%x[-1,1]
U05:%x[-2,1]/%x[-1,1]/%x[0,1]/%x[1,1]
B
B01:%x[0,1]
B02:%x[-1,1]/%x[0,1]
"""


def build_model(n_train=200, max_iter=15):
    """The model under test, trained on the first sentences of data/demo.train."""
    train = read_corpus(os.path.join(ROOT, "data", "demo.train"))[:n_train]
    return fit(train, parse_template(TEMPLATE, "fuzz.tmpl"), max_iter=max_iter, threads=1,
               log=lambda msg: None)


def model_bytes(model, version=None):
    """The model file's bytes, in the given container version (None: the current one)."""
    if version is None:
        return model.to_bytes()
    return container.dumps(*model._parts(), version=version)


class Checker:
    """Classifies damaged copies of one model file."""

    def __init__(self, model, test_sentences):
        self.test = test_sentences
        self.reference = self.tag(model)
        self.counts = {"cases": 0, "rejected": 0, "harmless": 0, "failures": 0}
        self.failures = []      # (description, what happened)

    def tag(self, model):
        out = io.StringIO()
        Tagger(model, threads=1).write_batch(self.test, out, marginals=2)
        return out.getvalue()

    def check(self, data, description):
        self.counts["cases"] += 1
        try:
            model = Model.from_bytes(data, name="fuzz.model")
        except CrftkError as e:
            if "\n" in str(e):
                return self._fail(description, f"multi-line error: {str(e)[:200]!r}")
            self.counts["rejected"] += 1
            return "rejected"
        except Exception:
            return self._fail(description, "load: " + _last_line(traceback.format_exc()))
        try:
            output = self.tag(model)
            model.summary()
            model.dump(io.StringIO())
        except Exception:
            return self._fail(description, "loaded, then: " + _last_line(traceback.format_exc()))
        if output != self.reference:
            return self._fail(description, "loaded and tagged differently")
        self.counts["harmless"] += 1
        return "harmless"

    def _fail(self, description, what):
        self.counts["failures"] += 1
        self.failures.append((description, what))
        return "failure"


class CliChecker:
    """Classifies damaged model files through ``crftk tag -vv`` in a subprocess (this checkout's
    crftk), as a user would meet them: exit status, stderr and the tagged output."""

    def __init__(self, data, test_sentences, workdir):
        self.dir = workdir
        self.test = os.path.join(workdir, "test.txt")
        with open(self.test, "w", encoding="utf-8") as f:
            for s in test_sentences:
                f.write("".join(" ".join(row) + "\n" for row in s.rows) + "\n")
        self.env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        code, self.reference, err = self.run(data)
        if code != 0:
            raise SystemExit(f"the intact model does not tag through the CLI: {err.strip()}")
        self.counts = {"cases": 0, "rejected": 0, "harmless": 0, "failures": 0}
        self.failures = []

    def run(self, data):
        model = os.path.join(self.dir, "fuzz.model")
        with open(model, "wb") as f:
            f.write(data)
        p = subprocess.run([sys.executable, "-m", "crftk.cli", "tag", "-vv", "-p", "1", "-m", model,
                            self.test], capture_output=True, env=self.env, timeout=600)
        return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")

    def check(self, data, description):
        self.counts["cases"] += 1
        code, out, err = self.run(data)
        lines = err.splitlines()
        if code == 1 and len(lines) == 1 and lines[0].startswith("crftk: error: ") and not out:
            self.counts["rejected"] += 1
        elif code == 0 and out == self.reference:
            self.counts["harmless"] += 1
        else:
            self.counts["failures"] += 1
            self.failures.append((description, f"exit {code}, stderr {err.strip()[-200:]!r}, "
                                               f"output {'same' if out == self.reference else 'different'}"))


def _last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "?"


def flip(data, bits):
    out = bytearray(data)
    for b in bits:
        out[b >> 3] ^= 1 << (b & 7)
    return bytes(out)


def header_flips(data, checker, end):
    """Every single-bit flip of bytes [0, end)."""
    for bit in range(end * 8):
        checker.check(flip(data, [bit]), f"header bit {bit} (byte {bit >> 3}, bit {bit & 7})")


def random_flips(data, checker, n, rng, max_bits=16):
    """n cases of 1..max_bits distinct random bits flipped anywhere in the file."""
    total = len(data) * 8
    for _ in range(n):
        bits = sorted(rng.sample(range(total), rng.randint(1, max_bits)))
        checker.check(flip(data, bits), "bits " + ",".join(map(str, bits)))


def report(name, counts, failures, show):
    print(f"{name}: cases {counts['cases']}  rejected {counts['rejected']}  "
          f"harmless {counts['harmless']}  failures {counts['failures']}")
    for description, what in failures[:show]:
        print(f"  failure: {description}: {what}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000, help="random flips of 1-16 bits (default 2000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--format-version", type=int, default=None,
                    help="container version to write the model in (default: the current one)")
    ap.add_argument("--no-header", action="store_true", help="skip the exhaustive header flips")
    ap.add_argument("--cli", type=int, default=20,
                    help="cases run through the command line in a subprocess (default 20)")
    ap.add_argument("--model", help="damage this model file instead of training a small one")
    ap.add_argument("--show", type=int, default=5, help="failures printed per part (default 5)")
    args = ap.parse_args(argv)
    faulthandler.enable()

    t0 = time.perf_counter()
    if args.model:
        model = Model.load(args.model)
        with open(args.model, "rb") as f:
            data = f.read() if args.format_version is None else model_bytes(model, args.format_version)
    else:
        model = build_model()
        data = model_bytes(model, args.format_version)
    test = read_corpus(os.path.join(ROOT, "data", "demo.test"))[:60]
    end = header_end(data)
    version = int.from_bytes(data[8:12], "little")
    print(f"model: format version {version}, {len(data)} bytes, header {end} bytes, "
          f"{model.space.n_labels} labels, {model.weights.size} parameters "
          f"({time.perf_counter() - t0:.1f}s to build)")

    failed = False
    if not args.no_header:
        t = time.perf_counter()
        checker = Checker(model, test)
        header_flips(data, checker, end)
        report(f"single-bit flips of the header ({time.perf_counter() - t:.1f}s)", checker.counts,
               checker.failures, args.show)
        failed |= bool(checker.counts["failures"])
    if args.cases > 0:
        t = time.perf_counter()
        checker = Checker(model, test)
        random_flips(data, checker, args.cases, random.Random(args.seed))
        report(f"random 1-16 bit flips, seed {args.seed} ({time.perf_counter() - t:.1f}s)",
               checker.counts, checker.failures, args.show)
        failed |= bool(checker.counts["failures"])
    if args.cli > 0:
        t = time.perf_counter()
        rng = random.Random(args.seed + 1)
        with tempfile.TemporaryDirectory(prefix="crftk-fuzz-") as workdir:
            checker = CliChecker(data, test, workdir)
            for i in range(args.cli):
                if i % 2 == 0:
                    bit = rng.randrange(end * 8)
                    checker.check(flip(data, [bit]), f"CLI: header bit {bit}")
                else:
                    bits = sorted(rng.sample(range(len(data) * 8), rng.randint(1, 16)))
                    checker.check(flip(data, bits), "CLI: bits " + ",".join(map(str, bits)))
        report(f"through the CLI, half header bits, half random flips ({time.perf_counter() - t:.1f}s)",
               checker.counts, checker.failures, args.show)
        failed |= bool(checker.counts["failures"])
    print("FAILURES" if failed else "no failure: every case rejected with one line or harmless")
    return 1 if failed else 0


def header_end(data):
    """Bytes before the payload: the preamble and the header (and its padding)."""
    (version,) = struct.unpack_from("<I", data, 8)
    if version == 1:
        return 20 + struct.unpack_from("<Q", data, 12)[0]
    return 96 + struct.unpack_from("<Q", data, 16)[0]


if __name__ == "__main__":
    sys.exit(main())
