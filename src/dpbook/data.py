"""Reading the command line's CSV input: released data (y, l, r) and columns of values.

One reader for ``dpbook posterior`` and ``curator take`` (releases) and ``dpbook stream``
(a column of sensitive values): pandas reads the file (or its gzip, bz2, xz, zip, tar or
zstd-compressed form, by its extension), and every cell is checked to be
an ASCII decimal number, so a boolean, digits of another script or other text is refused
with its line and column.  A missing cell (empty, or a blank line) is refused, or with
``missing="skip"`` its row is dropped and counted.
"""

from __future__ import annotations

import contextlib
import lzma
import os
import re
import tarfile
import zipfile
import zlib

import numpy as np

# an ASCII decimal number as CSV files and most tools write it (or inf: refused later,
# with the supported range); [0-9], as \d would match the digits of every script
_NUMBER = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity)",
                     re.IGNORECASE)
MISSING = ("error", "skip")


def read_releases(path, missing="error"):
    """The releases of a CSV file with header y,l,r (one per row, time order), checked:
    ((y, l, r), rows skipped)."""
    from dpbook.validation import check_observations

    cols, skipped = read_csv_columns(path, ("y", "l", "r"), "header must be y,l,r", missing)
    return check_observations(cols["y"], cols["l"], cols["r"]), skipped


# compressed input that pandas reads by the file's extension
COMPRESSED = (".gz", ".bz2", ".xz", ".zip", ".zst", ".tar", ".tgz")
SCAN_CHUNK = 1 << 20  # bytes read at a time by the check for binary content


def _open_check(path):
    """ValueError for what is not a text file, found in bounded memory before pandas
    reads it: a FIFO, a directory, UTF-16, or a NUL byte anywhere, read in chunks of
    :data:`SCAN_CHUNK` (decompressed, for a compressed file: 8 MB of gzip held 2 GB of
    zeros after a valid head, which pandas tried to hold at once)."""
    import stat

    from pandas.io.common import get_handle

    with contextlib.suppress(OSError):  # a FIFO without a writer would block forever
        if stat.S_ISFIFO(os.stat(path).st_mode):
            raise ValueError(f"{path} is a FIFO: dpbook reads regular files (write the "
                             f"data to a file first)")
    try:
        with get_handle(path, "rb", compression="infer", is_text=False) as h:
            head, at = h.handle.read(4096), 0
            if head.startswith((b"\xff\xfe", b"\xfe\xff")):
                raise ValueError(f"{path} is UTF-16 text; save it as UTF-8 (or ASCII) CSV")
            chunk = head
            while chunk:
                if b"\x00" in chunk:
                    where = at + chunk.index(b"\x00")
                    raise ValueError(f"{path} is a binary file, not a CSV file (a NUL byte"
                                     + (f" at byte {where}, past its text" if where else "")
                                     + ")")
                at += len(chunk)
                chunk = h.handle.read(SCAN_CHUNK)
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a directory, not a CSV file") from None
    except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, lzma.LZMAError,
            zlib.error, ImportError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith(str(path)):
            raise
        if not str(path).lower().endswith(COMPRESSED):
            raise ValueError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") \
                from None
        # a damaged compressed file: pandas reads it next and says what is wrong


def read_csv_columns(path, columns, expected=None, missing="error"):
    """The named numeric columns of a CSV file with a header, as float arrays, and the
    number of rows skipped: ({column: array}, skipped).  A row with an empty cell in one
    of ``columns`` (a blank line too) is an error (``missing="error"``) or is dropped and
    counted (``"skip"``).  ValueError naming the file, and the line and column of a bad
    cell: a file that is not UTF-8 CSV text, a missing column (the message lists the
    file's columns), a column named twice, no data rows, a cell that is not an ASCII
    number (a boolean, other text)."""
    import pandas as pd

    if missing not in MISSING:
        raise ValueError(f"missing must be one of {', '.join(MISSING)}, got {missing!r}")
    _open_check(path)
    # every cell as written (pandas would read True as a boolean and an empty cell as
    # NaN), blank lines kept as rows of empty cells
    kw = dict(encoding="utf-8-sig", dtype=str, keep_default_na=False, skip_blank_lines=False)
    try:  # the header as a row: a row with more fields than it is a ParserError
        raw = pd.read_csv(path, header=None, **kw)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at "
                         f"position {e.start})") from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty") from None
    except (ImportError, EOFError, zipfile.BadZipFile, tarfile.TarError, lzma.LZMAError,
            zlib.error) as e:  # a compressed file that is damaged, or needs a package
        raise ValueError(f"cannot read {path}: {type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else 'damaged'}") from None
    except pd.errors.ParserError as e:
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
        if m:
            raise ValueError(f"{path}, line {m[2]}: {m[3]} fields where the header has "
                             f"{m[1]} (a decimal comma? write 12.5, not 12,5)") from None
        raise ValueError(f"{path} is not a valid CSV file: {str(e).splitlines()[0]}") from None
    names = raw.iloc[0].tolist()
    raw = raw.iloc[1:].set_axis(names, axis=1).reset_index(drop=True)
    twice = [c for c in columns if names.count(c) > 1]
    if twice:
        raise ValueError(f"{path}: column {twice[0]} appears {names.count(twice[0])} times "
                         f"in the header; which one holds the data is ambiguous")
    absent = [c for c in columns if c not in raw.columns]
    if absent:
        there = ", ".join(str(c) for c in names) or "none"
        raise ValueError(f"{path} lacks column(s) {', '.join(absent)} "
                         f"({expected or 'its columns: ' + there})")
    raw = raw[list(columns)].fillna("")  # a short row (a blank line): empty cells
    lines = np.arange(len(raw)) + 2
    empty = raw.apply(lambda s: s.str.strip() == "").to_numpy(dtype=bool).any(axis=1)
    if missing == "skip":
        raw, lines = raw[~empty], lines[~empty]
    if len(raw) == 0:
        raise ValueError(f"{path} has no data rows")
    ok = {c: raw[c].str.strip().str.fullmatch(_NUMBER).to_numpy(dtype=bool) for c in columns}
    # the first bad cell in the file's order: by line, then by column
    for c in sorted(columns, key=lambda c: int(np.argmin(ok[c])) if not ok[c].all() else len(raw)):
        _check_cells(path, c, raw[c], lines, ok[c])
    cols = {c: raw[c].str.strip().astype(float).to_numpy() for c in columns}
    return cols, int(empty.sum()) if missing == "skip" else 0


def _check_cells(path, column, cells, lines, ok):
    """ValueError naming the line and column of the first cell of ``column`` (strings as
    written in the file) that is not an ASCII number (``ok`` False): an empty cell, a
    boolean, digits of another script (Python's float() reads them, pandas and most tools
    do not: dpbook reads ASCII numerals only) or other text."""
    if ok.all():
        return
    i = int(np.flatnonzero(~ok)[0])
    cell, where = cells.iloc[i], f"{path}, line {lines[i]}: column {column}"
    if not cell.strip():
        raise ValueError(f"{where} is empty (--missing skip drops such rows)")
    if cell.strip().lower() in ("true", "false"):
        raise ValueError(f"{where} holds the boolean {cell!r}, not a number")
    if not cell.isascii():
        raise ValueError(f"{where} holds {cell!r}: dpbook reads numbers written with ASCII "
                         f"digits only")
    raise ValueError(f"{where} holds a non-number {cell!r}")
