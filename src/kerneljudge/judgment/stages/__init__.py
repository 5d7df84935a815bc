"""The stages of one judgment, each a module of functions over one explicit state (`state.JudgmentState`).

`kerneljudge.judgment.pipeline` runs them in order, keeps the typed result each stage returns or fills
(`results.py`: the correctness run, the timing run, the traces read) and has the record assembled from the state
and those results (`record.py`); where each mechanism lives:

- `state.py`: what a judgment knows as it goes (the dataclass), and the findings' bookkeeping;
- `results.py`: what the stages return: the correctness run (its replays, compute-sanitizer's run, the trials' sets
  the timing pool makes again), the timing run (the record's timing as the stage left it, and whether enforce fails
  the candidate before anything is timed), the kernel traces read;
- `failures.py`: the candidate's failure, the judge's, the task's; an error response as a failure;
- `workers.py`: the worker pair: starting it, requests and their round trips per stage, closing it;
- `spare_pairs.py`: worker pairs started before the judgment that takes them, for a judge that lives on;
- `shared_reference.py`: a group's reference worker, lent to each of its judgments with a fresh candidate worker;
- `build.py`: preflight's hook-up, the reference's hello and load (the gate's memory admission), the
  candidate's import and build, the capabilities known at the start (the OS sandbox's among them);
- `calls.py`: one call on each side: the reference's trial (the call seed drawn there), the candidate's
  call (its runtime evidence and output structure checked), the reference worker's comparison;
- `correctness.py`: the hidden plan drawn (judgment/hidden_plan.py), the trials in its order, the screen for
  degenerate outputs;
- `native.py`: KernelBench's own evaluation (`--mode off`) as its own path: its public trials, its check,
  and nothing of the hardened stages (the stages they share ask `state.native`);
- `trials.py`: one trial's outputs compared, its record, precision forensics, the task's own check;
- `replays.py`: the replays of a trial and the perturbed ones (GPU load, another launch order);
- `reference_replay.py`: the reference run again on the first trial's inputs from another random state: a task
  whose reference is random past what the comparison can see (KJ-T003);
- `hidden_shapes.py`: the trials at hidden shapes of the task's family, declared or derived;
- `sanitizer.py`: compute-sanitizer's hook-up (judgment/sanitizer.py finds and runs the tools);
- `device_memory.py`: running short of device memory set against the judge's own need: the judge's error in the
  trials, an unmeasured timing in the timing stage, where the judgment does not fit the GPU;
- `integrity.py`: the kernel traces kept and read into findings (checks/trace.py: undeclared kernels, the
  stream check, KJ-R024: work left on another stream after the call);
- `timing.py`: the timing stage: the L2 flush, the regime, the graph fallback (where a failed capture shows
  unjoined stream work, KJ-R024), timing shapes, the measurement's findings (drains, the claimed-versus-
  observed clock check, the timed median against the trace);
- `timed_calls.py`: one timed request per side, the timing pool, the compiled reference, the checks of timed
  outputs (kept in the worker and checked after the samples);
- `kept_call.py`: which timed call's output is checked, named by the parent after its sample ran and every
  output of that sample was committed (H03);
- `untimed_work.py`: each side's commit and requests on the parent's clock beyond what its calls claim, the
  candidate's against the reference's (KJ-R027);
- `timed_rechecks.py`: the calls checked after the measurement: the graph recheck and the last-call recheck;
- `timing_pair.py`: the fresh worker pair that timing runs on;
- `timing_ahead.py`: the timing pair made ready in a thread while correctness runs (`timing_ahead`);
- `record.py`: the record assembled from the state and the stage results, a pure function that writes into neither.
"""
