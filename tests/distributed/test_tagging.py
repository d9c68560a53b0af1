"""Batch tagging on a LocalCluster: the output of crftk tag, byte for byte, whatever happens to workers."""

import io
import os
import signal

import numpy as np
import pytest

# "distributed.client", not "distributed": with tests/ on the path, tests/distributed itself is a
# namespace package of that name, which imports without Dask.
pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")
from click.testing import CliRunner

from corpora import REPO
from crftk.cli import main
from crftk import CRF
from crftk.commands.tag import AttributeJob
from crftk.commands.tag import tag_files as tag_locally
from crftk.commands.train import fit
from crftk.distributed.tagging import tag, tag_files
from crftk.errors import CrftkError
from crftk.features.templates import read_template
from crftk.io.conll import read_corpus

DEMO_TRAIN = str(REPO / "data" / "demo.train")
DEMO_TEST = str(REPO / "data" / "demo.test")
INPUTS = [DEMO_TEST, DEMO_TRAIN]


@pytest.fixture(scope="module")
def model():
    return fit(read_corpus(DEMO_TRAIN), read_template(REPO / "templates" / "chunking-crfpp.tmpl"),
               log=lambda m: None, max_iter=20, threads=1)


def local(model, inputs, **kw):
    out = io.StringIO()
    tag_locally(model, inputs, out, threads=1, **kw)
    return out.getvalue()


def test_output_equals_local_tagging_byte_for_byte(cluster, model):
    from crftk.distributed.tagging import models_loaded
    before = cluster.client.run(models_loaded)
    out = io.StringIO()
    counts = tag_files(cluster, model, INPUTS, out, piece_bytes=30_000)
    assert out.getvalue() == local(model, INPUTS)
    assert counts == (1800, 19428)
    # 9 pieces; each worker loaded the model once (at most: one may have had no piece)
    loads = {w: n - before[w] for w, n in cluster.client.run(models_loaded).items()}
    assert sorted(loads.values()) in ([0, 1], [1, 1])


def test_progress_line_on_a_terminal():
    from crftk.distributed.tagging import tty_progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert tty_progress(io.StringIO()) is None
    term = Terminal()
    report = tty_progress(term)
    report(1, 2, 10, 1234)
    assert term.getvalue().startswith("\rtagged 1/2 files, 10 sentences, 1,234 tokens (")


@pytest.mark.parametrize("kw", [{"marginals": 2}, {"nbest": 3, "marginals": 1}])
def test_marginals_and_nbest_equal_local_tagging(cluster, model, kw):
    out = io.StringIO()
    tag_files(cluster, model, [DEMO_TEST], out, piece_bytes=8_000, **kw)
    assert out.getvalue() == local(model, [DEMO_TEST], **kw)


def test_one_output_per_input_in_a_directory(cluster, model, tmp_path):
    seen = []
    tag_files(cluster, model, INPUTS, out_dir=str(tmp_path), piece_bytes=16_000,
              progress=lambda *a: seen.append(a))
    for path in INPUTS:
        assert (tmp_path / os.path.basename(path)).read_text() == local(model, [path])
    assert sorted(os.listdir(tmp_path)) == ["demo.test", "demo.train"]
    assert seen[-1] == (2, 2, 1800, 19428) and len(seen) > 10      # one report per piece, in order
    assert [s[2] for s in seen] == sorted(s[2] for s in seen)


def test_first_mention_templates_cut_at_documents(cluster, tmp_path):
    from corpora import random_docs
    from crftk.features.templates import parse_template
    docs = random_docs(40, seed=3, sents_per_doc=4)
    m = fit(docs, parse_template("U:%^x[-1,0]\nU1:%x[0,0]\nB\n"), log=lambda msg: None, max_iter=5, threads=1)
    text = ""
    for i, s in enumerate(docs):
        if i == 0 or s.doc != docs[i - 1].doc:
            text += "-DOCSTART- X O\n\n"
        text += "\n".join(" ".join(r) for r in s.rows) + "\n\n"
    path = tmp_path / "d.txt"
    path.write_text(text)
    out = io.StringIO()
    tag_files(cluster, m, [str(path)], out, piece_bytes=300)
    assert out.getvalue() == local(m, [str(path)])


def test_an_error_names_the_files_line_and_nothing_is_written(cluster, model, tmp_path):
    lines = open(DEMO_TRAIN).read().splitlines(keepends=True)
    lines[15000] = "bad line with five columns\n"
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines))
    with pytest.raises(CrftkError) as local_error:
        local(model, [str(bad)])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(CrftkError) as error:
        tag_files(cluster, model, [DEMO_TEST, str(bad)], out_dir=str(out_dir), piece_bytes=16_000)
    assert str(error.value) == str(local_error.value) and f"bad.txt:{15001}:" in str(error.value)
    assert os.listdir(out_dir) == []            # not even demo.test, tagged before the error


def test_a_killed_worker_still_gives_complete_ordered_output(cluster, model):
    client = cluster.client
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    killed = []

    def progress(files_done, n_files, n_sent, n_tok):
        if not killed:          # after the first piece is written, with the next ones in flight
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(pids[victim])

    out = io.StringIO()
    tag_files(cluster, model, INPUTS, out, piece_bytes=16_000, progress=progress)
    assert killed and out.getvalue() == local(model, INPUTS)
    client.wait_for_workers(2, timeout=60)
    assert killed[0] not in client.run(os.getpid).values()      # the nanny started a new worker


def test_lost_scheduler_is_one_error_and_no_output(external, model, tmp_path):
    address, scheduler = external
    output = tmp_path / "out.txt"

    def progress(*counts):
        if scheduler.poll() is None:
            scheduler.kill()

    with pytest.raises(CrftkError) as error:
        tag(model, INPUTS, str(output), scheduler=address, piece_bytes=8_000, progress=progress)
    assert str(error.value) == f"lost the connection to the Dask scheduler at {address}; nothing was written"
    assert os.listdir(tmp_path) == []


def test_cli_tags_into_a_directory_on_a_running_scheduler(cluster, model, tmp_path):
    path = tmp_path / "m.crftk"
    model.save(path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    address = cluster.client.scheduler.address
    result = CliRunner().invoke(main, ["tag", "-m", str(path), "-o", str(out_dir), "--scheduler", address,
                                       "--piece-bytes", "20000", "-p", "1", DEMO_TEST, DEMO_TRAIN])
    assert result.exit_code == 0, result.output
    assert (out_dir / "demo.train").read_text() == local(model, [DEMO_TRAIN])


def test_cli_without_dask_says_what_to_install(monkeypatch, model, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)     # import distributed fails
    path = tmp_path / "m.crftk"
    model.save(path)
    for args in (["tag", "-m", str(path), "--workers", "2", DEMO_TEST],
                 ["train", "-t", str(REPO / "templates" / "chunking-crfpp.tmpl"), "-m", str(tmp_path / "x"),
                  "--workers", "2", DEMO_TEST]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1
        assert result.output == ("crftk: error: --scheduler and --workers run on Dask, which is not installed: "
                                 "pip install crftk[dask]\n")
    assert os.listdir(tmp_path) == ["m.crftk"]


def test_cli_unreachable_scheduler_is_one_line(monkeypatch, model, tmp_path):
    import crftk.distributed.cluster as cluster_module
    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT", 1)
    path = tmp_path / "m.crftk"
    model.save(path)
    result = CliRunner().invoke(main, ["tag", "-m", str(path), "-o", str(tmp_path / "o"), "--scheduler",
                                       "tcp://127.0.0.1:1", DEMO_TEST])
    assert result.exit_code == 1
    assert result.output.startswith("crftk: error: cannot reach the Dask scheduler at tcp://127.0.0.1:1: ")
    assert result.output.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == ["m.crftk"]


def test_tasks_share_a_machines_cores_among_a_workers_threads(cluster):
    from crftk.distributed.cluster import worker_threads
    from crftk.params import available_cores
    client = cluster.client
    assert client.submit(worker_threads, 0, pure=False).result() == available_cores()    # 1 thread per worker
    assert client.submit(worker_threads, 3, pure=False).result() == 3
    assert worker_threads(0) == available_cores()       # not on a worker


def test_a_call_failing_before_the_client_sees_the_scheduler_gone_is_a_lost_scheduler(monkeypatch):
    import threading
    import crftk.distributed.cluster as cluster_module
    from crftk.distributed import Cluster
    monkeypatch.setattr(cluster_module, "LOST_WAIT", 0.6)

    class Client:
        status = "running"

    cluster = Cluster(scheduler="tcp://127.0.0.1:9")
    cluster.client = Client()
    threading.Timer(0.2, setattr, (cluster.client, "status", "connecting")).start()
    with pytest.raises(CrftkError, match="^lost the connection to the Dask scheduler at tcp://127.0.0.1:9; x$"):
        with cluster.guard("x"):
            raise ConnectionResetError("Connection reset by peer")     # as gather raised it
    cluster.client.status = "running"
    with pytest.raises(ZeroDivisionError):          # other errors pass through (after the wait)
        with cluster.guard("x"):
            1 / 0


def test_latin1_files_are_read_and_written_in_latin1(cluster, model, tmp_path):
    """Pieces of a Latin-1 file (cut at sentence boundaries in its bytes) tag as the whole file
    does locally, and each output file is Latin-1 (the --encoding of crftk tag --workers)."""
    text = open(DEMO_TEST, encoding="utf-8").read().replace("\nthe\t", "\nthé\t").replace("Mr.", "Señor")
    latin1, utf8 = tmp_path / "demo.latin1", tmp_path / "demo.utf8"
    latin1.write_bytes(text.encode("latin-1"))
    utf8.write_bytes(text.encode("utf-8"))
    want = local(model, [str(utf8)])
    assert "Señor" in want
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    tag_files(cluster, model, [str(latin1)], out_dir=str(out_dir), piece_bytes=16_000, encoding="latin-1")
    assert (out_dir / "demo.latin1").read_bytes() == want.encode("latin-1")


@pytest.mark.parametrize("kw", [{}, {"marginals": 1}])
def test_a_model_that_reads_the_words_only_tags_the_words_alone(cluster, tmp_path, kw):
    from crftk.features.templates import parse_template
    pos = fit(read_corpus(DEMO_TRAIN)[:200], parse_template("U0:%x[0,0]\nU1:%x[-1,0]/%x[0,0]\nB\n"), label_col=1,
              log=lambda m: None, max_iter=5, threads=1)
    words = tmp_path / "words.txt"
    words.write_text("".join(line.split()[0] + "\n" if line.strip() else "\n"
                             for line in open(DEMO_TEST).read().splitlines()[:2000]))
    out = io.StringIO()
    tag_files(cluster, pos, [str(words)], out, piece_bytes=3_000, **kw)
    assert out.getvalue() == local(pos, [str(words)], **kw)
    assert {len(line.split()) for line in out.getvalue().splitlines() if line and line[0] != "#"} == {2 + len(kw)}


# Every model kind and every option of crftk tag, here and on the cluster: the same bytes.

BAG_TEMPLATES = ["conll2000-np-bag-base.tmpl", "conll2000-np-bag-pos.tmpl"]


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """{kind: model path} of tiny models of every kind, and the inputs and weight files."""
    d = tmp_path_factory.mktemp("kinds")
    lines = open(DEMO_TRAIN).read().splitlines(keepends=True)
    test = open(DEMO_TEST).read().splitlines(keepends=True)
    (d / "train.txt").write_text("".join(lines[:1500]))
    (d / "dev.txt").write_text("".join(test[:400]))
    (d / "a.txt").write_text("".join(test[400:1600]))
    (d / "b.txt").write_text("".join(test[1600:2600]).replace(" ", "\t"))     # another separator
    tmpl = REPO / "templates"
    train = str(d / "train.txt")
    runs = {
        "crf": ["train", "-t", tmpl / "chunking-pos0.tmpl", train],
        "order2": ["train", "-t", tmpl / "chunking-pos0.tmpl", "--order", "2", train],
        "memm": ["train", "-t", tmpl / "chunking-pos0.tmpl", "--model-type", "memm", train],
        "bag": ["bag", *[x for t in BAG_TEMPLATES for x in ("-t", tmpl / t)], "--dev", d / "dev.txt", train],
        "factorial": ["train", "-t", tmpl / "fcrf-np.tmpl", "--label-col", "1", "--label-col", "2", train],
        "pos": ["train", "-t", tmpl / "pos-words.tmpl", "--label-col", "1", train],
        "chunk": ["train", "-t", tmpl / "chunking-crfpp.tmpl", train],
    }
    paths = {kind: str(d / f"{kind}.model") for kind in [*runs, "pipeline", "pipeline-kbest"]}
    for kind, args in runs.items():
        result = CliRunner().invoke(main, [str(a) for a in args] + ["-m", paths[kind], "-q", "--max-iter", "3",
                                                                    "-p", "1"])
        assert result.exit_code == 0, result.output
    for kind, downstream in (("pipeline", "crf"), ("pipeline-kbest", "chunk")):
        result = CliRunner().invoke(main, ["compose", "-m", paths["pos"], "-m", paths[downstream], "--feed", "1",
                                           "-o", paths[kind]])
        assert result.exit_code == 0, result.output
    names = [t.removesuffix(".tmpl") for t in BAG_TEMPLATES]
    (d / "w1.txt").write_text(f"{names[0]} 0.2\n{names[1]} 0.8\n")
    (d / "w2.txt").write_text(f"seq-mixture {names[0]}=0.7 {names[1]}=0.3\n")
    paths.update(dir=d, inputs=[str(d / "a.txt"), str(d / "b.txt")], w1=str(d / "w1.txt"), w2=str(d / "w2.txt"))
    return paths


# (model kind, tag options); {w1} and {w2} are weight files
TAG_CASES = [
    ("crf", []), ("crf", ["-v"]), ("crf", ["-vv"]), ("crf", ["-n", "3"]), ("crf", ["-n", "2", "-v"]),
    ("crf", ["--batch-tokens", "40", "-p", "1"]), ("crf", ["--max-sentence-tokens", "20"]),
    ("crf", ["--combine", "seq-poe"]), ("crf", ["--decode", "joint"]), ("crf", ["--inference", "bp"]),
    ("order2", []), ("order2", ["-v", "-n", "2"]),
    ("memm", []), ("memm", ["-v"]),
    ("bag", []), ("bag", ["-vv"]), ("bag", ["-n", "2"]),
    ("bag", ["--combine", "seq-poe"]), ("bag", ["--combine", "seq-mixture", "--decode", "max-marginal"]),
    ("bag", ["--combine", "seq-mixture", "--decode", "viterbi", "-v"]), ("bag", ["--combine", "trans-mixture"]),
    ("bag", ["--combine", "trans-poe", "-n", "2", "-v"]), ("bag", ["--weights", "{w1}"]),
    ("bag", ["--combine", "seq-mixture", "--weights", "{w2}"]),
    ("bag", ["--combine", "trans-poe", "--weights", "{w2}"]),
    ("factorial", []), ("factorial", ["--inference", "trp", "--max-sweeps", "5"]),
    ("factorial", ["--inference", "bp", "--tolerance", "0.01", "--max-sweeps", "30"]),
    ("factorial", ["-v"]), ("factorial", ["--combine", "seq-poe"]),
    ("pipeline", []), ("pipeline", ["--decode", "cascade"]), ("pipeline", ["-v"]), ("pipeline", ["-n", "2"]),
    ("pipeline", ["--decode", "normalized", "--nbest-upstream", "3"]), ("pipeline", ["--decode", "cascade", "-v"]),
    ("pipeline", ["--weights", "{w1}"]), ("pipeline", ["--decode", "max-marginal"]),
    ("pipeline-kbest", ["--nbest-upstream", "2"]), ("pipeline-kbest", ["--decode", "normalized"]),
]


def _tag_both(kinds, address, kind, options, where):
    """(exit code, stdout, stderr, outputs) of crftk tag here and on the cluster, writing to ``where``:
    "-" (stdout), "file" or "dir"."""
    results = []
    for tag_on in ("here", "dask"):
        out = kinds["dir"] / f"out-{tag_on}"
        out.mkdir(exist_ok=True)
        for f in out.iterdir():
            f.unlink()
        target = {"-": "-", "file": str(out / "tagged.txt"), "dir": str(out)}[where]
        args = ["tag", "-m", kinds[kind], "-o", target, *[a.format(**kinds) for a in options], *kinds["inputs"]]
        if tag_on == "dask":
            args += ["--scheduler", address, "--piece-bytes", "3000"]
        result = CliRunner().invoke(main, args)
        files = {f.name: f.read_text() for f in sorted(out.iterdir())}
        results.append((result.exit_code, result.stdout, result.stderr, files))
    return results


def test_every_kind_and_option_tags_on_dask_as_here(cluster, kinds):
    address = cluster.client.scheduler.address
    failed, codes = [], {}
    for i, (kind, options) in enumerate(TAG_CASES):
        here, dask = _tag_both(kinds, address, kind, options, ["-", "file", "dir"][i % 3])
        if here != dask:
            failed.append((kind, options, here[0], dask[0], here[2], dask[2]))
        codes[kind, *options] = here[0]
        # not vacuous: a case tags something, or is a one-line error
        assert (here[0] == 0 and (here[1] or here[3])) or here[2].count("\n") == 1, (kind, options)
    assert not failed
    assert list(codes.values()).count(0) == 29
    assert codes["crf", "--combine", "seq-poe"] == 1 and codes["factorial", "-v"] == 2


def test_every_tag_option_reaches_the_dask_path(monkeypatch, kinds, tmp_path):
    """Each option of the tag command (introspected) is set to a value other than its default, and
    must arrive in what the Dask path gets: the TagJob (whose options every worker builds its own
    TagJob from) or run_job's arguments. A new option fails here until it is forwarded (or
    refused under Dask, with a case that says so). The local path builds its TagJob alike
    (crftk.commands.tag.load_job)."""
    import inspect
    import crftk.distributed.tagging as dask_tagging
    from crftk.commands.tag import JOB_OPTIONS, TagJob
    from crftk.ensemble.bag import Bag
    from crftk.ensemble.weights import read_weight_file
    from crftk.io.conll import codec
    from crftk.model import Model
    seen = {}

    def run_job(job, inputs, output, **kw):
        seen.update(job.options, **kw, model_path=job.name, inputs=inputs, output=output)
        if isinstance(job, AttributeJob):       # the job of CRFsuite data files
            seen.update(format="crfsuite", reference=job.reference)

    monkeypatch.setattr(dask_tagging, "run_job", run_job)
    bag_names = Bag.from_model(Model.load(kinds["bag"])).names
    a, b = kinds["inputs"]
    out = str(tmp_path / "out.txt")
    # a model of attributes and a CRFsuite data file, for --format crfsuite
    kinds = dict(kinds, attributes=str(tmp_path / "attributes.crftk"))
    CRF(max_iter=3, threads=1).fit([[{"w": "a"}, {"w": "b"}]], [["A", "B"]]).save(kinds["attributes"])
    crfsuite_input = tmp_path / "data.crfsuite"
    crfsuite_input.write_text("A\tw=a\nB\tw=b\n\n")
    # option: (model kind, arguments, the value that must arrive)
    cases = {
        "model_path": ("memm", [], kinds["memm"]),
        "inputs": ("crf", [b, a], (b, a)),
        "output": ("crf", ["-o", out], out),
        "marginals": ("crf", ["-vv"], 2),
        "nbest": ("crf", ["-n", "4"], 4),
        "batch_tokens": ("crf", ["--batch-tokens", "77"], 77),
        "max_sentence_tokens": ("crf", ["--max-sentence-tokens", "99"], 99),
        "threads": ("crf", ["-p", "3"], 3),
        "combine": ("bag", ["--combine", "trans-poe"], "trans-poe"),
        "weights": ("bag", ["--weights", kinds["w1"]], read_weight_file(kinds["w1"], bag_names)),
        "decode": ("pipeline", ["--decode", "cascade"], "cascade"),
        "nbest_upstream": ("pipeline", ["--decode", "normalized", "--nbest-upstream", "7"], 7),
        "inference": ("factorial", ["--inference", "trp"], "trp"),
        "tolerance": ("factorial", ["--inference", "bp", "--tolerance", "0.5"], 0.5),
        "max_sweeps": ("factorial", ["--inference", "bp", "--max-sweeps", "9"], 9),
        "force_col": ("crf", ["--force-col", "-1"], -1),
        "unknown_label": ("crf", ["--force-col", "-1", "--unknown-label", "_"], "_"),
        "scheduler": ("crf", ["--scheduler", "tcp://127.0.0.1:9"], "tcp://127.0.0.1:9"),
        "workers": ("crf", ["--workers", "3"], 3),
        "piece_bytes": ("crf", ["--piece-bytes", "5000"], 5000),
        "encoding": ("crf", ["--encoding", "latin-1"], codec("latin-1")),
        # a process-wide setting (every reader of the process takes it): tag_files ships it to the
        # workers (test_a_raised_line_limit_reaches_the_workers); here, that it is set
        "max_line_bytes": ("crf", ["--max-line-bytes", "2000000"], 2_000_000),
    }
    cases.update({"format": ("attributes", ["--format", "crfsuite"], "crfsuite"),
                  "reference": ("attributes", ["--format", "crfsuite", "--reference"], True)})
    options = {p.name for p in main.commands["tag"].params}
    assert options == set(cases), "a tag option that the Dask path may not get: forward it and add a case"
    assert set(inspect.signature(TagJob).parameters) == {"model", "name", *JOB_OPTIONS}
    for name, (kind, args, value) in cases.items():
        seen.clear()
        inputs = [] if name == "inputs" else [str(crfsuite_input) if kind == "attributes" else a]
        cluster_args = [] if name in ("scheduler", "workers") else ["--workers", "2"]
        result = CliRunner().invoke(main, ["tag", "-m", kinds[kind], *cluster_args, *args, *inputs])
        assert result.exit_code == 0, (name, result.output)
        assert set(JOB_OPTIONS) <= set(seen), name
        if name == "max_line_bytes":
            from crftk.io.conll import MAX_LINE_BYTES, set_max_line_bytes
            seen[name] = set_max_line_bytes(MAX_LINE_BYTES)        # what the option set; back to the default
        got = tuple(seen[name]) if name == "inputs" else seen[name]
        if name == "weights":
            assert got.keys() == value.keys() and all(np.array_equal(got[k], value[k]) for k in value)
        else:
            assert got == value, name


def test_a_label_latin1_cannot_write_is_one_error_and_no_output(cluster, tmp_path):
    from crftk.features.templates import parse_template
    sents = read_corpus(DEMO_TRAIN)[:100]
    for s in sents:
        s.rows[:] = [row[:-1] + ["€" if row[-1] == "O" else row[-1]] for row in s.rows]
    euro = fit(sents, parse_template("U0:%x[0,0]\nB\n"), log=lambda m: None, max_iter=3, threads=1)
    latin1 = tmp_path / "demo.latin1"
    latin1.write_bytes("".join(open(DEMO_TEST).readlines()[:400]).encode("latin-1"))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(CrftkError, match=f"^{out_dir / 'demo.latin1'}: cannot write '€' in iso8859-1, the "
                                         "output's encoding$"):
        tag_files(cluster, euro, [str(latin1)], out_dir=str(out_dir), piece_bytes=3_000, encoding="latin-1")
    assert list(out_dir.iterdir()) == []


def test_a_raised_line_limit_reaches_the_workers(cluster, tmp_path):
    # --max-line-bytes is set for the whole process; the workers read with the driver's value
    from crftk.io.conll import max_line_bytes, set_max_line_bytes
    from crftk.features.templates import parse_template
    model = fit(read_corpus(DEMO_TRAIN)[:50], parse_template("U0:%x[0,0]\nB\n"), log=lambda m: None,
                max_iter=2, threads=1)
    long = tmp_path / "long.txt"
    long.write_text("a" * 1_500_000 + " NN\n\nb NN\n\n")
    before = max_line_bytes()
    try:
        with pytest.raises(CrftkError, match="a line of more than 1,048,576 bytes"):
            tag_files(cluster, model, [str(long)], io.StringIO(), piece_bytes=3_000_000)
        set_max_line_bytes(2_000_000)
        out = io.StringIO()
        tag_files(cluster, model, [str(long)], out, piece_bytes=3_000_000)
        assert out.getvalue().count("\n") == 4
    finally:
        set_max_line_bytes(before)
