#!/usr/bin/env bash
# The GPU check in one command.
#
#   scripts/gpu_suite.sh fetch   (on a machine with the package registry) downloads into .whl/
#                                the wheels of runtime and test dependencies that a GPU image
#                                with torch and Triton usually lacks, for CPython 3.12 x86-64;
#   scripts/gpu_suite.sh run [STAGE ...]   (stages: tests redteam reach bench start copies latency batch step noise suite conformance sandbox ipc teardown exchange digest generate serve chaos all)
#                                (on the GPU machine, no network needed) installs those wheels
#                                into a private directory, puts the project on PYTHONPATH and runs, in this
#                                order, each stage asked for; KJ_LIMIT_S ends each stage run under it (tests, redteam,
#                                bench, start, copies, latency, batch, step, ipc, teardown, exchange, digest, generate) that many seconds after the script's start, which then still packs what
#                                came back (set it under the device call's limit); the records, the stores and the
#                                stages' JSON reports and logs come back packed in $OUT/results.tar.gz, the Markdown
#                                tables, gpu.txt and gpu_tests.log beside it
#                                `tests`: the tests marked `gpu` (under tests/) plus the CLI on every example;
#                                `redteam`: the red-team suite in audit and enforce mode, side by side
#                                (KJ_REDTEAM_MODES="audit" for one alone; KJ_REDTEAM_ARGS adds arguments to
#                                each, e.g. "--only timing_cache timing_switch"; every fixture's
#                                record in results.tar.gz as records/redteam-MODE/NAME.json);
#                                `reach`: benchmarks/perturb_reach.py, how often each perturbed replay shows the red
#                                team's split-row race (KJ_REACH_ARGS, e.g. "--calls 80"; $OUT/perturb_reach.md);
#                                `bench`: benchmarks/timer_fidelity.py (its table in $OUT/timer_fidelity.md, its
#                                progress in timer_fidelity.log; KJ_BENCH_ARGS adds arguments, e.g.
#                                "--kernels softmax_2048x4096 --pairs 3");
#                                `start`: benchmarks/worker_start.py, where a worker's start goes ($OUT/worker_start.md).
#                                `copies`: benchmarks/host_copy_bandwidth.py, device <-> memfd copies four ways
#                                ($OUT/host_copy_bandwidth.md);
#                                `latency`: benchmarks/judgment_latency.py, one honest judgment at a time on the idle GPU,
#                                with timing and without, where its time goes ($OUT/judgment_latency.md; KJ_LATENCY_ARGS
#                                adds arguments, e.g. "--repeats 3");
#                                `batch`: benchmarks/batch_throughput.py (its table in $OUT/batch_throughput.md,
#                                its stores and manifest in $OUT/batch/; KJ_BATCH_ARGS adds arguments, default
#                                "--jobs 4 --limit 32"; "--manifest real --kernelbench ext/KernelBench --modes enforce
#                                --jobs 8 --limit 28" measures against upstream, "--jobs 1 2 4 8" lane scaling; it
#                                ends at KJ_LIMIT_S);
#                                `step`: benchmarks/training_step.py, a GRPO-shaped step (16 tasks x 8 samples, real
#                                sizes) judged as groups and as single candidates, and by upstream's evaluator with
#                                "--kernelbench ext/KernelBench" in KJ_STEP_ARGS (default "--jobs 8"; its table in
#                                $OUT/training_step.md, its stores in results.tar.gz as step/);
#                                `noise`: benchmarks/commit_noise.py, honest torch candidates (the reference in both
#                                processes) judged by 8 lanes, how far the two sides' commit spans differ (KJ_NOISE_ARGS,
#                                default "--jobs 8 --samples 2"; KJ_NOISE_WRAP a command to run it under; its table in
#                                $OUT/commit_noise.md, its store in results.tar.gz as noise/);
#                                `suite`: benchmarks/suite_candidates.py, the built-in suite's reference Triton
#                                candidates judged (its table in $OUT/suite_candidates.md, its store in $OUT/suite/;
#                                KJ_SUITE_ARGS adds arguments, default "--jobs 4"; KJ_SUITE_LIMIT_S stops it after
#                                that many seconds from the script's start, KJ_SUITE_RESUME names a results.tar.gz or folder whose store it
#                                goes on from), then `tasks lint` of the tasks KJ_LINT_TASKS names (default
#                                builtin:all; "none" skips it) on the GPU (suite_lint.json);
#                                `sandbox`: scripts/sandbox_cuda_probe.py (which sandbox layer, if any, stops
#                                CUDA; its table in $OUT/sandbox_cuda.md);
#                                `ipc`: benchmarks/cuda_ipc_probe.py, CUDA IPC between two sandboxed workers and
#                                forged handles (its report cuda_ipc_probe.json in results.tar.gz; KJ_IPC_MIB sizes it);
#                                `teardown`: benchmarks/context_teardown.py, how long a CUDA process takes to be
#                                gone, bare and sandboxed, by what it holds ($OUT/context_teardown.md; KJ_TEARDOWN_ARGS);
#                                `exchange`: benchmarks/kept_call_exchange.py, what naming the kept timed call after
#                                each sample costs, eager and in a CUDA graph ($OUT/kept_call_exchange.md);
#                                `digest`: benchmarks/commit_digest_cost.py, the commit's digests of outputs of several
#                                sizes against a memory-bound kernel making them ($OUT/commit_digest_cost.md);
#                                `conformance`: benchmarks/conformance.py over the public task sets (KernelBench
#                                and GPU MODE checkouts by path, in KJ_CONF_ARGS; default "--kernelbench
#                                ext/KernelBench --gpumode ext/reference-kernels --jobs 12"; KJ_CONF_RESUME names a
#                                results.tar.gz whose stores it goes on from; KJ_CONF_LIMIT_S stops it 30 s short of that many
#                                seconds after this script started, the stores keeping what finished, and then writes
#                                the tables and the ledger from the stores (--no-judging); the
#                                committed ledger, docs/data/conformance-ledger.jsonl (KJ_CONF_LEDGER), answers
#                                for what earlier machines judged, and comes back with this run's rows in
#                                conformance/ledger.jsonl, to commit; its tables in $OUT/conformance.md). The limits count from the script's start (the wheels'
#                                install included), so that a limit some seconds under the device call's leaves
#                                time to pack the stores, WAL and all (a store without its WAL loses what the
#                                run judged: seen on 2026-12-02);
#                                `generate`: the recorded model responses of examples/responses/ (written for the
#                                project: honest, wrong and hacking kernels) served by a loopback OpenAI-compatible
#                                server through the real client (no model weights can be fetched here), the run
#                                judged by `batch` and a repair loop by `improve` on the GPU (docs/generate.md;
#                                its summary in $OUT/generate.md, its folders in $OUT/generate.tar.gz);
#                                `serve`: benchmarks/serve_load.py --work real: `kerneljudge serve` on every GPU,
#                                the real-size manifest's honest candidates, hacks and bug sent over loopback by
#                                client threads, with retries (KJ_SERVE_ARGS, default "--mode enforce --timing
#                                --lanes 4 --clients 8"; its table in $OUT/serve_load.md, the server's store in
#                                results.tar.gz as serve/rewards.db);
#                                `chaos`: benchmarks/chaos_batch.py --device cuda: 200 hostile workspaces and 20 honest
#                                candidates batched, SIGKILLed after 40 records and rerun (KJ_CHAOS_ARGS; KJ_CHAOS_RESUME
#                                names a store to go on from; its table in
#                                $OUT/chaos_batch.md, its store in results.tar.gz as chaos/);
#                                `all` (the default): tests and redteam. KJ_GPU_TESTS_K=EXPR runs only the
#                                GPU tests matching that pytest -k expression; KJ_GPU_TESTS_SHARD=i/n only every
#                                n-th of them from the i-th (the whole set is more than one call's 600 s). Logs go to $OUT (default: ./out),
#                                records and stores to $OUT/results.tar.gz. KJ_ALLOWLIST_CUDA=0 gives CUDA workers
#                                the hide-list instead of the allow-listed root, for every stage (docs/security.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# Seconds left of a limit counted from the script's start (bash's SECONDS), at least one.
left_of() {
  local left=$(($1 - SECONDS))
  echo $((left > 0 ? left : 1))
}

# Pinned to what the project is tested with; keep one version of each.
WHEELS=(
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
  typing-extensions==4.16.0 nvidia-ml-py==13.615.71 pyseccomp==0.1.2
  openai==3.60.0 httpx2==2.16.2 httpcore2==2.16.2 h11==0.16.0 anyio==4.16.0 sniffio==1.3.1 idna==3.20
  jiter==0.19.0 truststore==0.10.5
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.55.0 click==8.5.1 prometheus-client==0.26.0 annotated-doc==0.0.7
  opentelemetry-api==1.45.2 httpx==0.29.0 httpcore==1.0.9 certifi==2026.10.19.post1
)

fetch() {
  mkdir -p .whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${WHEELS[@]}"
  ls .whl
}

# Whether the stages asked for name this one ("all" names tests and redteam).
asked() {
  local want="$1" stage
  for stage in "${STAGES[@]}"; do
    [ "$stage" = "$want" ] && return 0
    [ "$stage" = all ] && { [ "$want" = tests ] || [ "$want" = redteam ]; } && return 0
  done
  return 1
}

# The seconds a stage's command may still run: what is left of KJ_LIMIT_S (from the script's start), so that
# a call's limit ends the stage and not the script, which then still packs what came back.
stage_left() {
  left_of "${KJ_LIMIT_S:-86400}"
}

run() {
  STAGES=("${@:-all}")
  OUT="${OUT:-$PWD/out}"
  local records="$OUT/records"
  mkdir -p "$records"
  local site=/tmp/kerneljudge-site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
  # KJ_SRC: another version's source folder to run instead of src/ (e.g. `git archive <commit> src | tar x -C
  # ext/before`, then KJ_SRC=ext/before/src), for a side-by-side run on one machine; this checkout's scripts drive it.
  export PYTHONPATH="$(realpath "${KJ_SRC:-$PWD/src}"):$site${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONUNBUFFERED=1 KJ_RECORD_DIR="$records"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt" || true
  python3 -m kerneljudge env | tee -a "$OUT/gpu.txt"
  # The host's cores and NUMA nodes and the GPU's place among them: whether a worker pair can land on cores of two
  # nodes, one suspected cause of the two workers' differing host speeds (the commit spans' noise, docs/timing.md).
  { lscpu | grep -E '^(CPU\(s\)|Model name|Thread|Core|Socket|NUMA)'; nvidia-smi topo -m; } >> "$OUT/gpu.txt" 2>&1 || true
  set +e
  local status=0 audit_status=0 enforce_status=0
  if asked tests; then
    # KJ_GPU_TESTS_SHARD=i/n: every n-th GPU test from the i-th, so that the whole set (some 900 s on an H100 on
    # 2026-12-06, judge 0.3.11) spans n calls of the device's limit; the examples' judgments go with the last shard.
    local selected=(tests) shard="${KJ_GPU_TESTS_SHARD:-1/1}"
    if [ "$shard" != 1/1 ]; then
      # shellcheck disable=SC2207  # one node id a line, none with spaces
      selected=($(python3 -m pytest -m gpu tests --collect-only -q -p no:cacheprovider \
        ${KJ_GPU_TESTS_K:+-k "$KJ_GPU_TESTS_K"} 2>/dev/null | grep '::' \
        | awk -v i="${shard%/*}" -v n="${shard#*/}" '(NR - i) % n == 0'))
    fi
    if [ ${#selected[@]} -gt 0 ]; then
      timeout "$(stage_left)" python3 -m pytest -m gpu "${selected[@]}" -v -n 0 -p no:cacheprovider \
        ${KJ_GPU_TESTS_K:+-k "$KJ_GPU_TESTS_K"} 2>&1 | tee "$OUT/gpu_tests.log"
      status=${PIPESTATUS[0]}
    else
      echo "no GPU test in shard $shard" | tee "$OUT/gpu_tests.log"
      status=1
    fi
    # The examples' CLI judgments go with the whole set (its last shard); a filtered run (KJ_GPU_TESTS_K) is a
    # targeted check.
    [ -n "${KJ_GPU_TESTS_K:-}" ] || [ "${shard%/*}" != "${shard#*/}" ] || for example in examples/*/; do
      for candidate in "$example"candidate_*.py; do
        # A folder without a reference and candidates (adapters/, responses/) is no example to judge.
        [ -f "$example/reference.py" ] && [ -f "$candidate" ] || continue
        name="$(basename "$example")-$(basename "$candidate" .py)"
        timeout "$(stage_left)" python3 -m kerneljudge judge "$example/reference.py" "$candidate" --device cuda \
          --json "$records/cli-$name.json" > "$records/cli-$name.txt" 2>&1
        echo "$name exit=$?" | tee -a "$OUT/gpu.txt"
      done
    done
  fi
  if asked redteam; then
    # The red-team suite in each hardened mode of KJ_REDTEAM_MODES (default both), side by side, several fixtures at
    # a time (no timing, so they do not disturb each other). One mode alone leaves the call's time to it.
    local mode pids=() modes code
    read -r -a modes <<< "${KJ_REDTEAM_MODES:-audit enforce}"
    for mode in "${modes[@]}"; do
      # shellcheck disable=SC2086  # KJ_REDTEAM_ARGS holds several arguments
      timeout "$(stage_left)" python3 -m kerneljudge redteam --device cuda --mode "$mode" --jobs 6 \
        --json "$records/redteam-$mode.json" --records "$records/redteam-$mode" ${KJ_REDTEAM_ARGS:-} \
        > "$records/redteam-$mode.txt" 2>&1 &
      pids+=($!)
    done
    for i in "${!modes[@]}"; do
      wait "${pids[$i]}"
      code=$?
      case "${modes[$i]}" in audit) audit_status=$code ;; enforce) enforce_status=$code ;; *) status=1 ;; esac
      cat "$records/redteam-${modes[$i]}.txt" | tee -a "$OUT/gpu.txt"
    done
    echo "redteam ${modes[*]}: audit exit=$audit_status enforce exit=$enforce_status" | tee -a "$OUT/gpu.txt"
  fi
  if asked reach; then  # what each perturbed replay shows of a race an idle GPU hides
    # shellcheck disable=SC2086  # KJ_REACH_ARGS holds several arguments
    timeout "$(stage_left)" python3 benchmarks/perturb_reach.py --json "$OUT/perturb_reach.json" ${KJ_REACH_ARGS:-} \
      2> "$OUT/perturb_reach.log" | tee "$OUT/perturb_reach.md"
    status=${PIPESTATUS[0]}
  fi
  if asked start; then
    timeout "$(stage_left)" python3 benchmarks/worker_start.py --device cuda 2> "$OUT/worker_start.log" | tee "$OUT/worker_start.md"
    status=${PIPESTATUS[0]}
  fi
  if asked copies; then
    timeout "$(stage_left)" python3 benchmarks/host_copy_bandwidth.py 2> "$OUT/host_copy_bandwidth.log" \
      | tee "$OUT/host_copy_bandwidth.md"
    status=${PIPESTATUS[0]}
  fi
  if asked latency; then
    # shellcheck disable=SC2086  # KJ_LATENCY_ARGS holds several arguments, e.g. "--repeats 3 --only softmax"
    timeout "$(stage_left)" python3 benchmarks/judgment_latency.py --device cuda --out "$OUT/latency" ${KJ_LATENCY_ARGS:-} \
      2> "$OUT/judgment_latency.log" | tee "$OUT/judgment_latency.md"
    status=${PIPESTATUS[0]}
  fi
  if asked batch; then
    # shellcheck disable=SC2086  # KJ_BATCH_ARGS holds several arguments
    timeout "$(stage_left)" python3 benchmarks/batch_throughput.py --device cuda --out "$OUT/batch" \
      ${KJ_BATCH_ARGS:---jobs 4 --limit 32} \
      2> "$OUT/batch_throughput.log" | tee "$OUT/batch_throughput.md"
    status=${PIPESTATUS[0]}
  fi
  if asked step; then
    # shellcheck disable=SC2086  # KJ_STEP_ARGS holds several arguments
    timeout "$(stage_left)" python3 benchmarks/training_step.py --device cuda --out "$OUT/step" \
      ${KJ_STEP_ARGS:---jobs 8} \
      2> "$OUT/training_step.log" | tee "$OUT/training_step.md"
    status=${PIPESTATUS[0]}
  fi
  if asked noise; then
    # KJ_NOISE_WRAP: a command the benchmark runs under (e.g. "numactl --cpunodebind=0 --membind=0"), for an A/B
    # shellcheck disable=SC2086  # KJ_NOISE_ARGS and KJ_NOISE_WRAP hold several words
    timeout "$(stage_left)" ${KJ_NOISE_WRAP:-} python3 benchmarks/commit_noise.py --device cuda --out "$OUT/noise" \
      ${KJ_NOISE_ARGS:---jobs 8 --samples 2} 2> "$OUT/commit_noise.log" | tee "$OUT/commit_noise.md"
    status=${PIPESTATUS[0]}
  fi
  if asked suite; then
    # A store carried from an earlier call (KJ_SUITE_RESUME: a results.tar.gz, or a folder holding suite.db)
    # is resumed; KJ_SUITE_LIMIT_S stops the judging after that many seconds (the store keeps what finished).
    mkdir -p "$OUT/suite"
    if [ -f "${KJ_SUITE_RESUME:-}" ]; then
      tar xzf "$KJ_SUITE_RESUME" -C "$OUT" suite/suite.db || true
    elif [ -d "${KJ_SUITE_RESUME:-}" ]; then
      cp "$KJ_SUITE_RESUME/suite.db" "$OUT/suite/"
    fi
    # shellcheck disable=SC2086  # KJ_SUITE_ARGS holds several arguments
    timeout "$(left_of "${KJ_SUITE_LIMIT_S:-86400}")" python3 benchmarks/suite_candidates.py --device cuda --out "$OUT/suite" \
      ${KJ_SUITE_ARGS:---jobs 4} 2> "$OUT/suite_candidates.log" | tee "$OUT/suite_candidates.md"
    status=${PIPESTATUS[0]}
    [ "$status" -eq 124 ] && python3 benchmarks/suite_candidates.py --out "$OUT/suite" --table-only \
      | tee "$OUT/suite_candidates.md"
    if [ "${KJ_LINT_TASKS:-builtin:all}" != none ]; then
      # shellcheck disable=SC2086  # KJ_LINT_TASKS holds several task names
      python3 -m kerneljudge tasks lint ${KJ_LINT_TASKS:-builtin:all} --device cuda --json "$OUT/suite_lint.json" \
        2>&1 | tee "$OUT/suite_lint.txt"
    fi
  fi
  if asked conformance; then
    mkdir -p "$OUT/conformance"
    if [ -f "${KJ_CONF_RESUME:-}" ]; then
      tar xzf "$KJ_CONF_RESUME" -C "$OUT" conformance || true
    fi
    # The committed lint results (one line a problem) go on as the lint's own file: only what is missing, ended in
    # an error or was found by older rules is linted again (250 problems take about six minutes on the H200).
    local lints="${KJ_CONF_LINT:-docs/data/conformance-lint.jsonl}"
    [ -f "$lints" ] && [ ! -f "$OUT/conformance/lint.jsonl" ] && cp "$lints" "$OUT/conformance/lint.jsonl"
    # The committed ledger answers for what an earlier machine judged with this version of the judge; the run
    # writes it out again with its own rows ($OUT/conformance/ledger.jsonl, in results.tar.gz), to commit.
    local ledger="${KJ_CONF_LEDGER:-docs/data/conformance-ledger.jsonl}" ledger_args=()
    [ -f "$ledger" ] && ledger_args=(--ledger "$ledger")
    local conf_args="${KJ_CONF_ARGS:---kernelbench ext/KernelBench --gpumode ext/reference-kernels --jobs 12}"
    # The sweep stops 30 s before the limit, which leaves time to write the tables and the ledger from the
    # stores (--no-judging) when the limit cut it short, a judgment still running (2026-12-03: linalg/eigh_py).
    # shellcheck disable=SC2086  # KJ_CONF_ARGS holds several arguments
    timeout "$(left_of $((${KJ_CONF_LIMIT_S:-86400} - 30)))" python3 benchmarks/conformance.py --device cuda \
      --out "$OUT/conformance" "${ledger_args[@]}" $conf_args 2> "$OUT/conformance.log" | tee "$OUT/conformance.md"
    status=${PIPESTATUS[0]}
    if [ "$status" = 124 ]; then
      echo "conformance: cut off at its limit; the tables and the ledger from what the stores hold" >&2
      # shellcheck disable=SC2086
      timeout "$(left_of "${KJ_CONF_LIMIT_S:-86400}")" python3 benchmarks/conformance.py --device cuda --no-judging \
        --out "$OUT/conformance" "${ledger_args[@]}" $conf_args 2>> "$OUT/conformance.log" | tee "$OUT/conformance.md"
    fi
  fi
  if asked sandbox; then
    python3 scripts/sandbox_cuda_probe.py --json "$OUT/sandbox_cuda.json" 2>&1 | tee "$OUT/sandbox_cuda.md"
    status=${PIPESTATUS[0]}
  fi
  if asked ipc; then  # with the wheels installed: the sandbox's launcher imports them (seccomp among them)
    timeout "$(stage_left)" python3 benchmarks/cuda_ipc_probe.py --mib "${KJ_IPC_MIB:-1024}" --out "$OUT" \
      > "$OUT/cuda_ipc_probe.log" 2>&1
    status=$?
    tail -c 3000 "$OUT/cuda_ipc_probe.log"
  fi
  if asked teardown; then  # how long a CUDA process takes to be gone, bare and in the sandbox (KJ_TEARDOWN_ARGS)
    # shellcheck disable=SC2086  # KJ_TEARDOWN_ARGS holds several arguments
    timeout "$(stage_left)" python3 benchmarks/context_teardown.py --json "$OUT/context_teardown.json" \
      ${KJ_TEARDOWN_ARGS:-} 2> "$OUT/context_teardown.log" | tee "$OUT/context_teardown.md"
    status=${PIPESTATUS[0]}
  fi
  if asked exchange; then  # the kept call's `sampled`/`keep` between samples, per sample (judgment/stages/kept_call.py)
    timeout "$(stage_left)" python3 benchmarks/kept_call_exchange.py --json "$OUT/kept_call_exchange.json" \
      2> "$OUT/kept_call_exchange.log" | tee "$OUT/kept_call_exchange.md"
    status=${PIPESTATUS[0]}
  fi
  if asked digest; then  # the commit's digests against the work they cover, by output size
    timeout "$(stage_left)" python3 benchmarks/commit_digest_cost.py --device cuda --json "$OUT/commit_digest_cost.json" \
      2> "$OUT/commit_digest_cost.log" | tee "$OUT/commit_digest_cost.md"
    status=${PIPESTATUS[0]}
  fi
  if asked generate; then
    # The model is the loopback server replaying examples/responses/ (sample S of a task is its response S:
    # --seed 0); the candidates go through the real client, the run folder through batch as it is.
    local gen="$OUT/generate" gen_status=0
    mkdir -p "$gen"
    python3 -m kerneljudge.generate.loopback examples/responses --url-file "$gen/url.txt" > "$gen/server.log" 2>&1 &
    local server=$!
    for _ in $(seq 100); do [ -s "$gen/url.txt" ] && break; sleep 0.2; done
    local model=(--model recorded --base-url "$(cat "$gen/url.txt")" --seed 0)
    timeout "$(stage_left)" python3 -m kerneljudge generate --tasks builtin:softmax_fp32 builtin:rmsnorm_fp32 \
      builtin:bias_relu_fp16 --samples 2 "${model[@]}" --out "$gen/run" 2>&1 | tee "$gen/generate.log"
    gen_status=$((gen_status | PIPESTATUS[0]))
    timeout "$(stage_left)" python3 -m kerneljudge batch --kernelbench-run "$gen/run" --kernelbench-problems \
      "$gen/run/problems" --store "$gen/results.db" --device cuda 2>&1 | tee "$gen/batch.log"
    gen_status=$((gen_status | PIPESTATUS[0]))
    timeout "$(stage_left)" python3 -m kerneljudge improve --tasks builtin:bias_relu_fp16 --rounds 3 "${model[@]}" \
      --out "$gen/improve" --store "$gen/improve.db" --device cuda 2>&1 | tee "$gen/improve.log"
    gen_status=$((gen_status | PIPESTATUS[0]))
    kill "$server"
    python3 - "$gen" > "$OUT/generate.md" <<'PY'
import json, sys
from pathlib import Path
from kerneljudge.results.store import Store
gen = Path(sys.argv[1])
def lines(path):  # a command cut off by the limit may have left none
    return path.read_text().splitlines() if path.is_file() else []
print("| sample | response's model | status | failure | findings | speedup |\n|---|---|---|---|---|---|")
verdicts = {}
if (gen / "results.db").is_file():
    with Store(gen / "results.db") as store:
        verdicts = {Path(r.candidate.path).name: r for r in store}
for line in lines(gen / "run" / "samples.jsonl"):
    s = json.loads(line)
    r = verdicts.get(s["candidate"])
    codes = ", ".join(sorted({f.code for f in r.findings if f.severity != "info"})) if r else ""
    speed = f"{r.timing.speedup:.2f}x" if r and r.timing.speedup else "-"
    print(f"| {s['candidate']} | {s['model']} | {r.status if r else '?'} | {r.failure_kind if r else ''} | {codes} | {speed} |")
print("\n| improve round | status | reward | stop |\n|---|---|---|---|")
for line in lines(gen / "improve" / "rounds.jsonl"):
    r = json.loads(line)
    print(f"| {r['task_name']} round {r['round']} | {(r['verdict'] or {}).get('status')} | {r['reward']} | {r['stop']} |")
PY
    cat "$OUT/generate.md" | tee -a "$OUT/gpu.txt"
    echo "generate stage exit=$gen_status" | tee -a "$OUT/gpu.txt"
    tar czf "$OUT/generate.tar.gz" -C "$OUT" generate && rm -r "$gen"
    status=$gen_status
  fi
  if asked serve; then
    mkdir -p "$OUT/serve"
    # shellcheck disable=SC2086  # KJ_SERVE_ARGS holds several arguments
    timeout "$(stage_left)" python3 benchmarks/serve_load.py --device cuda --work real \
      ${KJ_SERVE_ARGS:---mode enforce --timing --lanes 4 --clients 8} --markdown "$OUT/serve_load.md" \
      --json "$OUT/serve/load.json" --keep-store "$OUT/serve/rewards.db" 2>&1 | tee "$OUT/serve_load.log"
    status=${PIPESTATUS[0]}
  fi
  if asked chaos; then
    # The chaos batch with CUDA workers: hostile workspaces mixed with honest candidates, killed and rerun
    # (benchmarks/chaos_batch.py; its table in $OUT/chaos_batch.md, its store and logs in results.tar.gz as chaos/).
    # shellcheck disable=SC2086  # KJ_CHAOS_ARGS holds several arguments
    # KJ_CHAOS_RESUME names a store an earlier call began (on the same kind of GPU: the store's key holds it);
    # the batch is SIGKILLed 20 s before the stage's limit, and the table still written.
    timeout "$(stage_left)" python3 benchmarks/chaos_batch.py --device cuda --out "$OUT/chaos" \
      ${KJ_CHAOS_ARGS:---hostile 200 --honest 20 --jobs 8 --kill-after 40} --markdown "$OUT/chaos_batch.md" \
      --max-seconds "$(( $(stage_left) - 20 ))" ${KJ_CHAOS_RESUME:+--resume "$KJ_CHAOS_RESUME"} \
      2>&1 | tee "$OUT/chaos_batch.log"
    status=${PIPESTATUS[0]}
    rm -rf "$OUT/chaos/items" "$OUT/chaos/tmp"
  fi
  if asked bench; then
    # shellcheck disable=SC2086  # KJ_BENCH_ARGS holds several arguments, e.g. "--kernels matmul_2048_fp32 --pairs 3"
    timeout "$(stage_left)" python3 benchmarks/timer_fidelity.py --device cuda --json "$OUT/timer_fidelity.json" ${KJ_BENCH_ARGS:-} \
      2> "$OUT/timer_fidelity.log" | tee "$OUT/timer_fidelity.md"
    status=${PIPESTATUS[0]}
  fi
  python3 scripts/summarize_records.py "$records" | tee -a "$OUT/gpu.txt"
  # One archive of the records and the stores, so that they come back from machines that return few files
  # (eight at most, seen on 2026-11-30: the stores of a run beyond that were left behind).
  # The stages' JSON reports and progress logs go in it too, the Markdown tables and the GPU tests' log staying
  # beside it: with four stages (2026-12-05) their loose files came to nine and the archive was the one left out.
  local packed=(records) file
  for folder in batch step noise suite conformance latency serve chaos; do [ -d "$OUT/$folder" ] && packed+=("$folder"); done
  for file in "$OUT"/*.json "$OUT"/*.log; do
    [ -f "$file" ] && [ "$(basename "$file")" != gpu_tests.log ] && packed+=("$(basename "$file")")
  done
  tar czf "$OUT/results.tar.gz" -C "$OUT" "${packed[@]}" && (cd "$OUT" && rm -r "${packed[@]}")
  [ "$status" -eq 0 ] && [ "$audit_status" -eq 0 ] && [ "$enforce_status" -eq 0 ]
}

case "${1:-}" in
  fetch) fetch ;;
  run) shift; run "$@" ;;
  *) echo "usage: scripts/gpu_suite.sh fetch | run [STAGE ...] (tests redteam reach bench start copies latency batch step noise suite conformance sandbox ipc teardown exchange digest generate serve chaos all)" >&2
     exit 1 ;;
esac
