"""The sandbox: starting, confining, talking to and ending one worker process (docs/security.md).

- `process.py`: starting one worker process, and closing it (`WorkerProcess`);
- `talk.py`: a request written to a worker, its response read within a deadline, its tensors in the channels;
- `ending.py`: how a worker ends: its output drained, its process tree killed, its last words read;
- `lifeline.py`: workers die with the judge: a lifeline pipe for the launcher, the parent-death signal for the rest;
- `plan.py`: the plan the trusted launcher is handed for one worker, made in the parent;
- `enter.py`: the trusted launcher that confines one worker: ``python -m kerneljudge.sandbox.enter SPEC -- ARGV``;
- `enter_layers.py`: the layers it applies, one function each: namespaces, mounts, limits, user, seccomp;
- `confine.py`: the operating-system layers around a worker: the policy, and the record of what was in force;
- `allowlist.py`: the allow-listed root: a worker sees only what it needs of the host's file system;
- `probe.py`: what this machine's sandbox can do, tried by starting the launcher around a snippet;
- `workspace.py`: a worker's private, disposable workspace: its cwd, HOME, temp and compiler caches;
- `tree.py`: walking and removing a tree a worker made, read as hostile data;
- `gpu_memory.py`: a per-worker GPU memory cap, watched through NVML, and the most a worker held;
- `bytecode.py`: a bytecode cache for workers where the installed packages carry none;
- `cache_carry.py`: a candidate's compiled kernels carried from its checked worker to its timing worker.
"""
