"""Generation and repair: task selection, templates, the real client against a loopback OpenAI-compatible
server (retries, keys), run folders that `kerneljudge batch` judges unchanged, resuming after a kill, the
offline backend, and the improve loop end to end (kerneljudge/generate/)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import CANDIDATES, EXAMPLES, ROOT, TASKS
from kerneljudge.cli import main
from kerneljudge.errors import UsageError
from kerneljudge.generate.client import ChatClient, ChatRequest, Sampling
from kerneljudge.generate.datasets import BUILTIN_LEVEL, GPUMODE_LEVEL, select_tasks, write_problems
from kerneljudge.generate.loopback import ReplayServer
from kerneljudge.generate.offline import Canned, OfflineBackend, ResponseBook
from kerneljudge.generate.prompts import feedback_template, generation_prompt, prompt_template
from kerneljudge.generate.records import RoundRecord, SampleRecord, public_url, read_lines
from kerneljudge.generate.run import FAILURES, SAMPLES, RunFolder
from kerneljudge.results.store import Store

JUDGE_FLAGS = ["--device", "cpu", "--policy", "practical", "--timeout", "60", "--no-timing"]
MATCH = "relu(x + bias)"  # in the tiny task's docstring: how the loopback server knows the task


def response(name: str, prose: str) -> str:
    """A candidate in a model's response form: prose, the code in a fenced block, a closing remark."""
    code = (CANDIDATES / name).read_text()
    return f"{prose}\n\n```python\n{code}```\n\nThis fuses the bias and the ReLU."


def write_book(folder: Path, entries: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    book = folder / "responses.jsonl"
    book.write_text("".join(json.dumps({"task": "19_BiasReLU", "match": MATCH, **e}) + "\n" for e in entries))
    return book


def checkout(root: Path) -> Path:
    """A KernelBench checkout of the tiny task, as level 1 problem 19."""
    (root / "KernelBench" / "level1").mkdir(parents=True)
    shutil.copy(TASKS / "tiny_bias_relu.py", root / "KernelBench" / "level1" / "19_BiasReLU.py")
    return root


HONEST = {"sample": 0, "response": response("honest_torch.py", "Here is a fused version of the model.")}
WRONG = {"sample": 1, "response": response("wrong_values.py", "A leaner version that drops a redundant add.")}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """One generation of two samples (honest, wrong) through the real client, then `batch` over its folder."""
    root = tmp_path_factory.mktemp("generated")
    book = ResponseBook.load(write_book(root / "book", [HONEST, WRONG]))
    run = root / "run"
    with ReplayServer(book, faults=[429, 500]) as server:
        argv = ["generate", "--tasks", str(checkout(root)), "--model", "m1", "--base-url", server.url]
        argv += ["--samples", "2", "--seed", "0", "--out", str(run), "--concurrency", "1", "--retries", "3"]
        code = main(argv)
        statuses = list(server.statuses)
    store = root / "results.db"
    batch = ["batch", "--kernelbench-run", str(run), "--kernelbench-problems", str(run / "problems")]
    batch_code = main([*batch, "--store", str(store), *JUDGE_FLAGS])
    with Store(store) as s:
        records = sorted(s, key=lambda r: r.candidate.name)
    return {"run": run, "code": code, "statuses": statuses, "batch_code": batch_code, "records": records}


def test_generate_writes_kernelbench_layout_and_one_record_per_sample(generated):
    run = generated["run"]
    assert generated["code"] == 0
    assert generated["statuses"] == [429, 500, 200, 200]  # the first sample was retried twice
    assert sorted(p.name for p in run.glob("*.py")) == [
        "level_1_problem_19_sample_0_kernel.py",
        "level_1_problem_19_sample_1_kernel.py",
    ]
    assert (run / "problems" / "level1" / "19_BiasReLU.py").read_text() == (TASKS / "tiny_bias_relu.py").read_text()
    first, second = sorted(read_lines(run / SAMPLES, SampleRecord), key=lambda r: r.sample_id)
    assert [a.status_code for a in first.attempts] == [429, 500, 200]
    assert first.attempts[1].waited_s == 2.0  # the 429's Retry-After
    assert first.model == "replay" and first.requested_model == "m1"  # the name the server reported is kept
    assert first.sampling == {"seed": 0} and second.sampling == {"seed": 1}
    assert first.extracted and first.source == (CANDIDATES / "honest_torch.py").read_text()
    assert (run / first.candidate).read_text() == first.source
    assert "```python" in first.response and "class Model(nn.Module)" in first.prompt
    assert first.task_id == "level1/19_BiasReLU" and first.usage["completion_tokens"] > 0


def test_batch_judges_the_run_folder_unchanged(generated):
    honest, wrong = generated["records"]
    assert generated["batch_code"] == 0  # a FAIL is a verdict, not a batch error
    assert (honest.candidate.name, honest.status) == ("level_1_problem_19_sample_0_kernel", "PASS")
    assert (wrong.candidate.name, wrong.status) == ("level_1_problem_19_sample_1_kernel", "FAIL")
    assert honest.task.name == "19_BiasReLU"


def test_the_client_fails_at_once_on_a_4xx_and_after_its_retries_on_5xx(tmp_path, monkeypatch):
    book = ResponseBook([Canned("t", "```python\nx = 1\n```", match="TASK-T")], "inline")
    request = ChatRequest(({"role": "user", "content": "solve TASK-T"},), "m", {}, "t", 0)
    slept = []
    monkeypatch.setenv("KJ_TEST_KEY", "sk-test-secret")
    with ReplayServer(book, faults=[500, 503, 502], api_key="sk-test-secret") as server:
        client = ChatClient(server.url, "KJ_TEST_KEY", retries=2, sleep=slept.append)
        failed = client.complete(request)
        assert failed.text is None and "after 3 attempts" in failed.error
        assert [a.status_code for a in failed.attempts] == [500, 503, 502]
        assert len(slept) == 2 and slept[1] >= slept[0] / 2 > 0  # exponential backoff with jitter
        assert client.complete(request).text == "```python\nx = 1\n```"
        monkeypatch.setenv("KJ_TEST_KEY", "sk-wrong")
        refused = ChatClient(server.url, "KJ_TEST_KEY", sleep=slept.append).complete(request)
        assert refused.error.startswith("HTTP 401") and len(refused.attempts) == 1  # not retried
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UsageError, match="no API key: set OPENAI_API_KEY"):
        ChatClient(None)


def test_the_key_is_sent_and_never_written(tmp_path, monkeypatch):
    book = ResponseBook.load(write_book(tmp_path / "book", [HONEST]))
    monkeypatch.setenv("KJ_TEST_KEY", "sk-test-secret")
    with ReplayServer(book, api_key="sk-test-secret") as server:
        argv = ["generate", "--tasks", f"kernelbench:{checkout(tmp_path)}", "--model", "m", "--base-url", server.url]
        assert main([*argv, "--api-key-env", "KJ_TEST_KEY", "--out", str(tmp_path / "run")]) == 0
    written = [p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert written and not any(b"sk-test-secret" in data for data in written)
    assert public_url("http://user:sk-test-secret@127.0.0.1:8000/v1?key=sk-test-secret") == "http://127.0.0.1:8000/v1"


GENERATE_PROCESS = "import sys; from kerneljudge.cli import main; sys.exit(main(sys.argv[1:]))"


def test_a_killed_generation_resumes_without_duplicating_samples(tmp_path, capsys):
    book = ResponseBook.load(write_book(tmp_path / "book", [HONEST, WRONG]))
    run = tmp_path / "run"
    argv = ["generate", "--tasks", str(checkout(tmp_path)), "--model", "m", "--samples", "6", "--seed", "0"]
    argv += ["--out", str(run), "--concurrency", "2"]
    with ReplayServer(book, hold_after=3) as server:  # answers three requests, then holds every other one
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        child = subprocess.Popen([sys.executable, "-c", GENERATE_PROCESS, *argv, "--base-url", server.url], env=env)
        deadline = time.monotonic() + 120
        while len(read_lines(run / SAMPLES, SampleRecord)) < 3 and child.poll() is None:
            assert time.monotonic() < deadline, "the generation never wrote three samples"
            time.sleep(0.2)
        time.sleep(0.5)  # the held requests are in flight
        child.send_signal(signal.SIGKILL)
        child.wait()
    before = (run / SAMPLES).read_text()
    assert len(before.splitlines()) == 3
    with ReplayServer(book) as server:
        assert main([*argv, "--base-url", server.url]) == 0
        assert server.answered == 3  # only the samples not done were asked for
    records = read_lines(run / SAMPLES, SampleRecord)
    assert (run / SAMPLES).read_text().startswith(before)
    assert sorted(r.sample_id for r in records) == [0, 1, 2, 3, 4, 5]
    assert len(list(run.glob("level_1_problem_19_sample_*_kernel.py"))) == 6
    with ReplayServer(book) as server:  # once more: nothing is left to ask
        assert main([*argv, "--base-url", server.url]) == 0 and server.answered == 0
    capsys.readouterr()
    assert main([*argv[:4], "other", *argv[5:], "--offline", str(tmp_path / "book")]) == 1
    assert "was begun with model 'm', not 'other'" in capsys.readouterr().err


def test_failed_requests_are_recorded_apart_and_retried_by_a_rerun(tmp_path):
    book = ResponseBook.load(write_book(tmp_path / "book", [HONEST, WRONG]))
    run = tmp_path / "run"
    argv = ["generate", "--tasks", str(checkout(tmp_path)), "--model", "m", "--samples", "2", "--seed", "0"]
    argv += ["--out", str(run), "--retries", "0", "--concurrency", "1"]
    with ReplayServer(book, faults=[503]) as server:  # the first request fails and is not retried
        assert main([*argv, "--base-url", server.url]) == 1
    assert len(read_lines(run / SAMPLES, SampleRecord)) == 1
    [failure] = read_lines(run / FAILURES, SampleRecord)
    assert failure.response is None and failure.error.startswith("HTTP 503") and failure.candidate is None
    with ReplayServer(book) as server:
        assert main([*argv, "--base-url", server.url]) == 0 and server.answered == 1
    assert sorted(r.sample_id for r in read_lines(run / SAMPLES, SampleRecord)) == [0, 1]


def test_a_torn_last_line_is_cut_and_a_response_without_code_is_written_as_is(tmp_path):
    book = write_book(tmp_path / "book", [{"response": "I cannot write this kernel, sorry."}])
    run = tmp_path / "run"
    argv = ["generate", "--tasks", str(checkout(tmp_path)), "--offline", str(book), "--out", str(run)]
    assert main(argv) == 0
    [record] = read_lines(run / SAMPLES, SampleRecord)
    assert not record.extracted and "not valid Python" in record.error
    assert (run / record.candidate).read_text() == "I cannot write this kernel, sorry."  # the judge fails it
    with (run / SAMPLES).open("a") as handle:
        handle.write('{"task_id": "level1/19_Bi')  # a kill in the middle of a line
    assert len(read_lines(run / SAMPLES, SampleRecord)) == 1
    folder = RunFolder(run)
    assert (run / SAMPLES).read_text().endswith("}\n")
    with pytest.raises(UsageError, match="another process is writing"):
        RunFolder(run)  # as a second generate on the same folder would
    folder.close()
    RunFolder(run).close()


def test_tasks_are_selected_by_source_level_and_name(tmp_path):
    builtin = select_tasks(["builtin:softmax_fp*", "builtin:rmsnorm_fp32"])
    assert {t.name for t in builtin} == {
        "rmsnorm_fp32",
        "softmax_fp32",
        "softmax_fp16",
        "softmax_fp32_large",
        "softmax_fp16_tail127",
        "softmax_fp32_long",
        "softmax_fp16_strided",
    }
    assert {t.level for t in builtin} == {BUILTIN_LEVEL} and builtin[0].task_id == "level0/1_rmsnorm_fp32"
    # An id stays the task's whatever the filter keeps.
    assert select_tasks(["builtin:all"], names=["softmax_fp32"])[0].problem_id == builtin[1].problem_id
    root = checkout(tmp_path)
    shutil.copy(TASKS / "tiny_bias_relu.py", root / "KernelBench" / "level1" / "3_Other.py")
    (root / "KernelBench" / "level2").mkdir()
    shutil.copy(TASKS / "tiny_bias_relu.py", root / "KernelBench" / "level2" / "7_Fused.py")
    assert [t.task_id for t in select_tasks([str(root)])] == ["level1/3_Other", "level1/19_BiasReLU", "level2/7_Fused"]
    assert [t.task_id for t in select_tasks([f"kernelbench:{root}"], levels=[2])] == ["level2/7_Fused"]
    assert [t.task_id for t in select_tasks([str(root)], names=["*Bias*", "7"])] == [
        "level1/19_BiasReLU",
        "level2/7_Fused",
    ]
    gpumode = select_tasks([str(ROOT / "tests" / "fixtures" / "gpumode")])
    assert {t.level for t in gpumode} == {GPUMODE_LEVEL} and "rowscale" in {t.name for t in gpumode}
    with pytest.raises(UsageError, match="no task matches"):
        select_tasks([str(root)], names=["nothing*"])
    with pytest.raises(UsageError, match="not a task source"):
        select_tasks([str(tmp_path / "missing")])
    problems = write_problems(select_tasks([str(root)], levels=[2]), tmp_path / "problems")
    (problems / "level2" / "7_Fused.py").write_text("# edited")
    with pytest.raises(UsageError, match="exists with other contents"):
        write_problems(select_tasks([str(root)], levels=[2]), problems)


def test_parquet_problems_are_selected_like_a_checkout(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    code = (TASKS / "tiny_bias_relu.py").read_text()
    rows = {"code": [code, code], "level": [1, 2], "name": ["19_ReLU.py", "Conv ReLU"], "problem_id": [19, 1]}
    pq.write_table(pa.table(rows), tmp_path / "level.parquet")
    tasks = select_tasks([str(tmp_path / "level.parquet")], levels=[2])
    assert [(t.task_id, t.task.text == code) for t in tasks] == [("level2/1_Conv_ReLU", True)]


def test_templates_check_their_placeholders_and_leave_code_braces_alone(tmp_path):
    template = prompt_template()
    text = generation_prompt(template, 'SHAPES = {"x": [1]}\nf"{n}"', "t")
    assert 'SHAPES = {"x": [1]}' in text and 'f"{n}"' in text and "{{" not in text and "ModelNew" in text
    path = tmp_path / "mine.txt"
    path.write_text("Task {{task_name}}:\n{{reference}}\n{{refrence}}")
    with pytest.raises(UsageError, match=r"unknown placeholder \{\{refrence\}\}"):
        prompt_template(path)
    path.write_text("no task at all")
    with pytest.raises(UsageError, match=r"must use \{\{reference\}\}"):
        prompt_template(path)
    path.write_text("Judge said: {{explanation}} ({{status}}, round {{round}} of {{rounds}})")
    rendered = feedback_template(path).render(explanation="FAIL", status="FAIL", round=1, rounds=3, task_name="t")
    assert rendered == "Judge said: FAIL (FAIL, round 1 of 3)"


def test_the_offline_backend_answers_the_same_request_the_same_way(tmp_path):
    book = ResponseBook(
        [Canned("t", "a", sample=0), Canned("t", "b", sample=1), Canned("t", "c", round=2), Canned("u", "d")], "x"
    )
    backend = OfflineBackend(book)

    def text(task, sample, round_=1):
        return backend.complete(ChatRequest((), "m", {}, task, sample, round_)).text

    assert [text("t", 0), text("t", 1), text("t", 5), text("t", 0), text("t", 3, 2), text("u", 9)] == list("abbacd")
    assert backend.complete(ChatRequest((), "m", {}, "t", 0, 3)).error.startswith("no canned response")
    assert Sampling(temperature=0.7, seed=10).for_sample(2) == {"temperature": 0.7, "seed": 12}


def test_a_runs_samples_replay_offline(generated, tmp_path):
    """A run's own samples.jsonl is a book: regenerating from it writes the same candidates."""
    run = tmp_path / "again"
    argv = ["generate", "--tasks", str(generated["run"] / "problems"), "--samples", "2"]
    assert main([*argv, "--offline", str(generated["run"] / SAMPLES), "--out", str(run)]) == 0
    for name in ("level_1_problem_19_sample_0_kernel.py", "level_1_problem_19_sample_1_kernel.py"):
        assert (run / name).read_text() == (generated["run"] / name).read_text()


def test_the_recorded_responses_of_the_gpu_check_are_well_formed():
    from kerneljudge.sources.candidate import extract_code

    book = ResponseBook.load(EXAMPLES / "responses")
    for task in select_tasks([f"builtin:{name}" for name in sorted({e.task for e in book.entries})]):
        assert book.task_in(task.task.text) == task.name  # the loopback server finds the task in its prompt
    for entry in book.entries:
        code, extracted = extract_code(entry.text)
        assert extracted and "class ModelNew" in code and "import triton" in code, entry.task
        compile(code, entry.task, "exec")


def test_improve_repairs_a_wrong_kernel_with_the_judges_explanation(tmp_path):
    round_1 = ResponseBook.load(write_book(tmp_path / "first", [{**WRONG, "round": 1, "sample": 0}]))
    both = ResponseBook.load(write_book(tmp_path / "both", [{**WRONG, "round": 1}, {**HONEST, "round": 2}]))
    run, store = tmp_path / "improve", tmp_path / "improve.db"
    argv = ["improve", "--tasks", str(checkout(tmp_path)), "--model", "m", "--rounds", "3", "--out", str(run)]
    argv += ["--store", str(store), "--seed", "0", "--retries", "0", *JUDGE_FLAGS]
    with ReplayServer(round_1) as server:  # has no second round: the chain is cut after its first (exit 1)
        assert main([*argv, "--base-url", server.url]) == 1
    [cut] = read_lines(run / FAILURES, RoundRecord)
    assert cut.round == 2 and cut.error.startswith("HTTP 400")
    with ReplayServer(both) as server:  # resumed: the conversation is rebuilt and round 2 asked for
        assert main([*argv, "--base-url", server.url]) == 0
        assert server.answered == 1
    first, second = read_lines(run / "rounds.jsonl", RoundRecord)
    assert (first.round, first.verdict.status, first.stop) == (1, "FAIL", None)
    assert first.explanation.startswith("FAIL") and first.explanation in second.prompt
    assert (second.round, second.verdict.status, second.stop) == (2, "PASS", "verified")
    assert first.reward == -1.0 and second.reward is not None and second.reward > first.reward
    assert (run / "round_1" / "level_1_problem_19_sample_0_kernel.py").is_file()
    assert (run / "round_2" / "level_1_problem_19_sample_0_kernel.py").read_text() == second.source
    with Store(store) as s:
        assert sorted(r.status for r in s) == ["FAIL", "PASS"]
    with ReplayServer(both) as server:  # once more: the chain is finished, nothing is asked
        assert main([*argv, "--base-url", server.url]) == 0 and server.answered == 0
    assert len(read_lines(run / "rounds.jsonl", RoundRecord)) == 2
