"""Task sources: every format a task comes in, reduced to one KernelBench-format `Task` (sources/task.py).

- `load.py`: `load_task(spec)`, a loader per format: a KernelBench file (`reference.py` in a folder is named
  after the folder), a GPU MODE problem folder, one task of the built-in suite (`builtin:NAME`, kerneljudge/suite);
- `gpumode.py`: the GPU MODE format (gpu-mode/reference-kernels) reduced to a task and its submissions to candidates;
- `inputs_source.py`: the task's inputs without its reference: what the candidate's worker makes inputs from;
- `shapes.py`: a task's shape family on the trusted side, hidden shapes drawn from it at run time;
- `size_classes.py`: the values the parent proposes for a task's size integers, drawn from classes of sizes;
- `lint.py`: `kerneljudge tasks lint`, the checks of a task itself (degenerate, stochastic, ...);
- `lint_reference.py`: the task's reference run in a sandboxed reference worker for the lint;
- `lint_flags.py`: the lint's pure flags: the reference worker's screens in, flags out.

This package's own import is empty, so that importing one of its modules loads only that module's needs.
"""
