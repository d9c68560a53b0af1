"""MCE-F training (Suzuki et al. 2006) from a MAP model, against that MAP model.

For each task: train MAP (L-BFGS, c2=1) unless its model exists, continue from
it with --objective mce-f --algorithm quickprop for a fixed number of
iterations (no development-set selection: the weights kept are those of the
lowest training objective), tag the development set with both, and compare
chunk F1, sentence accuracy and McNemar's test (tokens and sentences).

    python benchmarks/mcef.py --task chunk --out out/mcef     # CoNLL-2000 dev.txt
    python benchmarks/mcef.py --task ner --out out/mcef       # CoNLL-2003 eng.testa
"""

import argparse
import json
import os
import time

from common import corpus_files, crftk, note as _note, publish


TASKS = {
    # task: (data variable, train file, dev file, template, MCE-F c2)
    "chunk": ("CONLL2000", "train.txt", "dev.txt", "templates/chunking-crfpp.tmpl", "5e-7"),
    "ner": ("CONLL2003", "eng.train", "eng.testa", "templates/conll2003-ner.tmpl", "5e-7"),
}


def note(msg):
    _note("mcef", msg)


def scores(tagged, other=None, unit="token"):
    args = ["eval", "--json", tagged] + (["--mcnemar", other, "--unit", unit] if other else [])
    return json.loads(crftk(*args))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=sorted(TASKS), required=True)
    ap.add_argument("--data", help="folder of the task's data (default: $CONLL2000 / $CONLL2003 or ../shared/data/...)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--c2", help="MCE-F's L2 coefficient (default: the task's)")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--first-step", default="0.01")
    ap.add_argument("--threads", default="0")
    a = ap.parse_args(argv)
    var, train_name, dev_name, template, c2 = TASKS[a.task]
    train, dev = corpus_files(var, (train_name, dev_name), a.data, "mcef.py")
    c2 = a.c2 or c2
    os.makedirs(a.out, exist_ok=True)
    p = lambda name: os.path.join(a.out, f"{a.task}-{name}")  # noqa: E731
    if not os.path.exists(p("map.model")):
        note(f"training MAP on {train}")
        t = time.perf_counter()
        crftk("train", "-t", template, "-m", p("map.model"), "--threads", a.threads, train, log=p("map.log"))
        note(f"MAP trained in {time.perf_counter() - t:.0f}s")
    note(f"MCE-F from MAP, c2={c2}, {a.iterations} QuickProp iterations")
    t = time.perf_counter()
    crftk("train", "--init", p("map.model"), "--objective", "mce-f", "--algorithm", "quickprop", "--c2", c2,
          "--first-step", a.first_step, "--max-iter", str(a.iterations), "--threads", a.threads,
          "-m", p("mcef.model"), train, log=p("mcef.log"))
    seconds = time.perf_counter() - t
    for name in ("map", "mcef"):
        crftk("tag", "-m", p(f"{name}.model"), "-o", p(f"{name}.tagged"), dev)
    base = scores(p("map.tagged"))
    tok = scores(p("mcef.tagged"), p("map.tagged"), "token")
    sent = scores(p("mcef.tagged"), p("map.tagged"), "sentence")
    rows = [("MAP (L-BFGS, c2=1)", base), (f"MCE-F from MAP (c2={c2}, {a.iterations} it., {seconds:.0f}s)", tok)]
    lines = [f"| {a.task}: {dev_name} | F1 | P | R | sentence acc. | token acc. |", "|---|---|---|---|---|---|"]
    for label, s in rows:
        o = s["overall"]
        lines.append(f"| {label} | {o['f1']:.2f} | {o['precision']:.2f} | {o['recall']:.2f} | "
                     f"{s['sentence_accuracy']:.2f} | {s['token_accuracy']:.2f} |")
    lines.append("")
    lines.append(f"McNemar MCE-F vs MAP: tokens p = {tok['mcnemar']['p_value']:.3g}, "
                 f"sentences p = {sent['mcnemar']['p_value']:.3g}")
    publish("\n".join(lines), p("results.md"))


if __name__ == "__main__":
    main()
