"""One judgment in the trusted parent: its pipeline, its stages, and what orchestrates them.

The parent starts the two workers, sends them requests (protocol/), compares, decides and writes the record; it
never imports the task's or the candidate's code. `kerneljudge.judge` is `pipeline.judge`.

- `pipeline.py`: one judgment, stage by stage: preflight and build, correctness, timing, the record;
- `group.py`: a group of candidates of one task judged together: one hidden plan, one reference worker lent to each;
- `stages/`: the stages, each a module of functions over one explicit state (`stages/state.py`);
- `hidden_plan.py`: everything a candidate must not predict, drawn once, up front, from one source of randomness;
- `gate.py`: the lane gate: what a judgment waits for while other judgments share its machine;
- `sanitizer.py`: compute-sanitizer on one call of the candidate: finding the tool, deciding when, running it;
- `env.py`: what this machine offers: the environment fingerprint and `kerneljudge env`;
- `progress.py`: the spinner that names each stage on stderr, and what an API call's `progress` means.
"""
