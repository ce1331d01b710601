"""The parser of every sub-command, and :func:`main`: warnings shown in one line each,
errors in one line with exit status 2, signals answered in one line, a closed pipe
quietly (status 141)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
import warnings

from dpbook.cli import EARLY_SIGNALS, calibrate, curate, experiment, fisher, posterior, stream
from dpbook.cli.args import Parser, UsageError
from dpbook.cli.family import add_user_family_options, user_code_error


def build_parser() -> Parser:
    """The ``dpbook`` parser with all its sub-commands (the book's command-line reference
    is generated from it)."""
    p = Parser(prog="dpbook", description="The dpbook command line: Fisher information, "
               "best intervals, posteriors, streams, the curator, the experiment and "
               "calibration.  Bad input gives one line 'dpbook: error: ...' and exit "
               "status 2.  Runs longer than about 2 s show their progress on stderr when "
               "it is a terminal, and never otherwise.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    fisher.add_parsers(sub)
    posterior.add_parser(sub)
    experiment.add_parser(sub)
    calibrate.add_parser(sub)
    stream.add_parser(sub)
    curate.add_parser(sub)
    return p


class _Warnings:
    """How the command line shows warnings: one line each.  dpbook's own warnings (a
    result that may be poor, a store file set aside) are shown as they come; numpy's and
    scipy's numeric warnings (overflow, invalid value) are held back and shown once each
    at the end of a command that succeeds: a command that ends in an error prints only
    its one line, since the error says what is wrong."""

    def __init__(self):
        self.held = []

    def show(self, message, category, filename, lineno, file=None, line=None):
        text = str(message).splitlines()[0] if str(message) else category.__name__
        text = f"dpbook: warning: {text}"
        if issubclass(category, RuntimeWarning) and not category.__module__.startswith(
                "dpbook"):
            if text not in self.held:
                self.held.append(text)
        else:
            print(text, file=sys.stderr)

    def flush(self):
        for text in self.held:
            print(text, file=sys.stderr)
        self.held.clear()


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that the same clean-up runs (pool workers
    stopped, finished tasks kept, a temporary output file removed); the status is
    128 + the signal's number, as the shell's for a process the signal ends."""

    def __init__(self, signum=signal.SIGTERM):
        super().__init__()
        self.signum = signum


def _caught():
    """The signals answered: SIGINT, SIGTERM, and SIGHUP unless it is ignored (``nohup``
    ignores it so that the command outlives its terminal, as coreutils' sort keeps)."""
    return (signal.SIGINT, signal.SIGTERM) + (
        (signal.SIGHUP,) if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN else ())


@contextlib.contextmanager
def _signals():
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP :class:`_Terminated`, once: a
    repeat while the command cleans up is ignored (``timeout`` delivers SIGINT twice, to
    the process and to its group; a second KeyboardInterrupt inside the clean-up was a
    39-line 'release unlocked lock' traceback).  SIGTERM's default action would end the
    process at once and leave the pool's workers and resource tracker running.  Raised
    inside a ctypes callback (numba's compiler loading its cache), the exception is
    swallowed ("Exception ignored ...") and the command ran on to its end: the signal is
    then sent again a moment later.  After a signal, an object it left half-built fails
    in its __del__ without a word."""
    got, hook = [], sys.unraisablehook

    def handler(signum, frame):
        if got:
            return
        got.append(signum)
        raise _Terminated(signum) if signum != signal.SIGINT else KeyboardInterrupt()

    def unraisable(u):
        if isinstance(u.exc_value, KeyboardInterrupt) and got:
            threading.Timer(0.02, os.kill, (os.getpid(), got.pop())).start()
        elif not got:
            hook(u)

    try:
        old = {s: signal.signal(s, handler) for s in _caught()}
    except ValueError:  # not the main thread: leave the signals alone
        old = {}
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        sys.unraisablehook = hook if not got else (lambda u: None)


def _interrupted(args, e) -> str:
    what = "interrupted" if not isinstance(e, _Terminated) else \
        "hung up" if e.signum == signal.SIGHUP else "terminated"
    out = getattr(args, "out", None) if args is not None else None
    if out is None:
        return f"dpbook: {what}"
    return (f"dpbook: {what}; the results stored so far are kept in {out}, and the same "
            f"command resumes from them")


def _to_devnull(fd):
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def main(argv=None) -> int:
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:  # closed from the start (>&-): as /dev/null, and
            _to_devnull(fd)  # its descriptor held, so that no file dpbook opens gets it
            setattr(sys, name, open(fd, "w", closefd=False))
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed or full stdout is seen here, not at Python's exit
        return code
    except BrokenPipeError:
        # The reader of stdout or stderr has gone (dpbook ... | head -1).  Python's recipe
        # (signal module, "Note on SIGPIPE"): what is still buffered goes to /dev/null, so
        # that the flush at exit does not fail again; the status is the shell's for a
        # program SIGPIPE ends, 128 + 13, as 130 and 143 answer Ctrl-C and SIGTERM.
        _to_devnull(1)
        _to_devnull(2)
        return 128 + signal.SIGPIPE
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        with contextlib.suppress(OSError):  # stderr may be the full device
            print(f"dpbook: error: cannot write {e.filename or 'the output'}: "
                  f"{e.strerror}", file=sys.stderr)
        _to_devnull(1)
        return 2


def _main(argv) -> int:
    shown, args = _Warnings(), None
    with warnings.catch_warnings(), _signals():
        warnings.showwarning = shown.show  # a user sees one line, not a stack
        try:
            if EARLY_SIGNALS:  # a signal held while the command line started
                raise _Terminated(EARLY_SIGNALS[0]) if EARLY_SIGNALS[0] != signal.SIGINT \
                    else KeyboardInterrupt()
            parser = build_parser()
            add_user_family_options(parser, argv)
            args = parser.parse_args(argv)
            args.func(args)
        except (UsageError, ValueError) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(f"dpbook: error: {msg}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as e:
            print(_interrupted(args, e), file=sys.stderr)
            return 128 + (e.signum if isinstance(e, _Terminated) else signal.SIGINT)
        except (Exception, SystemExit) as e:  # in a user's family: one line
            msg = user_code_error(e)
            if msg is None:
                raise
            print(f"dpbook: error: {msg}", file=sys.stderr)
            return 2
        shown.flush()
    return 0
