"""Cost of one task of the Section 6 experiment, per method and numba thread count.

Usage:  python benchmarks/bench_experiment.py [--n 1000] [--particles 1000]
            [--iters 100000] [--threads 1,2] [--eps 1] [--profile]

Cases (each is exactly what ``dpbook.experiment.run_task`` does for one task):

* ``smc-fixed``    -- Algorithm 1 + SMC with [l_c, r_c] = [mu - 10 sigma, mu + 10 sigma]
* ``smc-adaptive`` -- Algorithm 1 + SMC with Thompson sampling and (a*, b*) =
  best_interval(eps) (computed once in the parent, exact Fisher information)
* ``mhaar``        -- MHAAR on the data released with [l_c, r_c], 10^5 iterations,
  20 auxiliary draws

at n = N = 1000 and eps = 1, each with 1 and 2 numba threads.  Every case runs in a
fresh subprocess so that its memory is its own; inside it a tiny warm-up task loads the
compiled kernels from numba's cache, then the timed task runs once.  "cpu s" is the
process's CPU time during the task (with one thread, a load-independent proxy of the
wall time on an idle core).  "RSS0" is the resident memory before the task and "peak"
the peak during it (Linux: the VmHWM high-water mark is reset after the warm-up through
/proc/self/clear_refs; elsewhere the process's lifetime peak, ru_maxrss).  "store" is
the time and size of writing the task file (``np.savez_compressed``, as the experiment
does).  With ``--profile`` the timed task runs under cProfile and the top entries are
printed (numba kernels are single entries).

The table is printed and written to benchmarks/results/experiment.json, together with
an estimate of the wall time of the whole paper experiment (4 eps x 30 runs x 3
methods) on this machine's cores with one thread per worker.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ("smc-fixed", "smc-adaptive", "mhaar")


def _rss_mb():
    """Peak resident memory of this process so far (MB)."""
    status = _status()
    if "VmHWM" in status:
        return status["VmHWM"]
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _status() -> dict:
    """VmRSS and VmHWM (peak) from /proc/self/status, in MB (Linux only)."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) / 1024
    except OSError:
        pass
    return out


def _reset_peak() -> bool:
    """Reset the peak RSS (VmHWM) to the current RSS (Linux >= 4.0), so that the peak
    measured afterwards is the task's and not that of the imports."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def one(method, threads, eps, n, particles, iters, a, b, profile):
    """Run one case in this process; return a dict of measurements."""
    import numba

    from dpbook import experiment as ex
    from dpbook.experiment.store import store_task

    numba.set_num_threads(threads)
    cfg = ex.make_config(eps=(eps,), runs=1, n=n, particles=particles, mhaar_iters=iters,
                         methods=(method,))
    iv = {repr(float(eps)): {"a": a, "b": b}}
    task = ex.Task(method, float(eps), 0)
    # warm-up: load (or compile) the kernels with a tiny task of the same method
    small = ex.make_config(eps=(eps,), runs=1, n=20, particles=20, mhaar_iters=50,
                           methods=(method,))
    ex.run_task(ex.task_spec(small, iv, task, threads))
    import gc

    gc.collect()
    reset = _reset_peak()
    rss0 = _status().get("VmRSS", _rss_mb())
    spec = ex.task_spec(cfg, iv, task, threads)
    prof_text = None
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if profile:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        res = pr.runcall(ex.run_task, spec)
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
        prof_text = s.getvalue()
    else:
        res = ex.run_task(spec)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    peak = _rss_mb()
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "tasks").mkdir()
        t1 = time.perf_counter()
        store_task(Path(d), task, res, cfg)
        store_s = time.perf_counter() - t1
        size = (Path(d) / "tasks" / task.filename).stat().st_size
    row = res["row"]
    return {"method": method, "threads": threads, "eps": eps, "n": n,
            "particles": particles if method != "mhaar" else None,
            "iters": iters if method == "mhaar" else None, "seconds": wall, "cpu_seconds": cpu,
            "task_seconds": row["seconds"], "store_seconds": store_s,
            "file_kb": size / 1024, "rss_before_mb": rss0, "peak_rss_mb": peak,
            "peak_is_task_only": reset,
            "mu_hat": row["mu_hat"], "sigma_hat": row["sigma_hat"],
            "numba_layer": numba.threading_layer(), "profile": prof_text}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--particles", type=int, default=1000)
    p.add_argument("--iters", type=int, default=100_000)
    p.add_argument("--eps", type=float, default=1.0)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--methods", default=",".join(CASES))
    p.add_argument("--profile", action="store_true")
    p.add_argument("--out", default=str(HERE / "results" / "experiment.json"))
    p.add_argument("--one", nargs=4, metavar=("METHOD", "THREADS", "A", "B"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.one:
        m, t, a, b = args.one
        r = one(m, int(t), args.eps, args.n, args.particles, args.iters, float(a), float(b),
                args.profile)
        print("@@RESULT@@" + json.dumps(r))
        return 0

    from dpbook import experiment as ex
    from dpbook.fisher import best_interval

    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    iv = best_interval(args.eps)
    interval_s = time.perf_counter() - t0
    threads = [int(t) for t in args.threads.split(",")]
    methods = [m.strip() for m in args.methods.split(",")]
    rows = []
    for m in methods:
        for t in threads:
            cmd = [sys.executable, __file__, "--one", m, str(t), repr(iv["a"]), repr(iv["b"]),
                   "--n", str(args.n), "--particles", str(args.particles), "--iters",
                   str(args.iters), "--eps", str(args.eps)] + (["--profile"] if args.profile
                                                                else [])
            out = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                raise SystemExit(f"case {m} threads={t} failed")
            line = [x for x in out.stdout.splitlines() if x.startswith("@@RESULT@@")][-1]
            r = json.loads(line[len("@@RESULT@@"):])
            rows.append(r)
            print(f"  {m:<13} threads={t}: {r['seconds']:.2f} s, peak RSS "
                  f"{r['peak_rss_mb']:.0f} MB", file=sys.stderr, flush=True)

    hdr = (f"{'method':<13} {'thr':>3} {'seconds':>8} {'cpu s':>8} {'store s':>8} {'file KB':>8} "
           f"{'RSS0 MB':>8} {'peak MB':>8} {'mu_hat':>9} {'sigma_hat':>9}")
    lines = [f"one task at n = {args.n}, N = {args.particles}, MHAAR {args.iters} iterations x "
             f"{ex.config.MHAAR_AUX} aux, eps = {args.eps}; "
             f"(a*, b*) = ({iv['a']:.4f}, {iv['b']:.4f}) "
             f"[best_interval exact: {interval_s:.2f} s]", hdr]
    for r in rows:
        lines.append(f"{r['method']:<13} {r['threads']:>3} {r['seconds']:>8.2f} "
                     f"{r['cpu_seconds']:>8.2f} "
                     f"{r['store_seconds']:>8.3f} {r['file_kb']:>8.0f} "
                     f"{r['rss_before_mb']:>8.0f} {r['peak_rss_mb']:>8.0f} "
                     f"{r['mu_hat']:>9.4f} {r['sigma_hat']:>9.4f}")
    cores = os.cpu_count() or 1
    one_thread = {r["method"]: r for r in rows if r["threads"] == 1}
    estimate = None
    if set(one_thread) == set(CASES):
        wall = 4 * 30 * sum(r["seconds"] for r in one_thread.values())
        cpu = 4 * 30 * sum(r["cpu_seconds"] for r in one_thread.values())
        estimate = {"task_seconds_total": wall, "cpu_seconds_total": cpu, "workers": cores,
                    "wall_seconds": wall / cores, "wall_seconds_idle": cpu / cores}
        lines.append(f"paper experiment (4 eps x 30 runs x 3 methods, eps = {args.eps} costs "
                     f"for every eps, {cores} workers x 1 thread): ~{wall / cores / 3600:.2f} h "
                     f"wall at this load; ~{cpu / cores / 3600:.2f} h on idle cores (CPU time)")
    load = [load_before, os.getloadavg()[0]]
    lines.append(f"machine: {platform.processor() or platform.machine()}, {cores} cores, "
                 f"1-min load average before {load[0]:.2f}, after {load[1]:.2f}")
    print("\n".join(lines))
    if args.profile:
        for r in rows:
            print(f"\n--- profile: {r['method']} threads={r['threads']} ---\n{r['profile']}")
    result = {"cases": [{k: v for k, v in r.items() if k != "profile"} for r in rows],
              "interval": {"eps": args.eps, **{k: iv[k] for k in ("a", "b", "score")},
                           "seconds": interval_s},
              "paper_estimate": estimate, "cores": cores, "loadavg": load,
              "python": platform.python_version(), "code": ex.code_version(),
              "packages": ex.package_versions(),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
