"""The golden record (``record.npz``, ``record.json`` beside it): read, compare, write.

``python tests/golden/update.py [CASE ...]`` records the outputs of the cases whose
algorithms' versions changed (or that are new); it refuses to record new numbers for a
case whose versions are those of the record, which is how a change of numbers without a
version bump is caught (see ``dpbook.versions``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
NPZ, JSON = HERE / "record.npz", HERE / "record.json"
RTOL = 1e-9  # on a machine whose floating-point functions differ from the record's


def load() -> tuple[dict, dict]:
    """(meta, {case: {key: array}}) of the record (empty if there is none)."""
    if not JSON.exists():
        return {"signature": None, "cases": {}}, {}
    meta = json.loads(JSON.read_text())
    arrays = {}
    with np.load(NPZ, allow_pickle=False) as z:
        for full in z.files:
            name, _, key = full.partition("::")
            arrays.setdefault(name, {})[key] = z[full]
    return meta, arrays


def save(meta: dict, arrays: dict):
    flat = {f"{name}::{key}": v for name, outs in arrays.items() for key, v in outs.items()}
    np.savez_compressed(NPZ, **flat)
    JSON.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


def differences(new: dict, old: dict, exact: bool) -> list[str]:
    """What differs between two outputs of a case (empty: the same).  ``exact``: bit for
    bit (the record's machine arithmetic); otherwise floats to a relative :data:`RTOL`
    of the array's largest value (an entry that is zero in exact arithmetic, as the
    cross term of a symmetric Fisher matrix, is rounding noise relative to itself) and
    everything else equal."""
    out = []
    for k in sorted(set(new) | set(old)):
        if k not in new or k not in old:
            out.append(f"{k}: {'new' if k in new else 'gone'}")
            continue
        a, b = np.asarray(new[k]), np.asarray(old[k])
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            out.append(f"{k}: shape/type {a.shape} {a.dtype} against {b.shape} {b.dtype}")
        elif a.dtype.kind in "fc" and exact:
            if a.tobytes() != b.tobytes():
                out.append(f"{k}: bits differ (largest difference "
                           f"{np.nanmax(np.abs(a - b)) if a.size else 0:.3g})")
        elif a.dtype.kind in "fc":
            scale = np.nanmax(np.abs(np.where(np.isfinite(b), b, 0.0)), initial=0.0)
            if not np.allclose(a, b, rtol=RTOL, atol=RTOL * scale, equal_nan=True):
                rel = np.abs(a - b) / max(scale, 1e-300)
                out.append(f"{k}: largest difference relative to the array's scale "
                           f"{np.nanmax(rel):.3g}")
        elif not np.array_equal(a, b):
            out.append(f"{k}: values differ")
    return out
