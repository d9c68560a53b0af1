"""Semi-Markov CRFs (issue 36): the experiments' runs and table.

Three tasks, each trained on the corpus's training file and scored on its development file:

    chunk  CoNLL-2000, all phrases: train.txt -> dev.txt (chunking-crfpp.tmpl)
    np     CoNLL-2000, base NP only: train.txt and dev.txt with every chunk tag but B-NP/I-NP
           turned into O (files written under --out)
    ner    CoNLL-2003 English NER: eng.train -> eng.testa, IOB1 (conll2003-ner.tmpl)

Systems of a task (a run is TASK-SYSTEM):

    token            the token CRF with the shipped template, default options
    vote-S           the same token CRF trained on the label column rewritten in scheme S (iob1,
                     iob2, ioe1, ioe2, iobes); its output converted back to the corpus's scheme.
                     The corpus's own scheme is the token run itself.
    vote             Shen & Sarkar (2005): per token, the label most of the five vote-S outputs
                     give; a tie goes to the token CRF's label when it is among the most voted
    semi-tok[-L6]    the semi-Markov CRF with the token template (no S lines), --max-segment 6
                     or the default (the longest gold segment of each label)
    semi-seg[-L6]    the semi-Markov CRF with the task's semimarkov-*.tmpl (segment features)

Every training and tagging runs with --threads 1. A run whose tagged output exists is skipped,
so an interrupted run resumes; each run's seconds are kept in OUT/TASK-SYSTEM.json (training
wall and CPU seconds, the iterations and their seconds from the log, three whole-process
`crftk tag` wall and CPU times). `speed` measures CPU seconds per iteration of the token CRF and the
semi-Markov CRF at L=6, in interleaved pairs, as the CPU time of --max-iter HI minus that of
--max-iter LO over HI - LO (setting-up costs cancel). Nothing is written outside --out but the
results file.

    python benchmarks/semimarkov.py --out out/semimarkov run 'chunk-*' 'np-*'
    python benchmarks/semimarkov.py --out out/semimarkov speed
    python benchmarks/semimarkov.py --out out/semimarkov report
"""

import argparse
import fnmatch
import json
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from crftk.io import schemes  # noqa: E402
from crftk.io.conll import read_sentences  # noqa: E402
from common import crftk_run, data_arguments, data_folders, eval_json, note, publish  # noqa: E402

TEMPLATES = REPO / "templates"
RESULTS = REPO / "benchmarks" / "results" / "semimarkov.md"
VOTE_SCHEMES = ("iob1", "iob2", "ioe1", "ioe2", "iobes")
SEMI = ["--model-type", "semimarkov"]
L6 = ["--max-segment", "6"]
TAG_REPEATS = 3
NP_KEPT = ("B-NP", "I-NP")

# task -> (corpus option, training file, test file, token template, segment template)
TASKS = {
    "chunk": ("conll2000", "train.txt", "dev.txt", "chunking-crfpp.tmpl", "semimarkov-chunking.tmpl"),
    "np": ("conll2000", "train.txt", "dev.txt", "chunking-crfpp.tmpl", "semimarkov-np.tmpl"),
    "ner": ("conll2003", "eng.train", "eng.testa", "conll2003-ner.tmpl", "semimarkov-ner.tmpl"),
}
TEST_NAME = {"chunk": "dev.txt", "np": "dev.txt (NP only)", "ner": "eng.testa"}


def systems():
    """(system, template kind, training options) in the order they are run and reported."""
    out = [("token", "token", [])]
    out += [(f"vote-{s}", "token", []) for s in VOTE_SCHEMES]
    out += [("vote", None, None)]
    for kind, short in (("token", "tok"), ("segment", "seg")):
        out += [(f"semi-{short}-L6", kind, SEMI + L6), (f"semi-{short}", kind, SEMI)]
    return out


# -- files ----------------------------------------------------------------------------------------

def read_items(path):
    """A CoNLL file's items in order: a Sentence, or a passed-through line (``-DOCSTART-``)."""
    return list(read_sentences(str(path), passthrough=True))


def write_items(path, items, labels_of=None):
    """Write items as read_items returns them; ``labels_of(sentence)`` (if given) replaces the
    last column. Written to a temporary name first, so an interrupted run leaves no half file."""
    tmp = Path(str(path) + ".part")
    with open(tmp, "w") as fh:
        for item in items:
            if isinstance(item, str):
                fh.write(item + "\n")
                continue
            labels = labels_of(item) if labels_of else [row[-1] for row in item.rows]
            fh.write("".join(" ".join(row[:-1] + [lab]) + "\n" for row, lab in zip(item.rows, labels)) + "\n")
    tmp.replace(path)


def last_column(sentence):
    return [row[-1] for row in sentence.rows]


class Task:
    """One task's files (the NP files and scheme-rewritten training files made on first use)."""

    def __init__(self, name, a):
        corpus, train, test, self.template, self.seg_template = TASKS[name]
        self.name, self.out = name, Path(a.out)
        folder = Path(getattr(a, corpus))
        self.train, self.test = folder / train, folder / test
        self.template = TEMPLATES / self.template
        self.seg_template = Path(a.seg_template.get(name) or TEMPLATES / self.seg_template)
        if name == "np":
            self.train, self.test = self.np_file(self.train, "np-train.txt"), self.np_file(self.test, "np-dev.txt")
        self._scheme = None

    def np_file(self, source, name):
        path = self.out / name
        if not path.exists():
            write_items(path, read_items(source), lambda s: [t if t in NP_KEPT else "O" for t in last_column(s)])
        return path

    @property
    def scheme(self):
        """The training file's chunk scheme, as crftk detects it."""
        if self._scheme is None:
            self._scheme = schemes.detect(last_column(s) for s in read_items(self.train) if not isinstance(s, str))
        return self._scheme

    def train_file(self, scheme):
        """The training file with its labels written in ``scheme`` (the file itself for its own)."""
        if scheme == self.scheme:
            return self.train
        path = self.out / f"{self.name}-train.{scheme}"
        if not path.exists():
            write_items(path, read_items(self.train),
                        lambda s: schemes.convert(last_column(s), scheme, source=self.scheme))
        return path

    def tokens(self):
        return sum(len(s) for s in read_items(self.test) if not isinstance(s, str))


# -- running --------------------------------------------------------------------------------------

def iteration_seconds(log):
    """The seconds of each iteration as the training log prints them (``iter N ... 0.43s``)."""
    out = []
    for line in Path(log).read_text().splitlines():
        if line.startswith("iter ") and line.endswith("s"):
            try:
                out.append(float(line.split()[-1][:-1]))
            except ValueError:
                pass
    return out


def run_one(task, system, kind, options, a):
    name = f"{task.name}-{system}"
    out = task.out
    model, tagged, log, record = (out / f"{name}.{x}" for x in ("model", "tagged", "log", "json"))
    if tagged.exists():
        if model.exists() and "tag_cpu" not in load(record):   # tagged before its CPU time was kept
            time_tagging(task, model, out / f"{name}.raw" if system.startswith("vote-") else tagged, record, a)
        return
    if system == "vote":
        return vote(task, a)
    scheme = system[5:] if system.startswith("vote-") else None
    if scheme == task.scheme:
        return                                 # the token run is this one
    if options[:2] == SEMI and not semimarkov_available():
        note("semimarkov", f"{name}: this crftk has no --model-type semimarkov, skipped")
        return
    info = json.loads(record.read_text()) if record.exists() else {}
    if not model.exists():
        template = task.template if kind == "token" else task.seg_template
        if not template.exists():
            note("semimarkov", f"{name}: {template} not found, skipped")
            return
        train = task.train_file(scheme) if scheme else task.train
        wall, cpu = crftk_run(["train", "-t", template, "-m", model, "--threads", a.threads, *options, train], log,
                              "w")
        secs = iteration_seconds(log)
        info.update(train_wall=wall, train_cpu=cpu, iterations=len(secs), iter_seconds=sum(secs))
        record.write_text(json.dumps(info, indent=1) + "\n")
    elif "iterations" not in info and log.exists():     # trained by hand: its log still counts
        secs = iteration_seconds(log)
        info.update(iterations=len(secs), iter_seconds=sum(secs))
    record.write_text(json.dumps(info, indent=1) + "\n")
    raw = out / f"{name}.raw" if scheme else tagged
    time_tagging(task, model, raw, record, a)
    if scheme:                                 # the output back in the corpus's scheme
        write_items(tagged, read_items(raw), lambda s: schemes.convert(last_column(s), task.scheme, source=scheme))


def time_tagging(task, model, tagged, record, a):
    """Tag the test file TAG_REPEATS times (whole processes), keeping their wall and CPU seconds
    (CPU time: the machine is shared, so wall seconds vary with what else runs)."""
    times = [crftk_run(["tag", "-m", model, "-o", tagged, "--threads", a.threads, task.test],
                       str(record)[:-5] + ".tag.log") for _ in range(TAG_REPEATS)]
    info = load(record)
    info.update(tag_wall=[w for w, _ in times], tag_cpu=[c for _, c in times], tokens=task.tokens())
    record.write_text(json.dumps(info, indent=1) + "\n")


_AVAILABLE = []


def semimarkov_available():
    """Whether `crftk train` of this checkout offers --model-type semimarkov."""
    if not _AVAILABLE:
        helptext = subprocess.run([sys.executable, "-m", "crftk.cli", "train", "--help"], cwd=REPO, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
        _AVAILABLE.append(any("--model-type" in line and "semimarkov" in line for line in helptext.splitlines()))
    return _AVAILABLE[0]


def vote(task, a):
    """Shen & Sarkar's majority vote over the five schemes' outputs (in the corpus's scheme)."""
    names = [f"{task.name}-{'token' if s == task.scheme else 'vote-' + s}" for s in VOTE_SCHEMES]
    files = [task.out / f"{n}.tagged" for n in names]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        note("semimarkov", f"{task.name}-vote: waiting for {', '.join(missing)}")
        return
    voters = [read_items(f) for f in files]
    base = VOTE_SCHEMES.index(task.scheme)

    def voted(k):
        columns = [last_column(v[k]) for v in voters]
        labels = []
        for options in zip(*columns):
            counts = Counter(options)
            top = max(counts.values())
            best = [lab for lab in options if counts[lab] == top]
            labels.append(options[base] if options[base] in best else best[0])
        return labels

    index = {id(item): k for k, item in enumerate(voters[base])}
    write_items(task.out / f"{task.name}-vote.tagged", voters[base], lambda s: voted(index[id(s)]))


def cmd_run(a):
    Path(a.out).mkdir(parents=True, exist_ok=True)
    for task_name in TASKS:
        task = Task(task_name, a)
        for system, kind, options in systems():
            name = f"{task_name}-{system}"
            if a.names and not any(fnmatch.fnmatch(name, p) for p in a.names):
                continue
            run_one(task, system, kind, options, a)


def cmd_speed(a):
    """CPU seconds per iteration, token CRF against semi-Markov at L=6, interleaved."""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "speed.json"
    speed = json.loads(path.read_text()) if path.exists() else {}
    for task_name in TASKS:
        if a.names and not any(fnmatch.fnmatch(task_name, p) for p in a.names):
            continue
        task = Task(task_name, a)
        if not semimarkov_available():
            sys.exit("speed: this crftk has no --model-type semimarkov")
        pairs = (("token", task.template, []), ("semi-seg-L6", task.seg_template, SEMI + L6),
                 ("semi-tok-L6", task.template, SEMI + L6))
        reference = CrfsuiteReference(a, out) if task_name == "chunk" and CrfsuiteReference.available() else None
        for rep in range(a.repeats):
            if reference is not None and len(speed.get("chunk-crfsuite", [])) <= rep:
                speed.setdefault("chunk-crfsuite", []).append(reference.seconds_per_iteration(a.lo, a.hi))
                path.write_text(json.dumps(speed, indent=1) + "\n")
            for system, template, options in pairs:
                key = f"{task_name}-{system}"
                if len(speed.get(key, [])) > rep or not template.exists():
                    continue
                cpu = {}
                for n in (a.lo, a.hi):
                    log = out / f"speed-{key}-{n}.log"
                    _, cpu[n] = crftk_run(["train", "-t", template, "-m", out / "speed.model", "--threads",
                                           a.threads, "--max-iter", n, *options, task.train], log, "w")
                    done = len(iteration_seconds(log))
                    if done != n:
                        sys.exit(f"{log}: {done} iterations instead of {n}")
                speed.setdefault(key, []).append((cpu[a.hi] - cpu[a.lo]) / (a.hi - a.lo))
                speed["_window"] = {"lo": a.lo, "hi": a.hi}
                path.write_text(json.dumps(speed, indent=1) + "\n")
    (out / "speed.model").unlink(missing_ok=True)


class CrfsuiteReference:
    """python-crfsuite (the benchmark reference) training on CoNLL-2000 with chunking-crfpp.tmpl's
    attributes, as benchmarks/bench_crfsuite.py writes and trains them, for the speed table."""

    @staticmethod
    def available():
        try:
            import pycrfsuite  # noqa: F401 (is it installed)
        except ImportError:
            note("speed", "python-crfsuite is not installed: no CRFsuite reference (pip install python-crfsuite)")
            return False
        return True

    def __init__(self, a, out):
        import bench_crfsuite
        self.bench, self.work = bench_crfsuite, out / "crfsuite"
        self.work.mkdir(parents=True, exist_ok=True)
        args = argparse.Namespace(data=a.conll2000, template=str(REPO / "templates" / "chunking-crfpp.tmpl"),
                                  max_sentences=0, max_dev_sentences=0)
        self.train_attrs = self.bench.prepare(args, str(self.work))[3]

    def seconds_per_iteration(self, lo, hi):
        """CPU seconds of a CRFsuite L-BFGS training of ``hi`` iterations minus one of ``lo``, over hi - lo."""
        cpu = {}
        for n in (lo, hi):
            job = {"train_attrs": self.train_attrs, "model_path": str(self.work / "speed.crfsuite"), "iterations": n,
                   "c2": 1.0, "crfsuite_epsilon": 0.0, "crfsuite_delta": 0.0}
            print(f"+ python-crfsuite lbfgs, {n} iterations", flush=True)
            r = self.bench.spawn("train-crfsuite", job, str(self.work), f"speed-{n}")
            if r["iterations"] != n:
                sys.exit(f"python-crfsuite ran {r['iterations']} iterations instead of {n}")
            cpu[n] = r["child_user_seconds"] + r["child_sys_seconds"]
        return (cpu[hi] - cpu[lo]) / (hi - lo)


# -- the table ------------------------------------------------------------------------------------

def score(out, task_name, a_task):
    """system -> (F1, McNemar p against the token CRF, record) of the runs tagged so far."""
    base = out / f"{task_name}-token.tagged"
    found = {}
    for system, _, _ in systems():
        tagged = out / f"{task_name}-{system}.tagged"
        if system == f"vote-{a_task.scheme}" or not tagged.exists():
            continue
        d = eval_json(tagged, base if system != "token" and base.exists() else None)
        found[system] = (d["overall"]["f1"], d.get("mcnemar", {}).get("p_value"),
                         load(out / f"{task_name}-{system}.json"))
    return found


def per_iteration(info):
    """(wall seconds per iteration from the log, CPU seconds of the whole training over its iterations)."""
    n = info.get("iterations")
    if not n:
        return None, None
    return info["iter_seconds"] / n, (info["train_cpu"] / n if "train_cpu" in info else None)


def task_table(found):
    base_cpu = per_iteration(found["token"][2])[1] if "token" in found else None
    rows = ["| system | F1 | p vs token | iterations | s/iteration (log, wall) | CPU s/iteration | ratio | tokens/s |",
            "|---|---|---|---|---|---|---|---|"]
    for system, (f1, p, info) in found.items():
        wall, cpu = per_iteration(info)
        ratio = cpu / base_cpu if cpu and base_cpu else None
        tps = info["tokens"] / statistics.median(info["tag_cpu"]) if info.get("tag_cpu") else None
        rows.append(f"| {system} | {f1:.2f} | {fmt_p(p)} | {info.get('iterations', '-')} | "
                    f"{fmt(wall, '.3f')} | {fmt(cpu, '.3f')} | {fmt(ratio, '.2f')} | {fmt(tps, ',.0f')} |")
    return rows


def speed_rows(speed):
    """(task, token CRF, semi-tok-L6, semi-seg-L6, python-crfsuite or None) medians of CPU s/iteration."""
    out = []
    for task_name in TASKS:
        if speed.get(f"{task_name}-token"):
            out.append((task_name, *(statistics.median(speed[k]) if speed.get(k) else None
                                     for k in (f"{task_name}-{s}" for s in ("token", "semi-tok-L6", "semi-seg-L6",
                                                                            "crfsuite")))))
    return out


def commands(a):
    """The command lines of one task's runs, as the script runs them."""
    return ["crftk train -t templates/chunking-crfpp.tmpl -m chunk-token.model --threads 1 train.txt",
            "crftk tag -m chunk-token.model -o chunk-token.tagged --threads 1 dev.txt     # 3 times, timed",
            "crftk eval --json chunk-semi-seg-L6.tagged --mcnemar chunk-token.tagged",
            "crftk train -t templates/chunking-crfpp.tmpl -m chunk-vote-ioe1.model --threads 1 chunk-train.ioe1"
            "     # labels rewritten in IOE1 by the script; the output converted back to IOB2",
            "crftk train -t templates/chunking-crfpp.tmpl -m chunk-semi-tok-L6.model --threads 1 "
            "--model-type semimarkov --max-segment 6 train.txt",
            "crftk train -t templates/semimarkov-chunking.tmpl -m chunk-semi-seg.model --threads 1 "
            "--model-type semimarkov train.txt",
            f"# speed: crftk train ... --max-iter {a.hi} and --max-iter {a.lo}, token / semi-seg-L6 / semi-tok-L6 "
            "in turn, CPU time from wait4"]


ROW_NAMES = (("token", "token CRF (shipped template)"), ("vote", "voting over IOB1/IOB2/IOE1/IOE2/IOBES"),
             ("semi-tok-L6", "semi-Markov, token features, L=6"), ("semi-tok", "semi-Markov, token features, L learned"),
             ("semi-seg-L6", "semi-Markov, segment features, L=6"),
             ("semi-seg", "semi-Markov, segment features, L learned"))


def readme_draft(results, speed):
    """The README's Results subsection: F1 (McNemar p against the token CRF) per task."""
    lines = ["### Semi-Markov CRFs (Sarawagi & Cohen 2004)", "",
             "`make semimarkov` (`benchmarks/semimarkov.py`; every run, seconds and tokens/s in "
             "`benchmarks/results/semimarkov.md`). CoNLL-2000 all phrases and base NP only (every other chunk "
             "tag made O) on dev.txt, CoNLL-2003 on eng.testa; the shipped templates (`chunking-crfpp.tmpl`, "
             "`conll2003-ner.tmpl`; the `semimarkov-*.tmpl` add S lines to the same U/B lines), c2=1, L-BFGS to "
             "convergence, one thread. p: McNemar (tokens) against the token CRF.", "",
             "| | CoNLL-2000 all | CoNLL-2000 NP | CoNLL-2003 |", "|---|---|---|---|"]
    for system, label in ROW_NAMES:
        cells = []
        for task_name in TASKS:
            got = results.get(task_name, {}).get(system)
            cells.append("-" if got is None else
                         f"{got[0]:.2f}" + ("" if system == "token" else f" (p = {fmt_p(got[1])})"))
        if any(c != "-" for c in cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    rows = speed_rows(speed)
    if rows:
        lines += ["", "Training CPU seconds per iteration at L=6 against the token CRF (one thread): " + "; ".join(
            f"{t} {tok:.2f} s, semi-Markov {fmt(seg, '.2f')} s ({fmt(seg / tok if seg else None, '.1f')}x)"
            for t, tok, _, seg, _ in rows) + "."]
    return lines


def cmd_report(a):
    out = Path(a.out)
    speed = load(out / "speed.json")
    window = speed.pop("_window", {"lo": a.lo, "hi": a.hi})
    a.lo, a.hi = window["lo"], window["hi"]
    results = {t: score(out, t, Task(t, a)) for t in TASKS}
    lines = ["# Semi-Markov CRFs (issue 36)", "",
             "`make semimarkov` (`benchmarks/semimarkov.py run`, `speed`, `report`); every training and tagging "
             "with `--threads 1`, defaults otherwise (L2 c2=1, L-BFGS to convergence). p: McNemar's test on "
             "tokens against the token CRF of the task (`crftk eval --mcnemar`; <1e-300: below). s/iteration (log, wall): the "
             "training log's iteration seconds over the iterations (one thread, but on a 2-core machine shared "
             "with other jobs, up to 5 runnable processes: wall seconds measure the load more than the model); "
             "CPU s/iteration: the training process's CPU seconds over the iterations (reading and feature "
             "extraction included, a few seconds); ratio: CPU against the token CRF (the `speed` table below "
             "is the controlled comparison). tokens/s: the test file's tokens over the median CPU "
             f"seconds of {TAG_REPEATS} whole-process `crftk tag` runs (start-up and model loading included). `vote-S`: the "
             "token CRF trained on the labels rewritten in scheme S (rewritten by the script: crftk's "
             "--train-scheme has iob2, iobes and bilou only), its output converted back to the corpus scheme; "
             "`vote`: per token the label most of the five give (Shen & Sarkar 2005), ties to the token CRF's "
             "label when it is among the most voted (the corpus-scheme model is the token CRF itself).", ""]
    for task_name, found in results.items():
        if found:
            lines += [f"## {task_name}: {TEST_NAME[task_name]} (corpus scheme {Task(task_name, a).scheme})", "",
                      *task_table(found), ""]
    missing = [f"{t}-{system}" for t in TASKS for system, _, _ in systems()
               if system != f"vote-{Task(t, a).scheme}" and system not in results[t]]
    if missing:
        lines += ["Not run yet: " + ", ".join(missing) + ".", ""]
    rows = speed_rows(speed)
    if rows:
        lines += ["## CPU seconds per iteration at L=6, interleaved", "",
                  f"CPU time of `--max-iter {a.hi}` minus that of `--max-iter {a.lo}`, over {a.hi - a.lo} (the "
                  "setting-up costs cancel); python-crfsuite (chunk only: CoNLL-2000 with chunking-crfpp.tmpl's "
                  "attributes, as bench_crfsuite.py trains it, L-BFGS, c2=1; child CPU time of 25 minus 5 "
                  "iterations), token, semi-seg-L6, semi-tok-L6 in turn; median over the repeats. Ratios: against "
                  "the token CRF, and (in brackets) against python-crfsuite.", "",
                  "| task | python-crfsuite | token CRF | semi-Markov, token template | ratio | "
                  "semi-Markov, segment template | ratio |",
                  "|---|---|---|---|---|---|---|"]

        def ratio(x, tok, ref):
            return "-" if x is None else f"{x / tok:.2f}" + (f" ({x / ref:.2f})" if ref else "")

        for task_name, tok, semi_tok, semi_seg, ref in rows:
            against = f" ({tok / ref:.2f})" if ref else ""
            lines.append(f"| {task_name} | {fmt(ref, '.3f')} | {tok:.3f}{against} | "
                         f"{fmt(semi_tok, '.3f')} | {ratio(semi_tok, tok, ref)} | {fmt(semi_seg, '.3f')} | "
                         f"{ratio(semi_seg, tok, ref)} |")
        lines.append("")
    lines += ["## Command lines (chunk; np and ner alike with their files and templates)", "", "```sh",
              *commands(a), "```", "", "## README draft", "", *readme_draft(results, speed), ""]
    text = "\n".join(lines)
    if a.results:
        publish(text, a.results)
    else:
        print(text)


def load(path):
    return json.loads(path.read_text()) if path.exists() else {}


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def fmt_p(p):
    if p is None:
        return "-"
    return "<1e-300" if p == 0 else f"{p:.2g}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data_arguments(ap)
    ap.add_argument("--out", required=True, help="folder of the derived files, models and outputs")
    ap.add_argument("--seg-template", action="append", default=[], metavar="TASK=FILE",
                    help="the segment template of a task (default templates/semimarkov-*.tmpl)")
    ap.add_argument("--threads", default="1")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="train and tag every run (or those matching the patterns given)")
    p.add_argument("names", nargs="*", help="run names or shell patterns: chunk-token, 'np-vote*'")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("speed", help="CPU seconds per iteration at L=6 against the token CRF, interleaved")
    p.add_argument("names", nargs="*", help="tasks (default all)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--lo", type=int, default=5)
    p.add_argument("--hi", type=int, default=25)
    p.set_defaults(func=cmd_speed)
    p = sub.add_parser("report", help="the tables of the runs tagged so far")
    p.set_defaults(lo=5, hi=25)
    p.add_argument("--results", default=str(RESULTS), help="also write the tables here ('' : do not)")
    p.set_defaults(func=cmd_report)
    a = ap.parse_args(argv)
    data_folders(a)
    pairs = [s.split("=", 1) for s in a.seg_template]
    if any(len(x) != 2 or x[0] not in TASKS for x in pairs):
        ap.error(f"--seg-template takes TASK=FILE, TASK one of {', '.join(TASKS)}")
    a.seg_template = dict(pairs)
    a.func(a)


if __name__ == "__main__":
    main()
