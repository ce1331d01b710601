"""The curator's state file under ``kill -9`` (issue 40, item 2): no acknowledged release
is ever lost.

A worker process goes on with one curator state file, as ``dpbook curator`` does each
call: load it, publish an interval for k individuals, take their k releases, save it
(one SQLite transaction), and only then acknowledge (print) the releases.  The worker is
killed with SIGKILL at a random instant, then the next one goes on from the same file;
after every kill the state must load, and hold every acknowledged release, in order,
with the values the worker took (a release whose save was under way may be there or
not).  The release values are a fixed sequence, so the check needs nothing from the
killed process but its acknowledgements.

    python benchmarks/curator_crash.py [--loops 200] [--seed 0] [--particles 100]

Under contention (issue 55, item 5): ``--contention P N`` starts P processes that each
make N ``dpbook curator take`` calls of one release on one state at once (the command
line's own code, called in the process so that a call costs no interpreter start); each
acknowledges a release after its call exits 0.  The state must then hold every
acknowledged release once, and nothing else.

    python benchmarks/curator_crash.py --contention 4 250
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

WORKER = r"""
import sys
from dpbook.online.curator_state import load_curator, save_curator
state, k = sys.argv[1], int(sys.argv[2])
while True:
    curator = load_curator(state)
    l, r = curator.publish(k)
    n = curator.n
    curator.take_many([10.0 + (i * 0.618034) % 1.0 for i in range(n, n + k)], [l] * k,
                      [r] * k)
    print("save", n + k, flush=True)
    save_curator(curator, state)
    print("ack", n + k, flush=True)
"""


TAKER = r"""
import sys
from pathlib import Path
from dpbook.cli import main
state, p, calls, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
for i in range(calls):
    y = p + i / 10000
    csv = tmp / f"{p}-{i}.csv"
    csv.write_text(f"y,l,r\n{y!r},-5.0,5.0\n")
    code = main(["curator", "take", state, str(csv)])
    print(f"ack {y!r}" if code == 0 else f"failed {y!r} {code}", flush=True)
"""


def contend(procs=4, calls=250, particles=50):
    """``procs`` processes each taking ``calls`` releases, one a call, from one state at
    once.  Returns {"procs", "calls", "acknowledged", "failed", "lost", "extra",
    "seconds"}: calls that exited 0, calls that did not, acknowledged releases missing
    from the state (or there twice), releases in the state that no call acknowledged."""
    from dpbook.cli import main
    from dpbook.online.curator_state import load_curator

    env = dict(os.environ, NUMBA_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                           os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        state = str(Path(tmp) / "curator.db")
        main(["curator", "init", state, "--eps", "1", "--interval", "-5", "5", "--range",
              "-5", "5", "--particles", str(particles)])
        main(["curator", "publish", state, "--k", str(procs * calls)])
        t0 = time.perf_counter()
        workers = [subprocess.Popen([sys.executable, "-c", TAKER, state, str(p), str(calls),
                                     tmp], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True, env=env) for p in range(procs)]
        lines = [w for proc in workers for w in proc.communicate()[0].splitlines()]
        seconds = time.perf_counter() - t0
        acked = [float(w.split()[1]) for w in lines if w.startswith("ack ")]
        kept = load_curator(state).releases()[0].tolist()
    missing = Counter(acked) - Counter(kept)
    return dict(procs=procs, calls=calls, acknowledged=len(acked),
                failed=sum(w.startswith("failed ") for w in lines),
                lost=sum(missing.values()), extra=sum((Counter(kept) - Counter(acked)).values()),
                seconds=seconds)


def expected(n):
    """The first n release values the workers take."""
    return [10.0 + (i * 0.618034) % 1.0 for i in range(n)]


def run(loops=200, seed=0, particles=100, k=3, wait=0.4):
    """``loops`` workers on one state file, each killed at a random time in [0,
    ``wait``] s after its first "save" (imported, compiled, in its loop).  Returns
    {"loops", "acknowledged", "lost", "unloadable", "during_save",
    "unacknowledged_kept"}: the releases in the state at the end (each acknowledged or
    seen after a kill), acknowledged releases missing or changed, kills after which the
    state did not load, kills that came between "save" and "ack", releases kept whose
    acknowledgement the kill cut off."""
    from dpbook.online.curator_state import load_curator, save_curator
    from dpbook.online.streams import make_curator

    rng = np.random.default_rng(seed)
    out = dict(loops=loops, acknowledged=0, lost=0, unloadable=0, during_save=0,
               unacknowledged_kept=0)
    env = dict(os.environ, NUMBA_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                           os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "curator.db"
        save_curator(make_curator(1.0, "smc-marginal", (5.0, 15.0), "normal",
                                  n_particles=particles, seed=seed), state)
        acked = 0
        for _ in range(loops):
            proc = subprocess.Popen([sys.executable, "-c", WORKER, str(state), str(k)],
                                    stdout=subprocess.PIPE, text=True, env=env)
            lines = [proc.stdout.readline()]  # "save": imported and compiled
            time.sleep(rng.uniform(0.0, wait))
            proc.send_signal(signal.SIGKILL)
            lines += proc.stdout.read().splitlines()
            proc.wait()
            acks = [int(w.split()[1]) for w in lines if w.startswith("ack ")]
            acked = max([acked, *acks])
            out["during_save"] += bool(lines) and lines[-1].startswith("save ")
            try:
                curator = load_curator(state)
            except ValueError as e:
                print(f"kill {_ + 1}: {e}", file=sys.stderr)
                out["unloadable"] += 1
                continue
            y = curator.releases()[0]
            keep = min(acked, y.size)
            out["lost"] += acked - keep + int(np.sum(y[:keep] != expected(keep)))
            out["unacknowledged_kept"] += max(0, y.size - acked)
            acked = max(acked, y.size)  # kept: the next worker goes on from there
        out["acknowledged"] = acked
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loops", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--particles", type=int, default=100)
    p.add_argument("--contention", type=int, nargs=2, metavar=("P", "N"),
                   help="P processes of N takes each on one state at once")
    args = p.parse_args(argv)
    if args.contention:
        res = contend(*args.contention)
        print(f"curator_crash --contention: {res['procs']} processes x {res['calls']} "
              f"takes at once: {res['acknowledged']} acknowledged, {res['failed']} failed, "
              f"{res['lost']} acknowledged releases lost, {res['extra']} kept without "
              f"acknowledgement; {res['seconds']:.0f} s")
        return res | {"unloadable": 0}
    t0 = time.perf_counter()
    res = run(args.loops, args.seed, args.particles)
    print(f"curator_crash: {res['loops']} kill -9 at random instants "
          f"({res['during_save']} between 'save' and 'ack'), {res['acknowledged']} "
          f"releases in the state, {res['lost']} acknowledged releases lost, "
          f"{res['unloadable']} states that did not load, {res['unacknowledged_kept']} "
          f"kept whose acknowledgement the kill cut off; {time.perf_counter() - t0:.0f} s")
    return res


if __name__ == "__main__":
    res = main()
    sys.exit(1 if res["lost"] or res["unloadable"] or res.get("failed") or res.get("extra")
             else 0)
