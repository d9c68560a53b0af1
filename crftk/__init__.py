"""crftk: conditional random fields on sequences, from the command line and from Python."""

from crftk.errors import CrftkError

__version__ = "0.1.0"
__all__ = ["CrftkError", "__version__"]
