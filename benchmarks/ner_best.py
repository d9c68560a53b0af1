"""NER beyond a local CRF without external data (issue 34): training encodings, two-stage
non-local features (Krishnan & Manning 2006), MCE-F, word vectors from eng.train's own text, and
their sum, each scored on eng.testa with McNemar's test against the row it builds on.

Every row is a chain of `crftk` commands trained on eng.train (the official test set is never
read); a step is skipped when its output exists, so an interrupted run resumes. The two-stage
rows share a first stage (the local CRF, or the local CRF on BILOU labels) and its out-of-fold
labels (10 folds of documents, `--first-stage-output FIRST.oof`, then `--first-stage-labels`). The word vectors are benchmarks/svd_vectors.py's,
from eng.train's words alone.

    python benchmarks/ner_best.py run --data ../shared/data/conll2003 --out out/ner-ablation
    python benchmarks/ner_best.py report --out out/ner-ablation --results benchmarks/results/ner-best.md
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import crftk_timed, eval_json  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / "templates"
#: MCE-F continued from a MAP model, as make mcef runs it
MCEF = ["--objective", "mce-f", "--algorithm", "quickprop", "--c2", "5e-7", "--first-step", "0.01", "--max-iter", "40"]
VECTORS = ["--vectors", "emb={out}/ner.vec", "--vectors-lookup", "lowercase"]
#: the aggregate lines of templates/conll2003-ner-2stage.tmpl
DOC = ["Udtok:%doc[0,3,token]", "Udent:%doc[0,3,entity]", "Udsup:%doc[0,3,super]"]
CORPUS = ["Uctok:%corpus[0,3,token]", "Ucent:%corpus[0,3,entity]", "Ucsup:%corpus[0,3,super]"]

CTX = ["Uctx:%ctx[0,0,2]"]
BESIDE = ["Ufdt:%x[0,3]/%doc[0,3,token]", "Ufde:%x[0,3]/%doc[0,3,entity]", "Ufct:%x[0,3]/%corpus[0,3,token]"]
BILOU = ["--train-scheme", "bilou"]

#: (row, what it adds, the row it is compared with, how it is trained)
#: how: ("local", template, extra args, template lines added) | ("two", local template, template lines
#:      added, extra args, first-stage row[, folds: 10]) | ("mcef", the MAP row it continues, extra args)
ROWS = [
    ("ner1", "local CRF (conll2003-ner.tmpl, MAP)", None, ("local", "conll2003-ner.tmpl", [], [])),
    ("ner1-bilou", "+ BILOU training encoding", "ner1", ("local", "conll2003-ner.tmpl", BILOU, [])),
    ("ner1-iobes", "+ IOBES training encoding", "ner1",
     ("local", "conll2003-ner.tmpl", ["--train-scheme", "iobes"], [])),
    ("v-doc", "two-stage: + document token/entity/super-entity majority", "ner1",
     ("two", "conll2003-ner.tmpl", DOC, [], "ner1")),
    ("v-dc", "+ corpus-level majorities", "v-doc", ("two", "conll2003-ner.tmpl", DOC + CORPUS, [], "ner1")),
    ("v-dch", "+ prediction history (%doc hist)", "v-dc",
     ("two", "conll2003-ner.tmpl", DOC + CORPUS + ["Udhis:%doc[0,3,hist]"], [], "ner1")),
    ("v-dcx", "+ context aggregation (%ctx)", "v-dc", ("two", "conll2003-ner.tmpl", DOC + CORPUS + CTX, [], "ner1")),
    ("v-dcf", "+ the first stage's own label", "v-dc",
     ("two", "conll2003-ner.tmpl", DOC + CORPUS + ["Uf0:%x[0,3]"], [], "ner1")),
    ("lctx", "local CRF + context aggregation alone (%ctx, one stage)", "ner1",
     ("local", "conll2003-ner.tmpl", [], CTX)),
    ("v-dcx2", "two-stage + %ctx + the majorities beside the first stage's label", "v-dcx",
     ("two", "conll2003-ner.tmpl", DOC + CORPUS + CTX + BESIDE, [], "ner1")),
    ("ner1-mcef", "local CRF + MCE-F", "ner1", ("mcef", "ner1", [])),
    ("v-dc-mcef", "two-stage (document + corpus) + MCE-F", "ner1-mcef", ("mcef", "v-dc", [])),
    ("vec", "local CRF + word vectors from eng.train", "ner1", ("local", "conll2003-vectors.tmpl", VECTORS, [])),
    ("vec-mcef", "local CRF + vectors + MCE-F", "vec", ("mcef", "vec", [])),
    ("vdc", "two-stage (document + corpus) + vectors", "vec",
     ("two", "conll2003-vectors.tmpl", DOC + CORPUS, VECTORS, "ner1")),
    ("vdc-mcef", "two-stage (document + corpus) + vectors + MCE-F", "vec-mcef", ("mcef", "vdc", [])),
    ("vec-bilou", "local CRF + vectors + BILOU", "vec", ("local", "conll2003-vectors.tmpl", VECTORS + BILOU, [])),
    ("vec-bilou-mcef", "local CRF + vectors + BILOU + MCE-F (all but the non-local features)", "vec-bilou",
     ("mcef", "vec-bilou", BILOU)),
    ("two-bilou", "two-stage (first stage ner1-bilou, 10 folds) + %ctx + majorities beside its label + vectors "
     "+ BILOU", "vec-bilou", ("two", "conll2003-vectors.tmpl", DOC + CORPUS + BESIDE + CTX, VECTORS + BILOU,
                              "ner1-bilou", 10)),
    ("two-bilou-mcef", "+ MCE-F", "vec-bilou-mcef", ("mcef", "two-bilou", BILOU)),
    ("best", "the same second stage over the first stage vec-bilou-mcef (5 folds): make ner-best", "vec-bilou-mcef",
     ("two", "conll2003-vectors.tmpl", DOC + CORPUS + BESIDE + CTX, VECTORS + BILOU, "vec-bilou-mcef", 5)),
    ("best-mcef", "+ MCE-F (a check)", "best", ("mcef", "best", BILOU)),
]


ROW_OF = {row[0]: row for row in ROWS}


def cmd_run(a):
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data = Path(a.data).resolve()
    train, testa = data / "eng.train", data / "eng.testa"
    times_path = out / "times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    if not (out / "ner.vec").exists():
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "svd_vectors.py"), "-o", str(out / "ner.vec"),
                        str(train)], check=True)
    wanted = set(a.rows) if a.rows else None
    for name, _, _, how in ROWS:
        if wanted is not None and name not in wanted:
            continue
        model, log = out / f"{name}.model", out / f"{name}.log"
        if not model.exists():
            common = ["train", "--threads", a.threads, "-m", model]
            if how[0] == "local":
                template = out / f"{name}.tmpl"
                template.write_text((TEMPLATES / how[1]).read_text() + "\n".join(how[3]) + "\n")
                args = [*common, "-t", template, *[x.format(out=out) for x in how[2]], train]
            elif how[0] == "two":
                template = out / f"{name}.tmpl"
                template.write_text((TEMPLATES / how[1]).read_text() + "\n".join(how[2]) + "\n")
                oof = out / f"{how[4]}.oof"      # the out-of-fold labels of the first stage, shared
                labels = (["--first-stage-labels", oof] if oof.exists()
                          else ["--first-stage-folds", str(how[5] if len(how) > 5 else 10), "--first-stage-output", oof])
                args = [*common, "-t", template, "--first-stage", out / f"{how[4]}.model", *labels,
                        *[x.format(out=out) for x in how[3]], train]
            else:
                start = ROW_OF[how[1]]
                labels = ["--first-stage-labels", out / f"{start[3][4]}.oof"] if start[3][0] == "two" else []
                args = [*common, "--init", out / f"{how[1]}.model", *labels, *MCEF, *how[2], train]
            times[name] = crftk_timed(args, log)
            times_path.write_text(json.dumps(times, indent=1))
        tagged = out / f"{name}.testa"
        if not tagged.exists():
            times["tag:" + name] = crftk_timed(["tag", "--threads", a.threads, "-m", model, "-o", tagged, testa], log)
            times_path.write_text(json.dumps(times, indent=1))


def score(out, name, other=None):
    return eval_json(out / f"{name}.testa", None if other is None else out / f"{other}.testa")


def training_seconds(path):
    """The training time a model's record gives (a two-stage model's: its second stage's)."""
    sys.path.insert(0, str(REPO))
    from crftk.model import Model
    model = Model.load(path)
    info = model.info
    if model.kind == "two-stage":
        info = info["two_stage"]["stages"][1]["info"]
    return info.get("seconds_in_all", float("nan"))


def cmd_report(a):
    out = Path(a.out).resolve()
    times_path = out / "times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    for name, *_ in ROWS:
        if name not in times and (out / f"{name}.model").exists():
            times[name] = training_seconds(out / f"{name}.model")
    lines = ["| row | model | eng.testa F1 | against | McNemar p (tokens) | training s (2nd stage) | tagging s |",
             "|---|---|---|---|---|---|---|"]
    for name, what, other, _ in ROWS:
        if not (out / f"{name}.testa").exists():
            continue
        has_other = other is not None and (out / f"{other}.testa").exists()
        d = score(out, name, other if has_other else None)
        p = d.get("mcnemar", {}).get("p_value")
        lines.append(f"| {name} | {what} | {d['overall']['f1']:.2f} | {other or '-'} | "
                     f"{'-' if p is None else f'{p:.2g}'} | {times.get(name, float('nan')):.0f} | "
                     f"{times.get('tag:' + name, float('nan')):.1f} |")
    text = "\n".join(lines)
    print(text)
    if a.results:
        Path(a.results).write_text(text + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="train and tag every row (or the rows named)")
    p.add_argument("rows", nargs="*")
    p.add_argument("--data", default=os.environ.get("CONLL2003", str(REPO.parent / "shared" / "data" / "conll2003")))
    p.add_argument("--out", default="out/ner-ablation")
    p.add_argument("--threads", default="2")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("report", help="the table of the rows trained so far")
    p.add_argument("--out", default="out/ner-ablation")
    p.add_argument("--results")
    p.set_defaults(func=cmd_report)
    a = ap.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
