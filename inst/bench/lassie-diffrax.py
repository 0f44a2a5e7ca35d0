#!/usr/bin/env python3
"""The diffrax peer of inst/bench/lassie.R: the same mass-action
workloads solved by JAX + diffrax in float64, vmap over the parameter sets.

Usage: python3 lassie-diffrax.py MODEL_DIR OUT_CSV [--solvers Tsit5,Kvaerno5]
       [--rtol 1e-6] [--atol 1e-12] [--chunk 0] [--max-steps 100000]
       [--reps 2] [--first-out FILE]
(--max-steps: diffrax's bound on the steps of one solve, default 100000)

MODEL_DIR holds the files inst/bench/lassie.R writes (one array per file,
whitespace-separated, 0-based indices):
  dims            N M S (species, reactions, parameter sets)
  r_ptr r_sp r_ord   reactants per reaction (CSR, with their orders)
  h_ptr h_rx h_val   net stoichiometry per species (CSR over reactions)
  rates           S x M rate constants, row by row
  initial         N initial amounts
  times           output times (the first is the start)
dX/dt = H v, v_i = k_i prod_j X_j^a_ij: the model of lassieSimulate().

Writes OUT_CSV with one row per solver: solver, sets, status (ok / error),
compile_s (first call: trace, compile and run), run_s (best of the later
calls: the time to compare), steps (largest number of accepted steps over
the sets), message.  With --first-out, the first set's solution (times x
species, row by row) from the last solver that succeeded, for the
agreement check in R.  A solver that fails (out of memory, max steps) gets
status error and its message; the others still run.
"""
import argparse
import csv
import os
import sys
import time
import traceback


def read_array(d, name, dtype):
    import numpy as np
    with open(os.path.join(d, name)) as f:
        return np.array(f.read().split(), dtype=dtype)


def load_model(d):
    import numpy as np
    N, M, S = (int(v) for v in read_array(d, "dims", np.float64))
    m = {"N": N, "M": M, "S": S}
    for name in ("r_ptr", "r_sp", "r_ord", "h_ptr", "h_rx"):
        m[name] = read_array(d, name, np.int64)
    m["h_val"] = read_array(d, "h_val", np.float64)
    m["rates"] = read_array(d, "rates", np.float64).reshape(S, M)
    m["initial"] = read_array(d, "initial", np.float64)
    m["times"] = read_array(d, "times", np.float64)
    return m


def vector_field(m):
    """f(t, x, k) = H v(x, k), with the reactants padded to the largest
    number per reaction (a padded slot points at a constant 1) and powers
    by repeated products (exact for the whole orders of mass action)."""
    import numpy as np
    import jax
    import jax.numpy as jnp
    N, M = m["N"], m["M"]
    r_ptr, r_sp, r_ord = m["r_ptr"], m["r_sp"], m["r_ord"]
    width = max(1, int(np.max(np.diff(r_ptr))) if M > 0 else 1)
    idx = np.full((M, width), N, dtype=np.int64)
    order = np.zeros((M, width), dtype=np.int64)
    for i in range(M):
        b, e = r_ptr[i], r_ptr[i + 1]
        idx[i, : e - b] = r_sp[b:e]
        order[i, : e - b] = r_ord[b:e]
    max_order = max(1, int(order.max()) if order.size else 1)
    h_sp = np.repeat(np.arange(N), np.diff(m["h_ptr"]))
    idx, order = jnp.asarray(idx), jnp.asarray(order)
    h_rx, h_val, h_sp = jnp.asarray(m["h_rx"]), jnp.asarray(m["h_val"]), jnp.asarray(h_sp)

    def f(t, x, k):
        xe = jnp.concatenate([x, jnp.ones((1,), x.dtype)])
        base = xe[idx]
        p = jnp.ones_like(base)
        for o in range(max_order):
            p = p * jnp.where(order > o, base, 1.0)
        v = k * jnp.prod(p, axis=1)
        return jax.ops.segment_sum(h_val * v[h_rx], h_sp, num_segments=N)

    return f


def make_solver(name):
    import diffrax
    return getattr(diffrax, name)()


def run_solver(m, name, args):
    import numpy as np
    import jax
    import jax.numpy as jnp
    import diffrax
    f = vector_field(m)
    times = jnp.asarray(m["times"])
    y0 = jnp.asarray(m["initial"])
    solver = make_solver(name)
    controller = diffrax.PIDController(rtol=args.rtol, atol=args.atol)

    def one(k):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(f), solver, t0=times[0], t1=times[-1], dt0=None, y0=y0, args=k,
            saveat=diffrax.SaveAt(ts=times), stepsize_controller=controller,
            max_steps=args.max_steps, throw=False)
        return sol.ys, sol.stats["num_accepted_steps"], sol.result == diffrax.RESULTS.successful

    batched = jax.jit(jax.vmap(one))
    rates = m["rates"]
    S = rates.shape[0]
    chunk = args.chunk if args.chunk > 0 else S

    def all_sets():
        ys_first, steps, bad = None, 0, 0
        for s0 in range(0, S, chunk):
            k = jnp.asarray(rates[s0:s0 + chunk])
            ys, st, ok = batched(k)
            ys.block_until_ready()
            if ys_first is None:
                ys_first = np.asarray(ys[0])
            steps = max(steps, int(np.max(np.asarray(st))))
            bad += int(np.sum(~np.asarray(ok)))
        return ys_first, steps, bad

    t0 = time.perf_counter()
    ys_first, steps, bad = all_sets()
    compile_s = time.perf_counter() - t0
    run_s = float("inf")
    for _ in range(max(1, args.reps)):
        t0 = time.perf_counter()
        ys_first, steps, bad = all_sets()
        run_s = min(run_s, time.perf_counter() - t0)
    msg = "" if bad == 0 else "%d sets did not succeed" % bad
    return compile_s, run_s, steps, ys_first, msg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("out_csv")
    ap.add_argument("--solvers", default="Tsit5,Kvaerno5")
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--atol", type=float, default=1e-12)
    ap.add_argument("--chunk", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--first-out", default="")
    args = ap.parse_args()

    import jax
    jax.config.update("jax_enable_x64", True)
    m = load_model(args.model_dir)
    rows = []
    for name in [s for s in args.solvers.split(",") if s]:
        row = {"solver": name, "sets": m["S"], "status": "ok", "compile_s": "", "run_s": "",
               "steps": "", "message": "", "device": str(jax.devices()[0])}
        try:
            compile_s, run_s, steps, ys_first, msg = run_solver(m, name, args)
            row.update(compile_s="%.4f" % compile_s, run_s="%.4f" % run_s, steps=steps, message=msg)
            if args.first_out and ys_first is not None:
                import numpy as np
                np.savetxt(args.first_out, ys_first, fmt="%.17g")
        except Exception as e:  # out of memory, a solver's failure: a row, not a crash
            row.update(status="error", message=(type(e).__name__ + ": " + str(e)).replace("\n", " ")[:300])
            traceback.print_exc(file=sys.stderr)
        rows.append(row)
        print("%s: %s" % (name, row), flush=True)
    with open(args.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["solver"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
