"""The one error type for mistakes a user can cause."""


class CrftkError(Exception):
    """A user-facing error: printed as one line ``path:line: message``."""

    def __init__(self, message, path=None, line=None):
        self.message = message
        self.path = None if path is None else str(path)
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
