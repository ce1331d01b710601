"""Modules of src/dpbook where no public function ran, from coverage.py's JSON report.

    python book/tools/uncovered_modules.py artifacts/quick-coverage.json

A function counts when a line of its body ran (its ``def`` line runs at import); public
means no leading underscore in its name or its class's.  Numba-compiled functions run
outside coverage's view, so a module counts through its Python functions.  Exit status 1
when some module with public functions has none that ran.
"""

import json
import sys


def public(name: str) -> bool:
    return name != "" and not any(part.startswith("_") for part in name.split("."))


def main(path):
    files = json.load(open(path))["files"]
    missing, total = [], 0
    for module, data in sorted(files.items()):
        funcs = {k: v for k, v in data.get("functions", {}).items() if public(k)}
        if not funcs:
            continue
        total += 1
        if not any(v["summary"]["covered_lines"] > 0 for v in funcs.values()):
            missing.append(module)
    print(f"{total - len(missing)} of {total} modules have a public function the quick "
          f"tests ran" + (f"; none ran in: {', '.join(missing)}" if missing else ""))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
