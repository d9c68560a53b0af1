"""Telling the user what long work is doing: counted nouns, progress lines on a terminal."""

import sys
import time

#: how warnings begin; a quiet Reporter still prints them
WARNING = "crftk: warning:"


def plural(n, noun, plural_noun=None):
    """``"1 thread"``, ``"2 threads"``: a count with its noun (thousands separated)."""
    if n == 1:
        return f"1 {noun}"
    return f"{n:,} {plural_noun or noun + 's'}"


def tty_progress(stream=None, what="tagged"):
    """A reporter ``report(n_sentences, n_tokens)`` that rewrites one line on a terminal.

    None when ``stream`` (default: stderr) is not a terminal, so that logs and
    pipes get no carriage returns.
    """
    stream = sys.stderr if stream is None else stream
    if not stream.isatty():
        return None
    start = time.perf_counter()

    def report(n_sent, n_tok):
        rate = n_tok / max(time.perf_counter() - start, 1e-9)
        stream.write(f"\r{what} {plural(n_sent, 'sentence')}, {plural(n_tok, 'token')} "
                     f"({rate:,.0f} tokens/s)")
        stream.flush()
    return report


class Reporter:
    """The log of a command: lines on stderr, and a transient status line on a terminal.

    ``quiet`` drops everything but warnings.

    Library functions take any ``log(message)`` callable; they call
    :func:`status` for work in progress, which only a Reporter on a terminal
    shows (and erases before the next line), so that logs and pipes stay clean.
    """

    def __init__(self, stream=None, quiet=False):
        self.stream = sys.stderr if stream is None else stream
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self._shown = False

    def __call__(self, message):
        if self.quiet and not message.startswith(WARNING):    # warnings show even when quiet
            return
        self._erase()
        self.stream.write(message + "\n")
        self.stream.flush()

    def status(self, message):
        if self.quiet or not self.tty:
            return
        self.stream.write("\r\x1b[K" + message)
        self.stream.flush()
        self._shown = True

    def _erase(self):
        if self._shown:
            self.stream.write("\r\x1b[K")
            self._shown = False


def status(log, message):
    """Show ``message`` as work in progress if ``log`` can (a Reporter on a terminal)."""
    show = getattr(log, "status", None)
    if show is not None:
        show(message)
