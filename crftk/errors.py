"""The one error type for mistakes a user can cause."""

#: Longest message printed whole; beyond it the middle is cut (a message is one line).
MAX_MESSAGE = 500


class CrftkError(Exception):
    """A user-facing error: printed as one line ``path:line: message``."""

    #: the command-line exit status
    exit_code = 1

    def __init__(self, message, path=None, line=None):
        self.message = _one_line(str(message))
        self.path = None if path is None else _one_line(str(path))
        self.line = line
        super().__init__(str(self))

    def __str__(self):
        where = ""
        if self.path is not None:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        return where + self.message


class UsageError(CrftkError):
    """A mistake in the command line itself (options that do not go together): exit status 2,
    as for click's own usage errors."""

    exit_code = 2


def shown(value, limit=40):
    """A user's value quoted for a message, its middle cut when long.

    ``shown("B-NP") == "'B-NP'"``; a 1 MB label becomes its first and last
    characters around ``...`` with its length, so that an error stays one
    readable line.
    """
    text = repr(str(value))
    if len(text) <= limit:
        return text
    half = max(4, (limit - 5) // 2)
    return f"{text[:half]}...{text[-half:]} ({len(str(value)):,} characters)"


#: every character that ends a line for str.splitlines (and so for a reader of the message),
#: written as its escape so that a message stays one line
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def _one_line(text):
    text = text.translate(_LINE_BREAKS)
    if len(text) > MAX_MESSAGE:
        half = MAX_MESSAGE // 2 - 10
        text = f"{text[:half]} ...[{len(text) - 2 * half:,} characters]... {text[-half:]}"
    return text
