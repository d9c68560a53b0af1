"""NER beyond a local CRF without external data (issue 34): training encodings, two-stage
non-local features (Krishnan & Manning 2006), MCE-F, word vectors from eng.train, and their sum.

Every row is a chain of `crftk` commands trained on eng.train and scored on eng.testa (the
official test set is not read); each step is skipped when its output exists, so an interrupted
run resumes. The two-stage rows share the out-of-fold first-stage labels of their first stage
(`--first-stage-output`, then `--first-stage-labels`).

    python benchmarks/ner_best.py run --data ../shared/data/conll2003 --out out/ner-best [ROW ...]
    python benchmarks/ner_best.py report --out out/ner-best --results benchmarks/results/ner-best.md
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CRFTK = [sys.executable, "-m", "crftk.cli"]
LOCAL = REPO / "templates" / "conll2003-ner.tmpl"
SECOND = REPO / "templates" / "conll2003-ner-2stage.tmpl"
VECTORS = REPO / "templates" / "conll2003-vectors.tmpl"
#: MCE-F continued from a MAP model, as make mcef runs it (benchmarks/mcef.py)
MCEF = ["--objective", "mce-f", "--algorithm", "quickprop", "--c2", "5e-7", "--first-step", "0.01", "--max-iter", "40"]
#: the aggregate lines of conll2003-ner-2stage.tmpl each two-stage row keeps (by name prefix)
DOC = ("Udtok", "Udent", "Udsup")
CORPUS = ("Uctok", "Ucent", "Ucsup")


def run(args, log):
    """Run a crftk command; its stderr is appended to ``log``; returns (stdout, seconds)."""
    args = [str(a) for a in args]
    print("+ crftk " + " ".join(args), flush=True)
    t0 = time.perf_counter()
    with open(log, "a") as err:
        p = subprocess.run(CRFTK + args, stderr=err, stdout=subprocess.PIPE, text=True, cwd=REPO)
    if p.returncode != 0:
        sys.exit(f"crftk {' '.join(args)} failed (exit {p.returncode}); see {log}")
    return p.stdout, time.perf_counter() - t0


class Runner:
    def __init__(self, a):
        self.out = Path(a.out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.data = Path(a.data).resolve()
        self.train, self.testa = self.data / "eng.train", self.data / "eng.testa"
        self.threads = str(a.threads)
        self.folds = str(a.folds)
        self.times = self._load("times.json")

    def _load(self, name):
        path = self.out / name
        return json.loads(path.read_text()) if path.exists() else {}

    def path(self, name):
        return self.out / name

    def step(self, output, args, key=None):
        """Run the command unless its output exists; its seconds are kept under ``key``."""
        output = self.path(output)
        if output.exists():
            print(f"= {output.name} exists, skipped", flush=True)
            return output
        _, seconds = run(args, self.out / "log.txt")
        if key:
            self.times[key] = self.times.get(key, 0) + seconds
            (self.out / "times.json").write_text(json.dumps(self.times, indent=1))
        return output

    def train(self, name, args, key=None):
        return self.step(f"{name}.model", ["train", "--threads", self.threads, *args, "-m", self.path(f"{name}.model"),
                                           self.train], key or name)

    def template(self, name, keep):
        """conll2003-ner-2stage.tmpl with only the aggregate lines named in ``keep`` (and ``extra`` lines)."""
        path = self.path(f"{name}.tmpl")
        lines = []
        for line in SECOND.read_text().splitlines():
            if line.startswith(("Ud", "Uc")) and ":%" in line and line.split(":")[0] in DOC + CORPUS + ("Udhis",):
                if line.split(":")[0] not in keep:
                    continue
            lines.append(line)
        if "Udhis" in keep:
            lines.append("Udhis:%doc[0,3,hist]")
        if "Uf0" in keep:
            lines.append("Uf0:%x[0,3]")
        path.write_text("\n".join(lines) + "\n")
        return path

    def tag(self, name):
        tagged = self.path(f"{name}.testa")
        if not tagged.exists():
            _, seconds = run(["tag", "--threads", self.threads, "-m", self.path(f"{name}.model"), "-o", tagged,
                              self.testa], self.out / "log.txt")
            self.times[f"tag:{name}"] = seconds
            (self.out / "times.json").write_text(json.dumps(self.times, indent=1))
        return tagged


def local_rows(r):
    r.train("local", ["-t", LOCAL])
    for scheme in ("bilou", "iobes"):
        r.train(f"local-{scheme}", ["-t", LOCAL, "--train-scheme", scheme])
    r.step("local-mcef.model", ["train", "--threads", r.threads, "--init", r.path("local.model"), *MCEF,
                                "-m", r.path("local-mcef.model"), r.train], "local-mcef")


def two_stage(r, name, first, keep, mcef=False, extra=()):
    """A two-stage model over ``first`` whose template keeps the aggregate lines ``keep``."""
    oof = r.path(f"{first}.oof.txt")
    if oof.exists():
        labels = ["--first-stage-labels", oof]
    else:
        labels = ["--first-stage-folds", r.folds, "--first-stage-output", oof]
    template = r.template(name, keep)
    r.train(name, ["-t", template, "--first-stage", r.path(f"{first}.model"), *labels, *extra])
    if mcef:
        r.step(f"{name}-mcef.model", ["train", "--threads", r.threads, "--init", r.path(f"{name}.model"),
                                      "--first-stage-labels", oof, *MCEF, "-m", r.path(f"{name}-mcef.model"),
                                      r.train], f"{name}-mcef")


def stage_rows(r):
    two_stage(r, "doc", "local", DOC)
    two_stage(r, "doc-corpus", "local", DOC + CORPUS)
    two_stage(r, "doc-corpus-hist", "local", DOC + CORPUS + ("Udhis",))
    two_stage(r, "doc-corpus-f0", "local", DOC + CORPUS + ("Uf0",))


ROWS = {"local": local_rows, "stages": stage_rows}


def cmd_run(a):
    r = Runner(a)
    for name in a.rows or list(ROWS):
        ROWS[name](r)
    for model in sorted(r.out.glob("*.model")):
        r.tag(model.stem)


def score(out, name, other=None):
    tagged = out / f"{name}.testa"
    if not tagged.exists():
        return None
    args = ["eval", "--json", tagged]
    if other is not None and (out / f"{other}.testa").exists():
        args += ["--mcnemar", out / f"{other}.testa"]
    p = subprocess.run(CRFTK + [str(x) for x in args], stdout=subprocess.PIPE, text=True, cwd=REPO, check=True)
    return json.loads(p.stdout)


def cmd_report(a):
    out = Path(a.out).resolve()
    times = json.loads((out / "times.json").read_text()) if (out / "times.json").exists() else {}
    rows = [l.split("|") for l in a.rows.split(",")] if a.rows else []
    lines = ["| model | eng.testa F1 | against | McNemar p (tokens) | training s | tagging s |", "|---|---|---|---|---|---|"]
    for name, other in rows:
        d = score(out, name, other or None)
        if d is None:
            continue
        p = d.get("mcnemar", {}).get("p_value")
        lines.append(f"| {name} | {d['overall']['f1']:.2f} | {other or '-'} | "
                     f"{'-' if p is None else f'{p:.2g}'} | {times.get(name, 0):.0f} | "
                     f"{times.get('tag:' + name, 0):.1f} |")
    text = "\n".join(lines)
    print(text)
    if a.results:
        Path(a.results).write_text(text + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("rows", nargs="*", choices=[*ROWS, []] and list(ROWS))
    p.add_argument("--data", default=os.environ.get("CONLL2003", str(REPO.parent / "shared" / "data" / "conll2003")))
    p.add_argument("--out", default="out/ner-best")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--folds", type=int, default=10)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("report")
    p.add_argument("--out", default="out/ner-best")
    p.add_argument("--rows", default="", help="NAME|AGAINST,... in order")
    p.add_argument("--results")
    p.set_defaults(func=cmd_report)
    a = ap.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
