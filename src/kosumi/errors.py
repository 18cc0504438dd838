"""Errors a user can cause (bad files, bad options). The CLI prints them as one line, exit 2."""


class KosumiError(Exception):
    """A user-facing error: the message names the file/field/line and what is wrong."""
