"""Feature induction (crftk induce) against fixed conjunction patterns.

The fixed-pattern model uses the same atomic tests plus every pairwise
conjunction of the template's lines (all pairs in the window), trained with
L-BFGS to convergence; the induced model grows its conjunctions with
`crftk induce` (McCallum & Li's settings), then, as a second row, is trained on
to convergence with `crftk train --init`. Both are scored on the development
set with `crftk eval`.

    python benchmarks/induce.py --task ner --out out/induce      # CoNLL-2003 eng.testa
    python benchmarks/induce.py --task chunk --out out/induce    # CoNLL-2000 dev.txt
"""

import argparse
import json
import os
import re
import time

from common import REPO, corpus_files, crftk, note as _note, publish


TASKS = {
    "ner": ("CONLL2003", "eng.train", "eng.testa", "templates/conll2003-atomic.tmpl"),
    "chunk": ("CONLL2000", "train.txt", "dev.txt", "templates/chunking-atomic.tmpl"),
}


def note(msg):
    _note("induce", msg)


def pairwise_template(atomic_text):
    """The atomic lines plus one line per pair of them (their texts joined by '/')."""
    lines = [ln.strip() for ln in atomic_text.splitlines()]
    units = [ln for ln in lines if ln.startswith("U")]
    rest = [ln for ln in lines if ln and not ln.startswith(("U", "#"))]
    pairs = [f"{a}/{b}" for i, a in enumerate(units) for b in units[i + 1:]]
    return "\n".join(units + pairs + rest) + "\n", len(pairs)


def info(model):
    out = crftk("info", model)
    get = lambda key: re.search(rf"^{key}\s+(\S+)", out, re.M).group(1)  # noqa: E731
    return {"state_features": int(get("state_features")), "attributes": int(get("attributes"))}


def score(tagged):
    return json.loads(crftk("eval", "--json", tagged))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=sorted(TASKS), required=True)
    ap.add_argument("--data", help="folder of the task's data (default: $CONLL2003 / $CONLL2000 or ../shared/data/...)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", default="20")
    ap.add_argument("--skip-fixed", action="store_true", help="reuse the fixed-pattern results of an earlier run")
    a = ap.parse_args(argv)
    var, train_name, dev_name, atomic = TASKS[a.task]
    train, dev = corpus_files(var, (train_name, dev_name), a.data, "induce.py")
    os.makedirs(a.out, exist_ok=True)
    p = lambda name: os.path.join(a.out, f"{a.task}-{name}")  # noqa: E731
    rows = {}
    results = p("results.json")
    if a.skip_fixed and os.path.exists(results):
        with open(results) as fh:
            rows = {k: v for k, v in json.load(fh).items() if k == "fixed"}

    if "fixed" not in rows:
        with open(os.path.join(REPO, atomic)) as fh:
            text, n_pairs = pairwise_template(fh.read())
        with open(p("pairwise.tmpl"), "w") as fh:
            fh.write(text)
        note(f"fixed patterns: {atomic} + {n_pairs} pairwise conjunctions, L-BFGS to convergence")
        t = time.perf_counter()
        crftk("train", "-t", p("pairwise.tmpl"), "-m", p("fixed.model"), train, log=p("fixed.log"))
        seconds = time.perf_counter() - t
        crftk("tag", "-m", p("fixed.model"), "-o", p("fixed.tagged"), dev)
        rows["fixed"] = {"seconds": seconds, **info(p("fixed.model")), "eval": score(p("fixed.tagged"))}

    note(f"induction from {atomic}: {a.rounds} rounds at most")
    t = time.perf_counter()
    crftk("induce", "-t", atomic, "-m", p("induced.model"), "--report", p("induced.report"),
          "--rounds", a.rounds, train, log=p("induced.log"))
    seconds = time.perf_counter() - t
    crftk("tag", "-m", p("induced.model"), "-o", p("induced.tagged"), dev)
    with open(p("induced.log")) as fh:
        log = fh.read()
    n_rounds = len(re.findall(r"^round \d+: .* added", log, re.M))
    rows["induced"] = {"seconds": seconds, "rounds": n_rounds, **info(p("induced.model")),
                       "eval": score(p("induced.tagged"))}
    t = time.perf_counter()
    # an induced model is an ordinary model: train continues from its features and weights
    crftk("train", "--init", p("induced.model"), "-m", p("induced-final.model"), train,
          log=p("induced-final.log"))
    seconds += time.perf_counter() - t
    crftk("tag", "-m", p("induced-final.model"), "-o", p("induced-final.tagged"), dev)
    rows["induced-final"] = {"seconds": seconds, "rounds": n_rounds, **info(p("induced-final.model")),
                             "eval": score(p("induced-final.tagged"))}
    with open(results, "w") as fh:
        json.dump(rows, fh, indent=1)

    fixed = rows["fixed"]["state_features"]
    lines = [f"| {a.task}: {dev_name} | state features | % of fixed | rounds | seconds | F1 | P | R |",
             "|---|---|---|---|---|---|---|---|"]
    names = {"fixed": "fixed patterns (atomic + all pairs)", "induced": "induced (rounds only)",
             "induced-final": "induced, then trained to convergence"}
    for key, r in rows.items():
        o = r["eval"]["overall"]
        lines.append(f"| {names[key]} | {r['state_features']:,} | {100 * r['state_features'] / fixed:.2f} | "
                     f"{r.get('rounds', '-')} | {r['seconds']:.0f} | {o['f1']:.2f} | {o['precision']:.2f} | "
                     f"{o['recall']:.2f} |")
    publish("\n".join(lines), p("results.md"))


if __name__ == "__main__":
    main()
