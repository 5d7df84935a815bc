"""What reads judged records: the verdict record itself and everything computed from records alone.

Nothing here loads a task, a candidate or a batch (runs/ does: bundles, KernelBench's run folders): checks/ and every
stage import the verdict's types, so this package stays below them (docs/architecture.md).

- `verdict.py`: the verdict record: findings, capabilities, status, and the JSON record itself;
- `store.py`: the results store: one SQLite file of verdict records, one row per judgment key;
- `metrics.py`: benchmark figures over records: fast_p, verified_fast_p, geometric-mean speedups, intervals;
- `best_of_k.py`: best-of-K speedup claims with a multiplicity correction, per task;
- `explain.py`: a verdict in a few plain lines that a kernel-writing model can act on;
- `reward.py`: versioned reward specifications (a changed formula is a new spec id).
"""
