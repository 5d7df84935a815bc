"""Task sources: every format a task comes in, reduced to one KernelBench-format `Task`.

- `source`: the `Task` (a KernelBench reference's text: `Model`, `get_inputs()`, `get_init_inputs()`), how
  one is parsed and checked, and the reading of a source file;
- `load`: `load_task(spec)`, a loader per format: a KernelBench file (`reference.py` in a folder is named
  after the folder), a GPU MODE problem folder (`gpumode`), one task of the built-in suite (`builtin:NAME`,
  kerneljudge/suite);
- `gpumode`: the GPU MODE format (gpu-mode/reference-kernels) reduced to a task and its submissions to
  candidates;
- `shapes`: a task's shape family, declared (`SHAPES`) or described for the judge to derive;
- `lint`: `kerneljudge tasks lint`, the checks of a task itself (degenerate, stochastic, ...).

This package's own import is empty, so that importing one of its modules loads only that module's needs.
"""
