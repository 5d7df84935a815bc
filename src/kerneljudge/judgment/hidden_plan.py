"""The hidden plan of a judgment's correctness stage: everything a candidate must not be able to predict,
drawn once, up front, from one source of randomness (the operating system's unless a test injects one).

What it fixes (attack classes in docs/findings.md):
- the hidden trials' seeds and input distributions (H11: inputs the candidate has not seen, of other
  scales, offsets and tails, kept within the task's input contract by the reference's worker);
- which trials are replayed (the first public one and one hidden: H06, nondeterminism) and, on CUDA,
  which replay is repeated under perturbation (worker/correctness/perturb.py);
- the canary: the hidden trial whose new values arrive in the previous call's input storage (H01);
- the two hidden trials whose calls are traced on CUDA (kernel traces, H20): the candidate cannot know
  which of its calls the profiler watches;
- the seeds of the trials at hidden shapes; the shapes themselves are drawn from the same source once
  the task's family is known (`shapes`), and so, for a task that declares none, are the values its size
  integers are tried at to derive one (`propose_sizes`, tasks/size_classes.py: H09);
- in a timed judgment, the timing pool's seeds: fresh inputs that no checked worker saw (H26; since 0.3.4,
  judgment/stages/timing.pool_sets).

The public trials' seeds are KernelBench's, derived from the public seed. The plan is recorded
(`correctness.plan`): after the judgment it gives nothing away, and a judgment can be followed from it.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from typing import Any

import torch

from kerneljudge.tasks import size_classes

SEED_LIMIT = 2**32 - 1  # trial seeds: what torch.manual_seed accepts, as KernelBench draws them
DISTRIBUTION_KINDS = ("scaled_up", "scaled_down", "shifted", "heavy_tailed")


def kernelbench_trial_seeds(public_seed: int, count: int) -> list[int]:
    """The trial seeds KernelBench derives from its public seed (torch.randint after manual_seed)."""
    generator = torch.Generator().manual_seed(public_seed)
    return [int(torch.randint(0, SEED_LIMIT, (1,), generator=generator).item()) for _ in range(count)]


def hidden_distributions(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """Input distributions for the hidden trials (H11): the first as the task makes them, then one of each
    other kind in random order, with random strengths."""
    kinds = list(DISTRIBUTION_KINDS)
    rng.shuffle(kinds)
    plan: list[dict[str, Any]] = [{"kind": "standard"}]
    for i in range(1, count):
        kind = kinds[(i - 1) % len(kinds)]
        if kind == "scaled_up":
            plan.append({"kind": "scaled", "factor": round(2 ** rng.uniform(3, 6), 3)})
        elif kind == "scaled_down":
            plan.append({"kind": "scaled", "factor": round(2 ** -rng.uniform(3, 6), 5)})
        elif kind == "shifted":
            plan.append({"kind": "shifted", "offset": round(rng.choice((-1, 1)) * rng.uniform(2, 8), 3)})
        else:
            plan.append({"kind": "heavy_tailed", "sigma": round(rng.uniform(0.5, 1.0), 3)})
    return plan[:count]


@dataclass(frozen=True)
class Trial:
    kind: str  # "public" or "hidden"
    seed: int
    distribution: dict[str, Any]


@dataclass(frozen=True)
class HiddenPlan:
    trials: list[Trial]
    replay_at: frozenset[int] = frozenset()
    perturbed_at: int | None = None  # the replayed trial replayed again under perturbation (CUDA)
    canary_at: int | None = None
    trace_at: frozenset[int] = frozenset()  # traced on CUDA only
    shape_seeds: list[int] = field(default_factory=list)
    # The timing pool's seeds: fresh draws of the trials' distributions (judgment/stages/timing.pool_sets); none
    # natively
    timing_seeds: list[int] = field(default_factory=list)
    # The values drawn for a task's size integers to derive its family from ({} until then, or where the task
    # declares one): filled once, by `propose_sizes`, the dict the only state the plan keeps after it is drawn.
    size_proposals: dict[str, Any] = field(default_factory=dict)
    rng: random.Random = field(default_factory=secrets.SystemRandom, repr=False, compare=False)

    def propose_sizes(self, integers: dict[str, int]) -> dict[str, Any]:
        """The values to try a task's size integers at (`integers`: their public values), drawn from the
        plan's source by size class and recorded; the same ones when asked again."""
        if not self.size_proposals:
            self.size_proposals.update(size_classes.propose(integers, self.rng))
        return self.size_proposals

    def shapes(self, family: Any, count: int) -> list[dict[str, Any]]:
        """The hidden shapes of `family` to check (its `trial_shapes`), drawn from the plan's source."""
        if not count:
            return []
        return family.draw(family.size if family.every else count, self.rng)

    def shape_seed(self, number: int) -> int:
        """The seed of the `number`th trial at a hidden shape (a family checked at every shape has more of
        them than were drawn up front: the rest come from the same source)."""
        return self.shape_seeds[number] if number < len(self.shape_seeds) else self.rng.randrange(SEED_LIMIT)

    def as_record(self) -> dict[str, Any]:
        return (
            {
                "trials": [{"kind": t.kind, "seed": t.seed, "distribution": t.distribution} for t in self.trials],
                "replay_at": sorted(self.replay_at),
                "perturbed_at": self.perturbed_at,
                "canary_at": self.canary_at,
                "trace_at": sorted(self.trace_at),
                "shape_seeds": list(self.shape_seeds),
            }
            | ({"timing_seeds": list(self.timing_seeds)} if self.timing_seeds else {})
            | ({"size_proposals": self.size_proposals} if self.size_proposals else {})
        )


def draw(
    public_seed: int,
    public_trials: int,
    hidden_trials: int,
    shape_trials: int,
    native: bool,
    cuda: bool,
    rng: random.Random | None = None,
    timing_sets: int = 0,
) -> HiddenPlan:
    """The plan of one judgment. `native` (KernelBench's `off` mode): its public trials only, nothing hidden.
    `timing_sets`: seeds drawn for a timing pool of fresh inputs (drawn last: the rest of the plan is the same)."""
    rng = rng if rng is not None else secrets.SystemRandom()
    public = [Trial("public", s, {"kind": "standard"}) for s in kernelbench_trial_seeds(public_seed, public_trials)]
    if native:
        return HiddenPlan(public, rng=rng)
    seeds = [rng.randrange(SEED_LIMIT) for _ in range(hidden_trials)]
    hidden = [Trial("hidden", s, d) for s, d in zip(seeds, hidden_distributions(hidden_trials, rng), strict=True)]
    first = len(public)
    replay_at = frozenset({0, first + rng.randrange(hidden_trials)}) if hidden else frozenset({0})
    pool = range(first, first + len(hidden)) if hidden else range(len(public))
    return HiddenPlan(
        trials=public + hidden,
        replay_at=replay_at,
        perturbed_at=max(replay_at) if cuda else None,
        canary_at=first + 1 + rng.randrange(hidden_trials - 1) if hidden_trials >= 2 else None,
        trace_at=frozenset(rng.sample(pool, min(2, len(pool)))) if cuda else frozenset(),
        shape_seeds=[rng.randrange(SEED_LIMIT) for _ in range(shape_trials)],
        timing_seeds=[rng.randrange(SEED_LIMIT) for _ in range(timing_sets)],
        rng=rng,
    )
