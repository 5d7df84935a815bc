"""The verifiers 0.4 taskset `kerneljudge-verifiers`: verifiers loads a taskset by id, importing the one module
the id names and taking the `vf.Taskset` subclass its `__all__` exports (kerneljudge/adapters/verifiers_v1.py)."""

from kerneljudge.adapters.verifiers_v1 import KernelTaskset

__all__ = ["KernelTaskset"]
