"""Partial labels in training (issue 35): the experiments' training files, runs and table.

CoNLL-2003 NER with missing entity annotations: a random share (30, 50, 70 %) of the entity
mentions of eng.train (chunks by conlleval's rules) lose their labels; the removed sets are
nested (30 % within 50 % within 70 %). Four training files per rate:

    a  removed mentions' tokens labeled O (what users do today)
    b  every sentence that lost a mention dropped (document markers kept)
    c  removed mentions' tokens unknown (the marker, ``?``)
    d  removed mentions' tokens and every O token unknown: only the kept entities are marked;
       trained with ``--entity-ratio RHO``, RHO the entity token ratio of the full eng.train

CoNLL-2000 chunking with 50 % and 80 % of the token labels of train.txt hidden at random
(``partial``, nested too), against training only on whole, fully labeled sentences (random
order) up to the same number of labeled tokens (``budget``). ``ner-full`` and ``chunk-full``
train on every label (eng.train, train.txt themselves): the ceiling.

Every run is a `crftk train` then `crftk tag` (eng.testa, dev.txt); a step whose output exists
is skipped, so an interrupted run resumes. Nothing is written outside --out but the table.

    python benchmarks/partial_labels.py --out out/partial make-data
    python benchmarks/partial_labels.py --out out/partial run 'ner-*-[ab]' 'chunk-*-budget'
    python benchmarks/partial_labels.py --out out/partial report
"""

import argparse
import fnmatch
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from crftk.evaluation.conlleval import chunks  # noqa: E402  (conlleval's chunk rules)
from crftk.io import schemes  # noqa: E402
from crftk.io.conll import read_sentences  # noqa: E402
from common import crftk_timed, data_arguments, data_folders, eval_json, publish  # noqa: E402

NER_RATES = (30, 50, 70)
NER_SETTINGS = ("a", "b", "c", "d")
MARGIN_SUFFIX = "-m01"      # a run of setting d's file with --entity-ratio-margin 0.01
CHUNK_RATES = (50, 80)
NER_TEMPLATE = REPO / "templates" / "conll2003-ner.tmpl"       # README: 90.19 F1 on eng.testa
CHUNK_TEMPLATE = REPO / "templates" / "chunking-crfpp.tmpl"    # README: make conll2000
RESULTS = REPO / "benchmarks" / "results" / "partial-labels.md"


# -- the training files -------------------------------------------------------------------------

def read_file(path):
    """The items of a CoNLL file in order: a Sentence, or a ``-DOCSTART-`` line (str)."""
    return list(read_sentences(str(path), passthrough=True))


def write_file(path, items):
    """Write items as read_file returns them (a line, or a sentence: rows of columns)."""
    with open(path, "w") as fh:
        for item in items:
            if isinstance(item, str):
                fh.write(item + "\n")
            else:
                fh.write("".join(" ".join(row) + "\n" for row in item.rows) + "\n")


def labeled(rows, labels):
    """Rows with their last column replaced by ``labels``."""
    return [row[:-1] + [label] for row, label in zip(rows, labels)]


def entity_mentions(sentences):
    """Every entity mention as (sentence index, start, end), by conlleval's rules (IOB1)."""
    return [(k, start, end) for k, s in enumerate(sentences)
            for _, start, end in chunks([row[-1] for row in s.rows], "iob1")]


def nested_choice(n, rates, rng):
    """For each rate (percent), the set of removed indices out of n: the first round(rate% of n)
    of one random order, so a lower rate's set is within a higher rate's."""
    order = list(range(n))
    rng.shuffle(order)
    return {rate: set(order[:round(n * rate / 100)]) for rate in rates}


def stats(items, marker, mentions):
    sents = [s for s in items if not isinstance(s, str)]
    labels = [row[-1] for s in sents for row in s.rows]
    return {"sentences": len(sents), "tokens": len(labels),
            "known": sum(label != marker for label in labels), "mentions": mentions}


def ner_files(train, out, seed, marker):
    """The four settings' training files at each rate; returns (entity ratio, file stats)."""
    items = read_file(train)
    sentences = [s for s in items if not isinstance(s, str)]
    labels = [row[-1] for s in sentences for row in s.rows]
    ratio = sum(label != "O" for label in labels) / len(labels)
    mentions = entity_mentions(sentences)
    removed_at = nested_choice(len(mentions), NER_RATES, random.Random(seed))
    table = {}
    for rate in NER_RATES:
        removed = [mentions[i] for i in sorted(removed_at[rate])]
        lost = {}                                   # sentence index -> its removed spans
        for k, start, end in removed:
            lost.setdefault(k, []).append((start, end))
        index = {id(s): k for k, s in enumerate(sentences)}
        files = {x: [] for x in NER_SETTINGS}
        for item in items:
            if isinstance(item, str):
                for x in NER_SETTINGS:
                    files[x].append(item)
                continue
            tags = [row[-1] for row in item.rows]
            gone = [False] * len(tags)
            for start, end in lost.get(index[id(item)], ()):
                gone[start:end] = [True] * (end - start)
            as_o = schemes.convert(["O" if g else t for t, g in zip(tags, gone)], "iob1")
            files["a"].append(type(item)(labeled(item.rows, as_o), item.doc, item.line))
            if not any(gone):
                files["b"].append(item)
            files["c"].append(type(item)(labeled(item.rows, [marker if g else t for t, g in zip(tags, gone)]),
                                         item.doc, item.line))
            files["d"].append(type(item)(labeled(item.rows, [marker if g or t == "O" else t
                                                             for t, g in zip(tags, gone)]), item.doc, item.line))
        kept_b = sum(1 for k, _, _ in mentions if k not in lost)
        for x in NER_SETTINGS:
            name = f"ner-r{rate}-{x}"
            write_file(out / f"{name}.train", files[x])
            table[name] = stats(files[x], marker, kept_b if x == "b" else len(mentions) - len(removed))
    table["ner-full"] = stats(items, marker, len(mentions))
    return ratio, table


def chunk_files(train, out, seed, marker):
    """The hidden-label files and their same-budget whole-sentence files; returns file stats."""
    items = [s for s in read_file(train) if not isinstance(s, str)]
    tokens = [(k, t) for k, s in enumerate(items) for t in range(len(s))]
    rng = random.Random(seed)
    hidden_at = nested_choice(len(tokens), CHUNK_RATES, rng)
    order = list(range(len(items)))
    rng.shuffle(order)
    table = {}
    for rate in CHUNK_RATES:
        hidden = {tokens[i] for i in hidden_at[rate]}
        partial = [type(s)(labeled(s.rows, [marker if (k, t) in hidden else row[-1]
                                            for t, row in enumerate(s.rows)]), s.doc, s.line)
                   for k, s in enumerate(items)]
        budget = len(tokens) - len(hidden)
        chosen, used = [], 0
        for k in order:                   # whole sentences in random order while they fit
            if used + len(items[k]) > budget:
                break
            chosen.append(k)
            used += len(items[k])
        whole = [items[k] for k in sorted(chosen)]
        for name, its in ((f"chunk-h{rate}-partial", partial), (f"chunk-h{rate}-budget", whole)):
            write_file(out / f"{name}.train", its)
            table[name] = stats(its, marker, None)
            table[name]["budget"] = budget
    table["chunk-full"] = stats(items, marker, None)
    return table


def cmd_make_data(a):
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ratio, table = ner_files(Path(a.conll2003) / "eng.train", out, a.seed, a.marker)
    table.update(chunk_files(Path(a.conll2000) / "train.txt", out, a.seed, a.marker))
    info = {"seed": a.seed, "marker": a.marker, "entity_ratio": ratio, "files": table}
    (out / "data.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"entity token ratio of the full eng.train (--entity-ratio of setting d): {ratio:.6f}")
    print("| file | sentences | tokens | known tokens | mentions kept |\n|---|---|---|---|---|")
    for name, s in table.items():
        print(f"| {name} | {s['sentences']:,} | {s['tokens']:,} | {s['known']:,} | "
              f"{'-' if s['mentions'] is None else format(s['mentions'], ',')} |")


# -- training, tagging, scoring -----------------------------------------------------------------

def runs(info):
    """(run name, task, training options) of every run, in the order they are run."""
    partial = ["--unknown-label", info["marker"]]
    # setting d stops at 400 iterations (by then the objective moves by less than 1e-4 of itself
    # per iteration, and it would creep on for hundreds more)
    rho = ["--entity-ratio", f"{info['entity_ratio']:.6f}", "--max-iter", "400"]
    out = []
    for rate in NER_RATES:
        for x in NER_SETTINGS:
            out.append((f"ner-r{rate}-{x}", "ner", partial * (x in "cd") + rho * (x == "d")))
        # setting d again with the margin chosen on eng.testa at 50% (the paper's 0.05 above)
        out.append((f"ner-r{rate}-d{MARGIN_SUFFIX}", "ner", partial + rho + ["--entity-ratio-margin", "0.01"]))
    for rate in CHUNK_RATES:
        out.append((f"chunk-h{rate}-budget", "chunk", []))
        out.append((f"chunk-h{rate}-partial", "chunk", partial))
    return out + [("ner-full", "ner", []), ("chunk-full", "chunk", [])]   # every label: the ceiling


def load_info(out):
    path = out / "data.json"
    if not path.exists():
        sys.exit(f"{path} not found: run make-data first")
    return json.loads(path.read_text())


def cmd_run(a):
    out = Path(a.out).resolve()
    info = load_info(out)
    times_path = out / "times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    test = {"ner": Path(a.conll2003) / "eng.testa", "chunk": Path(a.conll2000) / "dev.txt"}
    template = {"ner": NER_TEMPLATE, "chunk": CHUNK_TEMPLATE}
    full = {"ner": Path(a.conll2003) / "eng.train", "chunk": Path(a.conll2000) / "train.txt"}
    for name, task, options in runs(info):
        if a.names and not any(fnmatch.fnmatch(name, p) for p in a.names):
            continue
        model, tagged, log = out / f"{name}.model", out / f"{name}.tagged", out / f"{name}.log"
        if not model.exists():
            times[name] = crftk_timed(["train", "-t", template[task], "-m", model, "--threads", a.threads, *options,
                                 full[task] if name.endswith("-full") else out / f"{data_name(name)}.train"], log)
            times_path.write_text(json.dumps(times, indent=1) + "\n")
        if not tagged.exists():
            times["tag:" + name] = crftk_timed(["tag", "-m", model, "-o", tagged, "--threads", a.threads, test[task]], log)
            times_path.write_text(json.dumps(times, indent=1) + "\n")


def data_name(name):
    """The run whose training file and counts a run uses (its own but for the margin runs)."""
    return name[:-len(MARGIN_SUFFIX)] if name.endswith(MARGIN_SUFFIX) else name


def against(name):
    """The run a row is compared with: setting a at the same rate; partial against budget."""
    name = data_name(name)
    if name.startswith("ner-r") and name[-1] in "bcd":
        return name[:-1] + "a"
    if name.endswith("-partial"):
        return name.replace("-partial", "-budget")
    return None


def cmd_report(a):
    out = Path(a.out).resolve()
    info = load_info(out)
    times_path = out / "times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    lines = [f"Entity token ratio of the full eng.train (setting d's --entity-ratio): {info['entity_ratio']:.4f}; "
             f"seed {info['seed']}; `benchmarks/partial_labels.py`. Setting d stops at 400 iterations; "
             "`-m01`: setting d with --entity-ratio-margin 0.01. McNemar p 0: below 1e-300. Training "
             "seconds: wall time, on a machine shared with other jobs (not a speed measure).", "",
             "| run | test set | sentences | known tokens | mentions kept | F1 | against | McNemar p (tokens) "
             "| training s | tagging s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, task, _ in runs(info):
        if not (out / f"{name}.tagged").exists():
            continue
        other = against(name)
        other = other if other and (out / f"{other}.tagged").exists() else None
        d = eval_json(out / f"{name}.tagged", None if other is None else out / f"{other}.tagged")
        p = d.get("mcnemar", {}).get("p_value")
        s = info["files"][data_name(name)]
        lines.append(f"| {name} | {'eng.testa' if task == 'ner' else 'dev.txt'} | {s['sentences']:,} | "
                     f"{s['known']:,} | {'-' if s['mentions'] is None else format(s['mentions'], ',')} | "
                     f"{d['overall']['f1']:.2f} | {other or '-'} | {'-' if p is None else f'{p:.2g}'} | "
                     f"{times.get(name, float('nan')):.0f} | {times.get('tag:' + name, float('nan')):.1f} |")
    text = "\n".join(lines)
    if a.results:
        publish(text, a.results)
    else:
        print(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data_arguments(ap)
    ap.add_argument("--out", required=True, help="folder of the training files, models and outputs")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-data", help="write the training files of every setting and rate")
    p.add_argument("--seed", type=int, default=35)
    p.add_argument("--marker", default="?", help="the unknown label (crftk train --unknown-label)")
    p.set_defaults(func=cmd_make_data)
    p = sub.add_parser("run", help="train and tag every run (or those matching the patterns given)")
    p.add_argument("names", nargs="*", help="run names or shell patterns: ner-r50-c, 'chunk-*'")
    p.add_argument("--threads", default="1")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("report", help="the table of the runs tagged so far")
    p.add_argument("--results", default=str(RESULTS), help="also write the table here ('' : do not)")
    p.set_defaults(func=cmd_report)
    a = ap.parse_args(argv)
    data_folders(a)
    a.func(a)


if __name__ == "__main__":
    main()
