"""Progress on a terminal: counted nouns, transient status lines, and the long steps that show them."""

import io

from corpora import random_corpus
from crftk.progress import Reporter, plural, status


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_plural():
    assert plural(1, "thread") == "1 thread"
    assert plural(2, "thread") == "2 threads"
    assert plural(0, "label") == "0 labels"
    assert plural(8936, "sentence") == "8,936 sentences"
    assert plural(3, "label pair") == "3 label pairs"


def test_reporter_shows_status_on_a_terminal_only_and_erases_it():
    tty = FakeTerminal()
    rep = Reporter(tty)
    status(rep, "working ...")
    rep("done")
    assert tty.getvalue() == "\r\x1b[Kworking ...\r\x1b[Kdone\n"
    pipe = io.StringIO()
    rep = Reporter(pipe)
    status(rep, "working ...")
    rep("done")
    assert pipe.getvalue() == "done\n"
    quiet = FakeTerminal()
    rep = Reporter(quiet, quiet=True)
    status(rep, "x")
    rep("y")
    assert quiet.getvalue() == ""
    status(lambda msg: None, "a plain callable has no status line")     # no error


def statuses(stream):
    return [part.split("\n")[0] for part in stream.getvalue().split("\r\x1b[K") if part and "\n" not in part]


def test_induce_rounds_show_their_steps(tmp_path):
    from crftk.commands.induce import induce
    path = tmp_path / "train.txt"
    path.write_text("".join("\n".join(" ".join(r) for r in s.rows) + "\n\n" for s in random_corpus(60, seed=2)))
    tmpl = tmp_path / "a.tmpl"
    tmpl.write_text("U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]\nB\n")
    tty = FakeTerminal()
    induce([str(path)], str(tmpl), log=Reporter(tty), rounds=2, gain_threshold=0.1, round_iter=3,
           threads=1, gain_folds=2)
    shown = statuses(tty)
    assert any(s.startswith("reading and encoding") for s in shown)
    assert any(s.startswith("round 1: fold model 1 of 2: L-BFGS iteration") for s in shown)
    assert any(s.startswith("round 1:") and "error tokens; scoring" in s for s in shown)
    assert any(s.startswith("round 1: training: L-BFGS iteration 1 of at most 3") for s in shown)


def test_train_shows_encoding_on_a_terminal(tmp_path):
    from crftk.commands.train import train
    path = tmp_path / "train.txt"
    path.write_text("".join("\n".join(" ".join(r) for r in s.rows) + "\n\n" for s in random_corpus(20)))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text("U0:%x[0,0]\nB\n")
    tty = FakeTerminal()
    train([str(path)], str(tmpl), log=Reporter(tty), max_iter=2, threads=1)
    assert any(s.startswith("reading and encoding the training data") for s in statuses(tty))
    assert "1 thread)" in tty.getvalue() and "1 threads" not in tty.getvalue()


def test_quiet_still_prints_warnings():
    out = io.StringIO()
    rep = Reporter(out, quiet=True)
    rep("iteration 1: objective 12.5")
    rep("crftk: warning: the template has no U lines: a transitions-only model")
    assert out.getvalue() == "crftk: warning: the template has no U lines: a transitions-only model\n"
