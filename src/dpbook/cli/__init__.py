"""The ``dpbook`` command line.

Sub-commands: ``fisher``, ``best-interval``, ``posterior``, ``experiment``, ``calibrate``,
``families``, ``stream``, ``curator``, one module each (:mod:`dpbook.cli.app` holds the
parser and :func:`main`).  Every computing sub-command takes ``--family`` (a shipped
family by name with its options, such as ``--df``, or a Family subclass of one's own as
``module:Class`` or ``path/to/file.py:Class``) and ``--mechanism laplace|gaussian``.  Bad
input gives one line ``dpbook: error: <what is wrong>`` and exit status 2.
"""

import contextlib
import os
import signal
import sys

# A signal that arrives while the command line starts (numpy and the rest are imported
# before main() installs its handlers) is held and answered by main() as any other:
# one line and exit 143 (SIGTERM), 129 (SIGHUP) or 130 (Ctrl-C).  Only when the command
# line runs (``python -m dpbook.cli``, the ``dpbook`` script): importing it changes no
# handler.
EARLY_SIGNALS: list = []

if os.path.basename(sys.argv[0] if sys.argv else "") in ("dpbook", "__main__.py") \
        or sys.argv[:1] == ["-m"]:
    with contextlib.suppress(ValueError):  # not the main thread
        for _s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(_s) != signal.SIG_IGN or _s != signal.SIGHUP:  # nohup's
                signal.signal(_s, lambda signum, frame: EARLY_SIGNALS.append(signum))


def main(argv=None) -> int:
    """The command line (:func:`dpbook.cli.app.main`), once the environment is checked:
    it is imported here, since numba reads the environment as it is imported."""
    from dpbook.environment import environment_problem

    problem = environment_problem()
    if problem:
        print(f"dpbook: error: {problem}", file=sys.stderr)
        return 2
    from dpbook.cli.app import main as run

    return run(argv)


def build_parser():
    from dpbook.cli.app import build_parser as build

    return build()


__all__ = ["build_parser", "main"]
