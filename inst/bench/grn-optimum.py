#!/usr/bin/env python3
"""Exact optimum of a grnEvolve() problem by SAT (a check of the benchmark's
target, not part of the package): is there a network with at most K link
changes from the reference, and any rule per gene, whose state after T
synchronous steps from `from` equals `to` (dn = 0)?  The smallest such K,
with lambda large enough that one mismatch outweighs every change
(lambda = 0.9, N = 32: one mismatch = 288 changes), gives the optimum
fitness (1 - lambda) * K / N^2.

The question is written as CNF and given to CaDiCaL (Debian: cadical):
  * links: A_ij (j activates i), R_ij (j represses i), never both;
  * rules: one of MOST, ABS, JACT, JREP per gene;
  * states s_t for t = 1..T-1 free, s_0 = from, s_T = to;
  * per step and gene, unary counters (totalizers, both directions) of the
    active activators a and repressors r, exact up to the largest count a
    network within K changes can have (the reference in-degree + K);
  * the rules as in grnSimulate(): MOST on if a > r, off if r > a, else
    keep; ABS off if r >= 1; JACT on if a >= 2; JREP off if r >= 2;
  * at most K cells differ from the reference (a sequential counter).
No bound on in-degree is imposed (grnEvolve's maxInDegree only shrinks the
space), so UNSAT at K means no network of any in-degree does it.

Usage:
  grn-optimum.py NETWORK.csv STATES.csv [--steps 5] [--kmin 0] [--kmax 8]
                 [--from E9] [--to E10.5] [--cnf-dir DIR] [--out FILE]
                 [--rows] [--enumerate MAX]
  grn-optimum.py --self-test      (the encoding against brute force)
Network CSV: N x N of -1/0/1, row = target, column = source, '#' comments.
States CSV: gene,<from column>,<to column> with 0/1.
Prints, for K = 0, 1, ..., the SAT answer and the time; stops at the first
SAT and prints the network found (changed links and rules), which the
caller checks with grnSimulate() (inst/bench/grn-optimum.R does).
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

RULES = ["most", "abs", "jact", "jrep"]


class CNF:
    def __init__(self):
        self.nv = 0
        self.clauses = []
        self.true = self.var()
        self.clauses.append([self.true])

    def var(self):
        self.nv += 1
        return self.nv

    def add(self, *lits):
        c = []
        for l in lits:
            if l == self.true:
                return  # satisfied
            if l == -self.true:
                continue  # false literal
            c.append(l)
        self.clauses.append(c)

    def and2(self, x, y):
        """z <-> x & y, folding constants."""
        T = self.true
        if x == -T or y == -T:
            return -T
        if x == T:
            return y
        if y == T:
            return x
        z = self.var()
        self.add(-z, x)
        self.add(-z, y)
        self.add(z, -x, -y)
        return z

    def or_list(self, xs):
        """z <-> OR xs."""
        T = self.true
        xs = [x for x in xs if x != -T]
        if any(x == T for x in xs):
            return T
        if not xs:
            return -T
        if len(xs) == 1:
            return xs[0]
        z = self.var()
        for x in xs:
            self.add(z, -x)
        self.add(-z, *xs)
        return z

    def totalizer(self, inputs, cap):
        """Unary outputs o[k-1] <-> (sum inputs >= k), k = 1..min(len, cap),
        exact in both directions; counts above cap read as cap."""
        T = self.true
        ones = sum(1 for x in inputs if x == T)
        inputs = [x for x in inputs if x != T and x != -T]
        if ones:
            # constant ones: shift the count
            rest = self.totalizer(inputs, max(cap - ones, 0)) if inputs and cap > ones else []
            return ([T] * min(ones, cap) + rest)[:cap]
        if not inputs or cap <= 0:
            return []
        if len(inputs) == 1:
            return [inputs[0]]
        h = len(inputs) // 2
        left = self.totalizer(inputs[:h], cap)
        right = self.totalizer(inputs[h:], cap)
        p, q = len(left), len(right)
        m = min(p + q, cap)
        out = [self.var() for _ in range(m)]
        L = lambda a: T if a == 0 else (left[a - 1] if a <= p else -T)
        Rr = lambda b: T if b == 0 else (right[b - 1] if b <= q else -T)
        for a in range(p + 1):
            for b in range(q + 1):
                if a + b >= 1:
                    # left >= a and right >= b -> out >= min(a + b, m)
                    self.add(-L(a), -Rr(b), out[min(a + b, m) - 1])
                if a + b + 1 <= m:
                    # left <= a and right <= b -> not out >= a + b + 1
                    self.add(L(a + 1), Rr(b + 1), -out[a + b])
        return out

    def at_most(self, lits, k):
        """Sequential counter (Sinz 2005): at most k of lits true."""
        n = len(lits)
        if k >= n:
            return
        if k == 0:
            for x in lits:
                self.add(-x)
            return
        s = [[self.var() for _ in range(k)] for _ in range(n - 1)]
        self.add(-lits[0], s[0][0])
        for j in range(1, k):
            self.add(-s[0][j])
        for i in range(1, n - 1):
            self.add(-lits[i], s[i][0])
            self.add(-s[i - 1][0], s[i][0])
            for j in range(1, k):
                self.add(-lits[i], -s[i - 1][j - 1], s[i][j])
                self.add(-s[i - 1][j], s[i][j])
            self.add(-lits[i], -s[i - 1][k - 1])
        self.add(-lits[n - 1], -s[n - 2][k - 1])

    def dimacs(self, path):
        with open(path, "w") as f:
            f.write("p cnf %d %d\n" % (self.nv, len(self.clauses)))
            for c in self.clauses:
                f.write(" ".join(map(str, c)) + " 0\n")


def encode(ref, s_from, s_to, steps, K, fixed=None):
    """CNF of: <= K changes, T steps from s_from end in s_to.  `fixed`
    (tests): (links, rules) forcing one network.  Returns (cnf, A, R, rule)."""
    n = len(ref)
    c = CNF()
    T = c.true
    A = [[c.var() for j in range(n)] for i in range(n)]
    R = [[c.var() for j in range(n)] for i in range(n)]
    rule = [[c.var() for _ in range(4)] for i in range(n)]
    for i in range(n):
        for j in range(n):
            c.add(-A[i][j], -R[i][j])
        c.add(*rule[i])
        for a in range(4):
            for b in range(a + 1, 4):
                c.add(-rule[i][a], -rule[i][b])
    # changes
    D = []
    for i in range(n):
        for j in range(n):
            if ref[i][j] == 1:
                D.append(-A[i][j])
            elif ref[i][j] == -1:
                D.append(-R[i][j])
            else:
                d = c.var()
                c.add(-A[i][j], d)
                c.add(-R[i][j], d)
                D.append(d)
    c.at_most(D, K)
    if fixed is not None:
        links, rules = fixed
        for i in range(n):
            for j in range(n):
                c.add(A[i][j] if links[i][j] == 1 else -A[i][j])
                c.add(R[i][j] if links[i][j] == -1 else -R[i][j])
            for a in range(4):
                c.add(rule[i][a] if rules[i] == a else -rule[i][a])
    # states
    lit = lambda b: T if b else -T
    S = [[lit(x) for x in s_from]]
    for t in range(1, steps):
        S.append([c.var() for _ in range(n)])
    S.append([lit(x) for x in s_to])
    for t in range(steps):
        for i in range(n):
            cap = min(n, sum(1 for j in range(n) if ref[i][j] != 0) + K)
            xa = [c.and2(A[i][j], S[t][j]) for j in range(n)]
            xr = [c.and2(R[i][j], S[t][j]) for j in range(n)]
            ua = c.totalizer(xa, cap)
            ur = c.totalizer(xr, cap)
            ge = lambda u, k: u[k - 1] if k <= len(u) else -T
            m = max(len(ua), len(ur))
            gt = c.or_list([c.and2(ge(ua, k), -ge(ur, k)) for k in range(1, m + 1)])
            lt = c.or_list([c.and2(ge(ur, k), -ge(ua, k)) for k in range(1, m + 1)])
            cur, nxt = S[t][i], S[t + 1][i]
            v_most = c.or_list([gt, c.and2(-lt, cur)])
            v_abs = c.and2(-ge(ur, 1), cur)
            v_jact = c.or_list([ge(ua, 2), cur])
            v_jrep = c.and2(-ge(ur, 2), cur)
            for a, v in enumerate([v_most, v_abs, v_jact, v_jrep]):
                c.add(-rule[i][a], -nxt, v)
                c.add(-rule[i][a], nxt, -v)
    return c, A, R, rule


def solve(c, solver="cadical", keep=None):
    fd, path = tempfile.mkstemp(suffix=".cnf")
    os.close(fd)
    c.dimacs(path)
    t0 = time.time()
    p = subprocess.run([solver, "-q", path], capture_output=True, text=True)
    dt = time.time() - t0
    if keep:
        os.replace(path, keep)
    else:
        os.remove(path)
    if p.returncode == 10:
        model = set()
        for line in p.stdout.splitlines():
            if line.startswith("v "):
                model.update(int(x) for x in line[2:].split() if int(x) > 0)
        return True, model, dt
    if p.returncode == 20:
        return False, None, dt
    raise RuntimeError("solver failed (%d): %s" % (p.returncode, p.stderr[:500]))


def simulate(links, rules, s, steps):
    """The model, plainly (the self-test's oracle): final state."""
    n = len(links)
    for _ in range(steps):
        t = []
        for i in range(n):
            a = sum(1 for j in range(n) if links[i][j] == 1 and s[j])
            r = sum(1 for j in range(n) if links[i][j] == -1 and s[j])
            cur = s[i]
            if rules[i] == 0:
                v = True if a > r else (False if r > a else cur)
            elif rules[i] == 1:
                v = False if r >= 1 else cur
            elif rules[i] == 2:
                v = True if a >= 2 else cur
            else:
                v = False if r >= 2 else cur
            t.append(v)
        s = t
    return s


def neighbours(ref, kmax):
    """Every network within kmax changes of ref (small n only)."""
    import itertools
    n = len(ref)
    cells = [(i, j) for i in range(n) for j in range(n)]
    for k in range(kmax + 1):
        for chosen in itertools.combinations(cells, k):
            alts = [[v for v in (-1, 0, 1) if v != ref[i][j]] for (i, j) in chosen]
            for vals in itertools.product(*alts):
                net = [row[:] for row in ref]
                for (i, j), v in zip(chosen, vals):
                    net[i][j] = v
                yield k, net


def self_test(seed=1):
    """The encoding against the plain simulator: (1) one network fixed by
    unit clauses is SAT exactly when it reaches `to`, for random networks
    and rules of up to 32 genes; (2) the smallest K found by SAT equals
    brute force over all networks and rules, on small random problems."""
    import itertools
    import random
    rng = random.Random(seed)
    fails = 0
    # (1) fixed networks
    for rep in range(40):
        n = rng.choice([2, 3, 5, 8, 13, 32])
        steps = rng.choice([1, 2, 3, 5])
        ref = [[rng.choice([0, 0, 0, 0, 1, 1, -1]) for _ in range(n)] for _ in range(n)]
        links = [row[:] for row in ref]
        changes = rng.randint(0, 4)
        for _ in range(changes):
            i, j = rng.randrange(n), rng.randrange(n)
            links[i][j] = rng.choice([v for v in (-1, 0, 1) if v != links[i][j]])
        dl = sum(links[i][j] != ref[i][j] for i in range(n) for j in range(n))
        rules = [rng.randrange(4) for _ in range(n)]
        s0 = [rng.random() < 0.5 for _ in range(n)]
        end = simulate(links, rules, s0, steps)
        wrong = end[:]
        g = rng.randrange(n)
        wrong[g] = not wrong[g]
        for goal, want in ((end, True), (wrong, False)):
            for K, want_k in ((dl, want), (max(dl - 1, 0), want and dl == 0)):
                c, _, _, _ = encode(ref, s0, goal, steps, K, fixed=(links, rules))
                got, _, _ = solve(c)
                if got != want_k:
                    fails += 1
                    print("FAIL fixed: n %d steps %d dl %d K %d want %s got %s" %
                          (n, steps, dl, K, want_k, got))
    print("fixed-network checks done", flush=True)
    # (2) brute force of the smallest K
    seen = {}
    for rep in range(30):
        n = rng.choice([2, 3])
        kmax = 3 if n == 2 else 2
        steps = rng.choice([1, 2, 3, 5])
        ref = [[rng.choice([0, 0, 1, -1]) for _ in range(n)] for _ in range(n)]
        s0 = [rng.random() < 0.5 for _ in range(n)]
        goal = [rng.random() < 0.5 for _ in range(n)]
        best = None
        for k, net in neighbours(ref, kmax):
            if best is not None and k >= best:
                break
            for rules in itertools.product(range(4), repeat=n):
                if simulate(net, list(rules), s0, steps) == goal:
                    best = k
                    break
        sat_best = None
        for K in range(kmax + 1):
            c, _, _, _ = encode(ref, s0, goal, steps, K)
            if solve(c)[0]:
                sat_best = K
                break
        seen[best] = seen.get(best, 0) + 1
        if sat_best != best:
            fails += 1
            print("FAIL brute force: n %d steps %d brute %s sat %s" % (n, steps, best, sat_best))
    print("brute-force problems by smallest K (None: above kmax): %s" %
          ", ".join("%s: %d" % (k, v) for k, v in sorted(seen.items(), key=lambda kv: str(kv[0]))))
    print("self-test: %d failure(s)" % fails)
    return 1 if fails else 0


def enumerate_sets(c, A, R, ref, genes, links, limit):
    """All link configurations at the optimum K (rules free), by blocking
    each one found: a clause saying some changed cell takes another value."""
    n = len(ref)
    found = 0
    while found < limit:
        changed = [(i, j, links[i][j]) for i in range(n) for j in range(n) if links[i][j] != ref[i][j]]
        found += 1
        print("  set %d: %s" % (found, "; ".join("%s->%s %+d" % (genes[j], genes[i], v)
                                               if v else "%s->%s removed" % (genes[j], genes[i])
                                               for i, j, v in changed)), flush=True)
        block = []
        for i, j, v in changed:
            if v == 1:
                block.append(-A[i][j])
            elif v == -1:
                block.append(-R[i][j])
            else:
                block.extend([A[i][j], R[i][j]])
        c.add(*block)
        sat, model, _ = solve(c)
        if not sat:
            print("%d distinct sets of changed links at the optimum" % found)
            return
        links = [[1 if A[i][j] in model else (-1 if R[i][j] in model else 0)
                  for j in range(n)] for i in range(n)]
    print("stopped after %d sets" % found)


def read_problem(net_csv, states_csv, col_from, col_to):
    ref = []
    with open(net_csv) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            ref.append([int(x) for x in line.split(",")])
    genes, s_from, s_to = [], [], []
    with open(states_csv) as f:
        for row in csv.DictReader(f):
            genes.append(row["gene"])
            s_from.append(int(row[col_from]) == 1)
            s_to.append(int(row[col_to]) == 1)
    return ref, genes, s_from, s_to


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("network", nargs="?")
    ap.add_argument("states", nargs="?")
    ap.add_argument("--self-test", action="store_true",
                    help="check the encoding against brute force and a plain simulator")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--kmin", type=int, default=0)
    ap.add_argument("--kmax", type=int, default=8)
    ap.add_argument("--from", dest="col_from", default="E9")
    ap.add_argument("--to", dest="col_to", default="E10.5")
    ap.add_argument("--cnf-dir", default=None, help="keep the CNF files here")
    ap.add_argument("--out", default=None, help="write the network found (CSV) here")
    ap.add_argument("--rows", action="store_true",
                    help="then test, for each gene whose inputs the optimum changed, whether "
                         "keeping its reference inputs still allows the optimum")
    ap.add_argument("--enumerate", type=int, default=0, metavar="MAX",
                    help="then count the distinct sets of changed links (up to MAX) at the optimum")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    ref, genes, s_from, s_to = read_problem(args.network, args.states, args.col_from, args.col_to)
    n = len(ref)
    print("%d genes, %d links, %d steps, %d genes to change" %
          (n, sum(x != 0 for r in ref for x in r), args.steps,
           sum(a != b for a, b in zip(s_from, s_to))), flush=True)
    for K in range(args.kmin, args.kmax + 1):
        c, A, R, rule = encode(ref, s_from, s_to, args.steps, K)
        keep = os.path.join(args.cnf_dir, "grn_k%d.cnf" % K) if args.cnf_dir else None
        sat, model, dt = solve(c, keep=keep)
        print("K = %d: %s (%d variables, %d clauses, %.1f s)" %
              (K, "SAT" if sat else "UNSAT", c.nv, len(c.clauses), dt), flush=True)
        if sat:
            links = [[1 if A[i][j] in model else (-1 if R[i][j] in model else 0)
                      for j in range(n)] for i in range(n)]
            rules = [next(a for a in range(4) if rule[i][a] in model) for i in range(n)]
            changes = [(genes[j], genes[i], ref[i][j], links[i][j])
                       for i in range(n) for j in range(n) if links[i][j] != ref[i][j]]
            print("changed links (source, target, reference, found):")
            for ch in changes:
                print("  %s -> %s: %d -> %d" % ch)
            print("rules: " + " ".join("%s=%s" % (g, RULES[r]) for g, r in zip(genes, rules)))
            if args.rows:
                for i in sorted({i for i in range(n) for j in range(n) if links[i][j] != ref[i][j]}):
                    c2, A2, R2, _ = encode(ref, s_from, s_to, args.steps, K)
                    for j in range(n):
                        c2.add(A2[i][j] if ref[i][j] == 1 else -A2[i][j])
                        c2.add(R2[i][j] if ref[i][j] == -1 else -R2[i][j])
                    sat2, _, dt2 = solve(c2)
                    print("inputs of %s kept as in the reference, K = %d: %s (%.1f s)" %
                          (genes[i], K, "SAT" if sat2 else "UNSAT: every optimum changes them", dt2),
                          flush=True)
            if args.enumerate:
                enumerate_sets(c, A, R, ref, genes, links, args.enumerate)
            if args.out:
                with open(args.out, "w") as f:
                    f.write("# network found by grn-optimum.py, K = %d\n" % K)
                    for i in range(n):
                        f.write(",".join(map(str, links[i])) + "\n")
                    f.write("# rules: " + ",".join(RULES[r] for r in rules) + "\n")
            return 0
    print("no network within %d changes" % args.kmax)
    return 1


if __name__ == "__main__":
    sys.exit(main())
