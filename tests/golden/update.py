"""Record the golden outputs: ``python tests/golden/update.py [CASE ...] [--new-machine]``.

Without names, every case.  A case is recorded when it is new, when the versions of its
algorithms (``dpbook.versions.VERSIONS``) differ from the record's, or when its outputs
are unchanged (nothing to do).  A case whose outputs changed while its versions did not
is refused: bump the version of the algorithm that changed first.  ``--new-machine``
records the outputs of this machine's arithmetic for cases whose outputs agree with the
record to its tolerance (a new CI machine), and its signature.  ``--case-changed``
records the named cases although their versions did not change: for a case whose
inputs you changed in ``cases.py`` (never for a change of an algorithm; run the test
first, with the old case, to see that the algorithms still give the record).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from cases import CASES, math_signature, run_case  # noqa: E402
from recording import differences, load, save  # noqa: E402

from dpbook.versions import VERSIONS  # noqa: E402


def main(argv):
    new_machine = "--new-machine" in argv
    case_changed = "--case-changed" in argv
    names = [a for a in argv if not a.startswith("--")] or list(CASES)
    if case_changed and not [a for a in argv if not a.startswith("--")]:
        sys.exit("--case-changed needs the names of the cases whose inputs changed")
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"unknown case {unknown[0]!r}; the cases are {', '.join(CASES)}")
    meta, arrays = load()
    sig = math_signature()
    same_machine = meta.get("signature") in (None, sig)
    if not same_machine and not new_machine:
        sys.exit(f"this machine's arithmetic (signature {sig}) is not the record's "
                 f"({meta['signature']}): record on that machine, or pass --new-machine")
    refused = []
    for name in names:
        uses, _ = CASES[name]
        versions = {k: VERSIONS[k] for k in uses}
        out = run_case(name)
        old_versions = meta["cases"].get(name, {}).get("versions")
        diff = differences(out, arrays[name], exact=same_machine) if name in arrays else []
        if name in arrays and old_versions == versions and diff and not case_changed:
            refused.append(f"{name}: outputs changed ({diff[0]}) but the versions of "
                           f"{', '.join(uses)} did not: bump the one that changed")
            continue
        arrays[name] = out
        meta["cases"][name] = {"versions": versions, "uses": list(uses)}
        print(f"{name}: recorded ({len(out)} arrays)")
    meta["cases"] = {k: v for k, v in meta["cases"].items() if k in CASES}
    arrays = {k: v for k, v in arrays.items() if k in CASES}
    meta["signature"] = sig
    save(meta, arrays)
    if refused:
        sys.exit("not recorded:\n" + "\n".join(refused))


if __name__ == "__main__":
    main(sys.argv[1:])
