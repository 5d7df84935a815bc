"""The parent's checks: evidence in, findings out. Mostly pure functions; the stages call them (judgment/stages/).

A few of them are pure enough for the reference worker to run on the device as well (correctness, replay,
reference_replay, support: pinned in tests/architecture/test_layering.py), so this package's own import is empty.

- `catalog.py`: the findings catalog: every code kerneljudge can raise, in one table;
- `correctness.py`: numerical correctness: a candidate's output against the float64 oracle, by tolerance;
- `outputs.py`: structural checks of a candidate's output, from the worker's description of it;
- `precision.py`: precision forensics: is an error the signature of a lower precision than the task asks for;
- `replay.py`: whether two runs of the candidate on identical inputs agree to rounding, or race;
- `reference_replay.py`: the reference's own replay from another random state, set against its first run;
- `screening.py`: task screening: a task whose output does not depend on its inputs, or depends on noise;
- `refusals.py`: a candidate's error at a derived hidden shape: a refusal, or the failure it is;
- `runtime.py`: runtime observations from a worker, turned into findings;
- `trace.py`: kernel traces of candidate calls: a summary and findings (undeclared kernels, the stream check);
- `kernel_names.py`: kernel names as a trace reports them, read for what they say about a kernel's origin;
- `sanitizer.py`: compute-sanitizer's reports read into findings (judgment/sanitizer.py runs the tool);
- `support.py`: whether a failure of the trusted reference means the task cannot be judged on this machine;
- `workspace.py`: what the candidate's workers left in their workspaces, turned into findings.
"""
