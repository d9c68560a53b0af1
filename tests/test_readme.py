"""The README's command blocks, run as written (issue 30).

Every fenced block of README.md is extracted at test time and decided by its info string:
``sh`` blocks run command by command in bash, ``python`` blocks as scripts, both in README
order in one shared directory laid out like a fresh clone (``templates/``, ``data/``) with
small stand-ins of the corpora the README names (``train.txt``, ``dev.txt``, ``test.txt``
and ``eng.train``, ``eng.testa`` in the working directory, ``../shared/data/conll2000/``
beside it), made here from data/demo.*: never from the real corpora. ``crftk`` on PATH is a
shim running this checkout's ``python -m crftk.cli``. Fences without an info string or with
``text`` are documentation (the template example, the layout tree); any other info string
fails, so that a new kind of block is decided on, not skipped.

A block preceded by ``<!-- readme-test: synopsis -->`` shows placeholders (``MODEL``,
``[options]``) and cannot run: each of its lines must name a subcommand of the CLI and
only options that subcommand has.

A failing command fails its block's test with the README line of the command and its
stderr. Commands run as written except for the substitutions below (each must still match
the README, so a stale entry fails too). Blocks that cannot run today are listed in
KNOWN_FAILURES (strict xfail: fixing one fails the test until its entry goes). The Dask block
(about 12 s: it starts 4 worker processes) is skipped without Dask. ``make readme-check``
runs this file alone.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zlib
from dataclasses import dataclass, field

import pytest

from corpora import REPO

README = REPO / "README.md"
SHELL_INFOS = {"sh", "bash", "shell"}
PYTHON_INFOS = {"python", "py"}
DOC_INFOS = {"", "text"}
MARKER = re.compile(r"<!--\s*readme-test:\s*(\w+)\s*-->")
COMMAND_TIMEOUT = 300

# ---- what the test changes in a command, and why ------------------------------------------------
#: (pattern, replacement, why): applied to each shell command and Python block (re.sub, MULTILINE).
#: "{scheduler}" in a replacement is the address of a LocalCluster the test starts.
SUBSTITUTIONS = [
    (r"^(crftk (?:train|bag|induce) .*?)(\s+#.*)?$", r"\1 --max-iter 3\2",
     "training commands: 3 iterations, seconds on the stand-ins"),
    (r"max_iter=100\b", "max_iter=3", "the Python API's training on the demo corpus"),
    (r"crftk\.CRF\((.*)\)\.fit\(", r"crftk.CRF(\1, max_iter=3).fit(", "the API's training to convergence"),
    (r"tcp://head:8786", "{scheduler}", "the scheduler of the example: a LocalCluster of the test"),
]
#: `make ...` lines are not run (make demo/test/install would install and run the suite inside
#: the suite, other targets need the real corpora): the Makefile must have each target named.
MAKE_LINE = re.compile(r"^make(\s.*)?$")
#: Blocks that need Dask, recognised by their text.
DASK_BLOCK = re.compile(r"--(?:workers|scheduler)\b")
#: Blocks known not to run today: (a line of the block, reason). strict: when one is fixed the
#: test says so, and the entry goes.
KNOWN_FAILURES = [
]


# ---- the README's blocks -------------------------------------------------------------------------

@dataclass
class Block:
    line: int            # README line of the opening fence
    info: str
    text: str
    marker: str = ""
    text_lines: list = field(default_factory=list)   # (README line, line text)

    @property
    def id(self):
        return f"L{self.line}-{self.info or 'doc'}"


def readme_blocks(text):
    blocks, fence, previous = [], None, ""
    for number, line in enumerate(text.splitlines(), 1):
        if fence is None:
            m = re.match(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)", line)
            if m:
                marker = MARKER.search(previous)
                fence = (m.group(1), Block(number, m.group(2).lower(), "", marker.group(1) if marker else ""))
            elif line.strip():
                previous = line
        elif line.strip().startswith(fence[0]):
            block = fence[1]
            block.text = "".join(t + "\n" for _, t in block.text_lines)
            blocks.append(block)
            fence, previous = None, ""
        else:
            fence[1].text_lines.append((number, line))
    assert fence is None, f"README.md:{fence[1].line}: fence never closed"
    return blocks


def commands(block):
    """(README line, command) of a shell block: continuation lines joined, comment lines dropped."""
    out, pending, start = [], "", 0
    for number, line in block.text_lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.strip()[:-1].rstrip() + " "
            continue
        out.append((start, pending + line.strip()))
        pending = ""
    return out


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
RUNNABLE = [b for b in BLOCKS if b.info in SHELL_INFOS | PYTHON_INFOS and b.marker != "synopsis"]


def substitute(text, scheduler="", used=None):
    for i, (pattern, replacement, _) in enumerate(SUBSTITUTIONS):
        new = re.sub(pattern, replacement.replace("{scheduler}", scheduler), text, flags=re.MULTILINE)
        if new != text and used is not None:
            used.add(i)
        text = new
    return text


# ---- stand-ins of the corpora ---------------------------------------------------------------------

def demo_sentences(name):
    text = (REPO / "data" / name).read_text(encoding="utf-8")
    return [[row.split("\t") for row in s.splitlines()] for s in text.split("\n\n") if s.strip()]


def conll2000(sentences):
    """CoNLL-2000 layout: word POS chunk, space-separated, a blank line after each sentence."""
    return "".join("".join(" ".join(row) + "\n" for row in s) + "\n" for s in sentences)


def iob1(tags):
    """IOB2 tags as IOB1: B- only where a phrase follows one of the same type."""
    out = []
    for i, tag in enumerate(tags):
        if tag.startswith("B-"):
            before = tags[i - 1] if i else "O"
            tag = tag if before != "O" and before[2:] == tag[2:] else "I-" + tag[2:]
        out.append(tag)
    return out


def entity_tags(sent):
    """NER tags in IOB2 for a demo sentence: each run of NNP/NNPS tokens is an entity, its type
    chosen by its first word (deterministic), so that lexicons and taggers have something to learn."""
    tags, types = [], ("PER", "LOC", "ORG", "MISC")
    for i, (word, pos, _) in enumerate(sent):
        if pos.startswith("NNP"):
            inside = i and sent[i - 1][1].startswith("NNP")
            tags.append("I-" + tags[-1][2:] if inside else "B-" + types[zlib.crc32(word.encode()) % 4])
        else:
            tags.append("O")
    return tags


def conll2003(sentences, per_doc=10):
    """CoNLL-2003 layout: word POS chunk NER, chunk and NER tags in IOB1, -DOCSTART- lines."""
    out = []
    for i, s in enumerate(sentences):
        if i % per_doc == 0:
            out.append("-DOCSTART- -X- -X- O\n\n")
        chunks, entities = iob1([r[2] for r in s]), iob1(entity_tags(s))
        out.append("".join(f"{r[0]} {r[1]} {c} {e}\n" for r, c, e in zip(s, chunks, entities)) + "\n")
    return "".join(out)


def lay_out(root):
    """A fresh clone's working directory with the corpora's stand-ins; returns it."""
    work = root / "crftk"
    work.mkdir()
    for name in ("templates", "data"):
        shutil.copytree(REPO / name, work / name)     # copies: the bag templates name ../out/...
    train, test = demo_sentences("demo.train"), demo_sentences("demo.test")
    files = {"train.txt": conll2000(train[:200]), "dev.txt": conll2000(test[:50]),
             "test.txt": conll2000(test[50:100]), "big.txt": conll2000(test[:150]),
             "corpus/a.txt": conll2000(test[:30]), "corpus/b.txt": conll2000(test[30:60]),
             "eng.train": conll2003(train[200:500]), "eng.testa": conll2003(test[100:160])}
    shared = root / "shared" / "data" / "conll2000"
    shared.mkdir(parents=True)
    (shared / "train.txt").write_text(files["train.txt"])
    (shared / "dev.txt").write_text(files["dev.txt"])
    for name, text in files.items():
        (work / name).parent.mkdir(exist_ok=True)
        (work / name).write_text(text)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "crftk"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m crftk.cli "$@"\n')
    shim.chmod(0o755)
    return work


def test_stand_ins_have_the_corpora_formats(tmp_path):
    work = lay_out(tmp_path)
    rows = [line.split() for line in (work / "eng.train").read_text().splitlines() if line.strip()]
    assert rows[0] == ["-DOCSTART-", "-X-", "-X-", "O"]
    words = [r for r in rows if r[0] != "-DOCSTART-"]
    assert {len(r) for r in words} == {4}
    ner = [r[3] for r in words]
    assert not any(t.startswith("B-") and (p == "O" or p[2:] != t[2:]) for p, t in zip(["O"] + ner, ner))
    assert {t[2:] for t in ner if t != "O"} == {"PER", "LOC", "ORG", "MISC"}
    assert {len(line.split(" ")) for line in (work / "train.txt").read_text().splitlines() if line} == {3}


# ---- running blocks ---------------------------------------------------------------------------------

class Workspace:
    def __init__(self, root):
        self.root = root
        self.work = lay_out(root)
        self.env = dict(os.environ, PATH=f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                        OPENBLAS_NUM_THREADS="1")
        self.done = {}
        self.used = set()
        self.scheduler = None

    def address(self):
        """A LocalCluster (one worker thread) in a process of its own, for --scheduler."""
        if self.scheduler is None:
            serve = ("import time\nfrom distributed import LocalCluster\n"
                     "c = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol='tcp://', host='127.0.0.1',"
                     " scheduler_port=0, dashboard_address=None)\nprint(c.scheduler_address, flush=True)\n"
                     "time.sleep(3600)\n")
            process = subprocess.Popen([sys.executable, "-c", serve], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, env=self.env, cwd=self.work, text=True)
            self.scheduler = (process, process.stdout.readline().strip())
            assert self.scheduler[1].startswith("tcp://"), "the LocalCluster did not start"
        return self.scheduler[1]

    def close(self):
        if self.scheduler is not None:
            self.scheduler[0].kill()
            self.scheduler[0].wait()

    def run(self, block):
        """None if every command of the block succeeded, else what failed (README line, stderr)."""
        scheduler = self.address() if "tcp://head" in block.text else ""
        if block.info in PYTHON_INFOS:
            script = substitute(block.text, scheduler, self.used)
            return self._exec([sys.executable, "-c", script], block.line, block.text)
        for line, command in commands(block):
            make = MAKE_LINE.match(re.sub(r"\s+#.*", "", command))
            if make:
                named = {w for w in (make.group(1) or "").split() if "=" not in w and not w.startswith("-")}
                missing = named - makefile_targets()
                if missing:
                    return f"README.md:{line}: {command}\nthe Makefile has no target {sorted(missing)}"
                continue
            failure = self._exec(["bash", "-c", substitute(command, scheduler, self.used)], line, command)
            if failure:
                return failure
        return None

    def _exec(self, argv, line, as_written):
        r = subprocess.run(argv, cwd=self.work, env=self.env, capture_output=True, text=True,
                           timeout=COMMAND_TIMEOUT)
        if r.returncode != 0 or "Traceback" in r.stderr:
            shown = argv[-1] if argv[0] == "bash" else "(the block, substituted)"
            return (f"README.md:{line}: exit {r.returncode}\n  as written: {as_written.strip()}\n"
                    f"  ran: {shown.strip()}\n  stderr:\n{textwrap.indent(r.stderr[-4000:], '    ')}")
        return None


def makefile_targets():
    text = (REPO / "Makefile").read_text()
    return {t for m in re.finditer(r"^([\w.%/ -]+?)\s*::?(?!=)", text, re.MULTILINE) for t in m.group(1).split()}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("readme"))
    yield ws
    ws.close()


def known_failure(block):
    for text, reason in KNOWN_FAILURES:
        if text in block.text:
            return reason
    return None


def has_dask():
    # the real package, not tests/distributed seen as a namespace package through pythonpath
    spec = importlib.util.find_spec("distributed")
    return spec is not None and spec.origin not in (None, "namespace")


def _params(block):
    marks = []
    if DASK_BLOCK.search(block.text):
        marks.append(pytest.mark.skipif(not has_dask(), reason="needs Dask (pip install crftk[dask])"))
    reason = known_failure(block)
    if reason:
        marks.append(pytest.mark.xfail(strict=True, reason=reason))
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", [_params(b) for b in RUNNABLE])
def test_readme_block_runs_as_written(workspace, block):
    # README order in one directory: a block may use what the blocks above it made, so run any
    # earlier one not run yet (a -k selection), its outcome recorded, not asserted
    for earlier in RUNNABLE[:RUNNABLE.index(block)]:
        if earlier.line not in workspace.done and (has_dask() or not DASK_BLOCK.search(earlier.text)):
            workspace.done[earlier.line] = workspace.run(earlier)
    failure = workspace.done[block.line] = workspace.run(block)
    if failure:
        pytest.fail(failure, pytrace=False)


# ---- the README's shape ------------------------------------------------------------------------------

def test_every_block_is_decided_by_its_info_string():
    undecided = [f"README.md:{b.line}: ```{b.info}" for b in BLOCKS
                 if b.info not in SHELL_INFOS | PYTHON_INFOS | DOC_INFOS]
    assert not undecided, "run it (sh, python) or mark it documentation (text): " + ", ".join(undecided)
    assert RUNNABLE, "no runnable block found in README.md"
    assert {b.marker for b in BLOCKS} <= {"", "synopsis"}, "unknown readme-test marker"


def test_no_command_hides_in_an_indented_block():
    """An indented code block is not extracted: commands belong in ```sh fences."""
    text, inside, hidden = README.read_text(encoding="utf-8").splitlines(), False, []
    for number, line in enumerate(text, 1):
        if re.match(r"^\s*(`{3,}|~{3,})", line):
            inside = not inside
        elif not inside and re.match(r"^( {4}|\t)\s*(crftk|make|python3?) ", line):
            hidden.append(f"README.md:{number}")
    assert not hidden, "indented commands, not run by this test: " + ", ".join(hidden)


def test_every_substitution_is_used():
    used = set()
    for block in RUNNABLE:
        if block.info in PYTHON_INFOS:
            substitute(block.text, "tcp://x", used)
        for _, command in (commands(block) if block.info in SHELL_INFOS else ()):
            substitute(command, "tcp://x", used)
    stale = [SUBSTITUTIONS[i][0] for i in range(len(SUBSTITUTIONS)) if i not in used]
    assert not stale, f"substitutions that match no README block any more: {stale}"
    for text, _ in KNOWN_FAILURES:
        assert any(text in b.text for b in RUNNABLE), f"known failure {text!r} matches no block"


def _option_names(command):
    names = set()
    for param in command.params:
        names.update(getattr(param, "opts", ()))
        names.update(getattr(param, "secondary_opts", ()))
    return names


SYNOPSES = [b for b in BLOCKS if b.marker == "synopsis"]


@pytest.mark.parametrize("block", SYNOPSES, ids=[b.id for b in SYNOPSES])
def test_synopsis_names_only_commands_and_options_that_exist(block):
    from crftk.cli import main
    problems = []
    for number, line in block.text_lines:
        words = line.split()
        if not words:
            continue
        if words[0] != "crftk" or len(words) < 2 or words[1] not in main.commands:
            problems.append(f"README.md:{number}: not a crftk subcommand: {line.strip()}")
            continue
        known = _option_names(main.commands[words[1]])
        for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", line):
            # -vv is -v twice; -abc would be three short flags
            spelled = [option] if option.startswith("--") else ["-" + c for c in option[1:]]
            problems += [f"README.md:{number}: crftk {words[1]} has no option {o}" for o in spelled if o not in known]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_synopsis_lists_every_subcommand():
    from crftk.cli import main
    listed = {line.split()[1] for b in SYNOPSES for _, line in b.text_lines if len(line.split()) > 1}
    assert SYNOPSES, "no block of README.md is marked <!-- readme-test: synopsis -->"
    assert set(main.commands) <= listed, f"subcommands missing from the synopsis: {set(main.commands) - listed}"
