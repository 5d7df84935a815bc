"""Spare worker pairs (judgment/stages/spare_pairs.py): started before the judgment that takes them, with no source
until
then, one judgment each, and never a dead or stale one."""

import threading
import time

from helpers import CANDIDATES, validate_record
from kerneljudge.config import JudgeConfig
from kerneljudge.judgment.gate import LaneGate
from kerneljudge.judgment.pipeline import judge
from kerneljudge.judgment.stages.spare_pairs import SparePairs
from kerneljudge.redteam import FIXTURES_DIR, TASKS_DIR
from kerneljudge.sandbox.process import WorkerLimits

CONFIG = JudgeConfig(device="cpu", timing=False, timeout_s=60.0, policy="practical")


def judged(task, candidate, spares):
    record = judge(task, candidate, CONFIG, spares=spares)
    validate_record(record)
    return record


def test_a_judgment_takes_the_spare_the_one_before_started_and_its_verdict_is_the_same(tiny_task):
    with SparePairs() as spares:
        first = judged(tiny_task, CANDIDATES / "honest_torch.py", spares)
        assert (spares.taken, spares.missed) == (0, 1)  # none to take yet; one started for the next
        (spare,) = spares.waiting(timeout_s=120)
        # A spare has run no task or candidate code: no source in its workspaces until a judgment takes it.
        for worker in spare.values():
            assert worker.proc.poll() is None and not worker.assigned and not worker.source_path.exists()
        second = judged(tiny_task, CANDIDATES / "honest_torch.py", spares)
        assert (spares.taken, spares.missed) == (1, 1)
        assert all(w.proc.poll() is not None for w in spare.values())  # it served that judgment and ended with it
        assert all(not w.workspace.root.exists() for w in spare.values())
        (left,) = spares.waiting(timeout_s=120)
    assert all(w.proc.poll() is not None and not w.workspace.root.exists() for w in left.values())  # closed
    for record in (first, second):
        assert record.status == "PASS" and record.verified, record.failure
        assert record.capabilities["os_sandbox"].status == first.capabilities["os_sandbox"].status
    # Its start happened before the judgment: the wait for its hellos is no longer the build's.
    assert second.stages_s["build.reference.hello"] < first.stages_s["build.reference.hello"]


def test_what_a_candidate_left_in_its_workspace_goes_with_it_and_the_next_judgment_starts_clean():
    task, honest = TASKS_DIR / "bias_relu.py", FIXTURES_DIR / "honest_torch.py"
    with SparePairs() as spares:
        judged(task, honest, spares)  # the first, to have a spare started
        writer = judged(task, FIXTURES_DIR / "disk_cache.py", spares)  # memoises its outputs on disk (H26)
        after = judged(task, honest, spares)
    assert spares.taken == 2
    assert writer.logs["candidate"].workspace_changes["created"], writer.logs["candidate"].workspace_changes
    assert after.status == "PASS" and after.verified
    assert not after.logs["candidate"].workspace_changes["created"]  # nothing of the writer's, nothing of its start


def test_a_spare_that_died_or_waited_too_long_is_not_taken(tiny_task):
    with SparePairs() as spares:
        judged(tiny_task, CANDIDATES / "honest_torch.py", spares)
        (spare,) = spares.waiting(timeout_s=120)
        spare["candidate"].kill()
        record = judged(tiny_task, CANDIDATES / "honest_torch.py", spares)
        assert record.status == "PASS" and (spares.taken, spares.missed) == (0, 2)
        assert all(w.proc.poll() is not None for w in spare.values())
        spares.max_idle_s = 0.0
        time.sleep(0.01)
        record = judged(tiny_task, CANDIDATES / "honest_torch.py", spares)
        assert record.status == "PASS" and (spares.taken, spares.missed) == (0, 3)


def test_a_batch_with_spare_workers_judges_as_without_and_leaves_no_worker_behind(tmp_path, tiny_task):
    import os
    import tempfile
    from pathlib import Path

    from kerneljudge.results.store import Store
    from kerneljudge.runs.batch import read_manifest, run_batch

    names = ["honest_torch", "wrong_values", "honest_slow"]
    lines = [f'{{"task": "{tiny_task}", "candidate": "{CANDIDATES / (name + ".py")}"}}' for name in names]
    (tmp_path / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    items = read_manifest(tmp_path / "manifest.jsonl")
    counts = {}
    for spare in (False, True):
        store = tmp_path / f"spare-{spare}.db"
        run_batch(items, CONFIG, store, progress=False, spare_workers=spare)
        with Store(store) as records:
            counts[spare] = sorted((r.candidate.name, r.status, r.failure_kind) for r in records)
    assert counts[True] == counts[False] and len(counts[True]) == 3, counts
    assert {status for _, status, _ in counts[True]} == {"PASS", "FAIL"}
    mine = [p for p in Path(tempfile.gettempdir()).glob(f"kerneljudge-*-p{os.getpid()}-*") if p.is_dir()]
    assert not mine, mine  # the spare started for a fourth judgment was closed with the batch


class FakeWorker:
    limits = WorkerLimits(start_timeout_s=20)

    def __init__(self, started: bool = True) -> None:
        self.closed, self.started, self.asked = False, started, False
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1

    def go(self) -> None:
        pass

    def has_answered(self) -> bool:  # its hello waits to be read once it has started
        return self.started

    class proc:  # noqa: N801 - stands in for the Popen
        @staticmethod
        def poll():
            return None

    def ask_exit(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def fake_starts():
    """The pairs started, and a start that makes a pair of fake workers that have said hello."""
    started: list[dict] = []

    def start():
        started.append({"reference": FakeWorker(), "candidate": FakeWorker()})
        return started[-1]

    return started, start


def test_spares_of_a_kind_no_longer_asked_for_are_closed_once_they_have_waited_too_long():
    started, start = fake_starts()
    with SparePairs(max_idle_s=3600) as spares:
        assert spares.take(("cpu", "timeout 60"), start) is None
        spares.waiting()
        spares.max_idle_s = 0.0
        time.sleep(0.01)
        assert spares.take(("cpu", "timeout 90"), start) is None  # another kind: the first kind's spare is stale
        assert all(w.closed for w in started[0].values())
        spares.waiting()
        assert not any(w.closed for w in started[1].values())
    assert all(w.closed for w in started[1].values())  # closed with the spares


def test_a_spare_still_starting_is_seen_as_starting_until_both_workers_said_hello():
    gate = threading.Event()
    pairs: list[dict] = []

    def start():
        gate.wait(10)
        pairs.append({"reference": FakeWorker(), "candidate": FakeWorker(started=False)})
        return pairs[-1]

    with SparePairs() as spares:
        assert not spares.starting()  # none asked for yet
        assert spares.take(("cpu",), start) is None
        assert spares.starting()  # its start is still running
        gate.set()
        while not pairs:
            time.sleep(0.01)
        assert spares.starting()  # started, but one worker has not said hello yet
        pairs[0]["candidate"].started = True
        spares.waiting()
        assert not spares.starting()


def test_a_spare_starting_is_lent_to_a_measurement_and_a_lane_waiting_for_it_keeps_none_back():
    lanes = LaneGate(["0", "0"])
    pairs: list[dict] = []

    def start():
        pairs.append({"reference": FakeWorker(), "candidate": FakeWorker(started=False)})
        return pairs[-1]

    with SparePairs(gate=lanes) as spares:
        assert spares.take(("cuda", "0"), start) is None  # the next judgment's pair starts now
        while not pairs:
            time.sleep(0.01)

        taken: list = []

        def lane():  # waits for the spare still starting: its hold lent to the measurement meanwhile
            with lanes.work():
                taken.append(spares.take(("cuda", "0"), start))

        thread = threading.Thread(target=lane)
        thread.start()
        time.sleep(0.1)
        with lanes.measure("0"):  # not held back by the lane waiting for its spare
            assert [w.stops for w in pairs[0].values()] == [1, 1]  # both stopped while this lane measures
            pairs[0]["candidate"].started = True
        thread.join(10)
        assert taken == [pairs[0]]


def test_a_judge_that_times_keeps_two_of_a_kind_started_and_a_take_starts_one_more():
    started, start = fake_starts()
    with SparePairs(depth=2) as spares:
        assert spares.take(("cuda", "0"), start) is None  # none yet: two started for the next takes
        assert len(spares.waiting()) == 2
        checked = spares.take(("cuda", "0"), start)
        timing = spares.take(("cuda", "0"), start)  # the timing pair, beside: started as long ago as the checked one
        assert (checked, timing) == (started[0], started[1])
        assert len(spares.waiting()) == 2 and len(started) == 4
    assert all(w.closed for pair in started[2:] for w in pair.values())


def test_a_timed_judgment_takes_its_timing_pair_started_and_greeted_before_it_began(tiny_task):
    config = CONFIG.with_(timing=True, timing_blocks=2, timing_samples=5)
    with SparePairs(depth=2) as spares:
        first = judged(tiny_task, CANDIDATES / "honest_torch.py", spares)
        waiting = spares.waiting(timeout_s=120)
        while spares.starting():  # both pairs' workers said hello: an idle judge's spares
            time.sleep(0.05)
        taken = (spares.taken, spares.missed)
        second = judge(tiny_task, CANDIDATES / "honest_torch.py", config, spares=spares)
        validate_record(second)
        assert (spares.taken - taken[0], spares.missed - taken[1]) == (2, 0)  # the checked pair and the timing pair
    assert len(waiting) == 2
    assert second.status == "PASS" and second.verified and second.timing.measured, second.failure
    assert first.status == "PASS"
    # The timing pair had said hello before the judgment began: its greeting is a read, not a start.
    assert second.stages_s["timing.reference.hello"] < 0.5 < first.stages_s["build.reference.hello"]
