"""Errors a user can cause (bad files, bad options). The CLI prints them as one line, exit 2."""


class KosumiError(Exception):
    """A user-facing error: the message names the file/field/line and what is wrong."""


class WriteFailed(KosumiError):
    """An output could not be written (disk full, no permission): a problem of the output, never
    of the input being read, so a job that skips bad inputs stops on it."""


class Terminated(BaseException):
    """SIGTERM (a job scheduler, ``kill``): like KeyboardInterrupt a BaseException, so no
    ``except Exception`` swallows it, but not one, so the CLI framework does not turn it into a
    silent exit 130. The same clean stop as Ctrl-C (pool workers ended, atomic files kept, a
    training run saved), then one line and exit code 143."""
