"""Input contracts: hidden distributions keep every property a kernel may rely on, and only those."""

import json

import pytest
import torch

from kerneljudge.worker.correctness import contracts, input_properties
from kerneljudge.worker.correctness.contracts import KINDS, allows, read_declared, reshape
from kerneljudge.worker.correctness.input_properties import PROPERTIES, detect

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
VARIANTS = (
    {"kind": "scaled", "factor": 45.3},
    {"kind": "scaled", "factor": 0.02},
    {"kind": "shifted", "offset": 5.2},
    {"kind": "shifted", "offset": -3.1},
    {"kind": "heavy_tailed", "sigma": 0.8},
)


def _cases() -> dict[str, tuple[torch.Tensor, set[str]]]:
    """Inputs as tasks make them, with the properties each must show."""
    g = torch.Generator().manual_seed(1234)
    a = torch.randn(16, 16, generator=g)
    rows = torch.randn(8, 10, generator=g)
    return {
        "randn": (torch.randn(40, 30, generator=g), {"finite"}),
        "lower": (torch.tril(a), {"lower_triangular", "zeros", "finite"}),
        "upper": (torch.triu(a), {"upper_triangular", "zeros", "finite"}),
        "diagonal": (torch.diag(a[0]), {"lower_triangular", "upper_triangular", "symmetric", "zeros", "finite"}),
        "symmetric": (a + a.T, {"symmetric", "finite"}),
        "spd": (a @ a.T + 16 * torch.eye(16), {"symmetric", "finite"}),
        "softmax": (rows.softmax(-1), {"row_stochastic", "unit_interval", "unit_range", "positive", "nonnegative"}),
        "rand": (torch.rand(50, generator=g), {"unit_interval", "unit_range", "positive", "nonnegative"}),
        "targets": (
            torch.randint(0, 2, (20,), generator=g).float() * 2 - 1,
            {"integer_valued", "two_valued", "unit_range"},
        ),
        "sorted": (torch.sort(torch.randn(4, 16, generator=g)).values, {"sorted", "finite"}),
        "descending": (torch.sort(torch.randn(30, generator=g), descending=True).values, {"sorted", "finite"}),
        "abs": (torch.randn(100, generator=g).abs(), {"positive", "nonnegative", "finite"}),
        "negative": (-torch.randn(100, generator=g).abs(), {"negative", "nonpositive", "finite"}),
        "clamped": (torch.randn(100, generator=g).clamp(0, 1), {"zeros", "unit_interval", "unit_range", "nonnegative"}),
        "normalized": (torch.nn.functional.normalize(rows, dim=-1), {"unit_norm", "unit_range", "finite"}),
        "dropout mask": (
            (torch.rand(10, 10, generator=g) > 0.3).float() / 0.7,
            {"two_valued", "zeros", "nonnegative"},
        ),
        "constant": (
            torch.full((5, 5), 3.0),
            {"constant", "integer_valued", "symmetric", "sorted", "positive", "nonnegative", "finite"},
        ),
    }


CASES = _cases()
for _, expected in CASES.values():
    expected.add("finite")


@pytest.fixture(autouse=True)
def seeded():
    """Small random inputs show a property by chance now and then (ten draws of randn all within [-1, 1], 2%):
    every test draws from one seed."""
    torch.manual_seed(0)


def true_properties(found: dict) -> set[str]:
    return {name for name in PROPERTIES if found.get(name) is True}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", CASES)
def test_detect_finds_each_property_a_task_guarantees(name, dtype):
    x, expected = CASES[name]
    found = detect(x.to(dtype))
    assert found["kind"] == "float"
    assert true_properties(found) == expected
    assert found["min"] == float(x.to(dtype).min()) and found["max"] == float(x.to(dtype).max())
    json.dumps(found, allow_nan=False)


def test_detect_names_integer_bool_and_plain_values_which_are_never_transformed():
    assert detect(torch.randint(0, 10, (32,))) == {"kind": "integer"}
    assert detect(torch.rand(8) > 0.5) == {"kind": "bool"}
    assert detect(3.5) == {"kind": "value"} and detect(None) == {"kind": "value"}
    for x in (torch.randint(0, 10, (32,)), torch.rand(8) > 0.5, 3.5):
        assert allows(detect(x), VARIANTS[0]) is not None


def test_a_single_value_or_an_empty_tensor_is_a_parameter_left_alone():
    for x in (torch.tensor(0.7), torch.tensor([2.5]), torch.empty(0, 4)):
        found = detect(x)
        assert found["constant"] and not found["sorted"] and not found["symmetric"]
        assert all(allows(found, v) for v in VARIANTS)


def test_inf_and_nan_are_sentinels_no_variant_touches():
    mask = torch.zeros(4, 4).masked_fill(torch.ones(4, 4).triu(1).bool(), float("-inf"))
    nan = torch.randn(10).index_fill(0, torch.tensor([3]), float("nan"))
    for x in (mask, nan):
        found = detect(x)
        assert not found["finite"] and found["min"] is None
        assert all("inf or NaN" in allows(found, v) for v in VARIANTS)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_symmetry_tolerance_covers_a_gram_matrix_not_a_large_random_one(dtype):
    a = torch.randn(512, 512).to(dtype)
    assert detect(a @ a.T)["symmetric"] and not detect(a.abs())["symmetric"]


def test_chance_zeros_are_not_structure():
    """A float16 draw that underflowed to 0.0 does not stop a shift; a quarter of zeros does."""
    x = torch.randn(2**21, generator=torch.Generator().manual_seed(0)).half()
    x[5] = 0
    assert not detect(x)["zeros"]
    x[: 2**19] = 0
    assert detect(x)["zeros"]


# Whether each variant keeps each property: scaled up, scaled down, shifted up, shifted down, heavy tails.
KEEPS = {
    "zeros": (1, 1, 0, 0, 1),
    "two_valued": (1, 1, 1, 1, 0),
    "positive": (1, 1, 1, 0, 1),
    "negative": (1, 1, 0, 1, 1),
    "nonnegative": (1, 1, 1, 0, 1),
    "nonpositive": (1, 1, 0, 1, 1),
    "integer_valued": (0, 0, 0, 0, 0),
    "unit_interval": (0, 1, 0, 0, 0),
    "unit_range": (0, 1, 0, 0, 0),
    "bounded": (0, 1, 0, 0, 0),
    "row_stochastic": (0, 0, 0, 0, 0),
    "unit_norm": (0, 0, 0, 0, 0),
    "symmetric": (1, 1, 0, 0, 0),
    "lower_triangular": (1, 1, 0, 0, 1),
    "upper_triangular": (1, 1, 0, 0, 1),
    "sorted": (1, 1, 1, 1, 0),
    "finite": (1, 1, 1, 1, 1),
    "constant": (0, 0, 0, 0, 0),
}


def test_the_table_covers_every_property():
    assert set(KEEPS) == set(PROPERTIES)


@pytest.mark.parametrize("index", range(len(VARIANTS)))
@pytest.mark.parametrize("name", sorted(KEEPS))
def test_allows_each_variant_only_where_it_keeps_the_property(name, index):
    props = {"kind": "float", "finite": True, "min": -1.0, "max": 1.0, name: True}
    reason = allows(props, VARIANTS[index])
    assert (reason is None) == bool(KEEPS[name][index]), reason
    if reason is not None and name != "constant":
        assert name in reason


def test_bounded_scales_down_only_a_range_around_zero():
    props = {"kind": "float", "finite": True, "bounded": True, "min": 0.5, "max": 2.0}
    assert allows(props, {"kind": "scaled", "factor": 0.1}) is not None


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", CASES)
def test_reshape_keeps_every_property_or_leaves_the_input_as_made(name, dtype):
    x = CASES[name][0].to(dtype)
    before = true_properties(detect(x))
    for seed, variant in enumerate(VARIANTS):
        (y,), report = reshape(torch, [x], variant, seed)
        if report["applied_to"] == [0]:
            assert y.dtype == dtype and y.shape == x.shape and not torch.equal(y, x)
            assert before <= true_properties(detect(y)), (variant, before - true_properties(detect(y)))
        else:
            assert y is x and report["kept_as_made"]["0"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_plain_randn_still_gets_every_kind(dtype):
    inputs = [torch.randn(64, 48, dtype=dtype), torch.randn(100, dtype=dtype)]
    for variant in VARIANTS:
        _, report = reshape(torch, inputs, variant, 7)
        assert report["applied_to"] == [0, 1] and report["kept_as_made"] == {}, report
    assert {v["kind"] for v in VARIANTS} == set(KINDS)


def test_structured_inputs_get_what_keeps_their_structure():
    applied = {
        name: [i for i, v in enumerate(VARIANTS) if reshape(torch, [CASES[name][0]], v, 0)[1]["applied_to"]]
        for name in ("lower", "spd", "softmax", "rand", "sorted", "abs")
    }
    assert applied == {
        "lower": [0, 1, 4],
        "spd": [0, 1],
        "softmax": [],
        "rand": [1],
        "sorted": [0, 1, 2, 3],
        "abs": [0, 1, 2, 4],
    }


def test_refused_inputs_are_the_inputs_as_made_and_the_report_says_why():
    x, labels, mask = torch.tril(torch.randn(6, 6)), torch.randint(0, 5, (6,)), torch.rand(6) > 0.5
    out, report = reshape(torch, [x, labels, mask, 2.0], {"kind": "shifted", "offset": 3.0}, 1)
    assert all(a is b for a, b in zip(out, [x, labels, mask, 2.0], strict=True))
    assert report["kind"] == "shifted" and report["offset"] == 3.0 and report["applied_to"] == []
    assert report["kept_as_made"]["0"] == "shifted by 3 std does not keep lower_triangular"
    assert set(report["kept_as_made"]) == {"0", "1", "2", "3"}
    assert json.loads(json.dumps(report)) == report


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_strided_input_keeps_its_layout_dtype_and_device(dtype):
    for x in (torch.randn(8, 16, dtype=dtype)[:, ::2], torch.randn(8, 6, dtype=dtype).t()):
        for variant in VARIANTS:
            (y,), report = reshape(torch, [x], variant, 3)
            assert report["applied_to"] == [0]
            assert y.stride() == x.stride() and y.dtype == dtype and y.device == x.device


def test_heavy_tails_draw_what_the_hidden_trials_always_drew():
    inputs, seed, sigma = [torch.randn(5, 7), torch.randn(33)], 99, 0.6
    out, _ = reshape(torch, inputs, {"kind": "heavy_tailed", "sigma": sigma}, seed)
    generator = torch.Generator().manual_seed(seed ^ 0x5EED)
    for x, y in zip(inputs, out, strict=True):
        tails = torch.randn(x.shape, generator=generator, dtype=torch.float64)
        assert torch.equal(y, (x.double() * torch.exp(sigma * tails)).float())
    x = inputs[0]
    (shifted,), _ = reshape(torch, [x], {"kind": "shifted", "offset": -2.5}, seed)
    assert torch.equal(shifted, (x.double() - 2.5 * float(x.double().std())).float())


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_variants_applied_in_blocks_give_what_the_whole_tensor_gives(monkeypatch, dtype):
    """Hidden distributions run in blocks (patched small here: 4 GiB float64 copies of a 6 GiB input ran an
    H200 out of memory); the input as made is never written, and the tails are one stream in either worker."""
    x = (torch.randn(9, 13, dtype=torch.float64) * 3 + 1).to(dtype)
    made = x.clone()
    monkeypatch.setattr(contracts, "CHUNK", 7)
    monkeypatch.setattr(input_properties, "CHUNK", 7)
    (scaled,), _ = reshape(torch, [x], {"kind": "scaled", "factor": 45.3}, 0)
    assert torch.equal(scaled, (x.double() * 45.3).to(dtype))
    (shifted,), _ = reshape(torch, [x], {"kind": "shifted", "offset": -2.5}, 0)
    expected = (x.double() - 2.5 * float(x.double().std())).to(dtype)
    assert torch.allclose(shifted.double(), expected.double(), rtol=1e-6, atol=0)
    tails = [reshape(torch, [x, x.t()], {"kind": "heavy_tailed", "sigma": 0.7}, 11)[0] for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(*tails, strict=True))
    assert tails[0][1].stride() == x.t().stride() and not torch.equal(tails[0][0], tails[0][1].t())
    assert torch.equal(x, made)


def test_rounding_that_breaks_a_property_falls_back_to_the_input_as_made():
    tiny = torch.full((4, 4), 1e-7, dtype=torch.float16) * torch.arange(1, 17, dtype=torch.float16).view(4, 4)
    (y,), report = reshape(torch, [tiny], {"kind": "scaled", "factor": 0.02}, 0)
    assert y is tiny and "broke positive once rounded to float16" in report["kept_as_made"]["0"]
    big = torch.randn(64, dtype=torch.float16) * 3000
    (y,), report = reshape(torch, [big], {"kind": "scaled", "factor": 45.3}, 0)
    assert y is big and "broke finite" in report["kept_as_made"]["0"]


def test_blocks_see_what_the_whole_tensor_shows(monkeypatch):
    """Detection in blocks (patched small) agrees with one block, across block edges too."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(9, 9, generator=g)
    edge = torch.sort(torch.randn(50, generator=g)).values
    edge[[6, 7]] = edge[[7, 6]]  # out of order only across the first edge of blocks of 7
    late = torch.tril(a)
    late[7, 8] = 1.0  # one non-zero above the diagonal in a late row
    tensors = [x for x, _ in CASES.values()] + [
        torch.tril(torch.randn(3, 9, 9, generator=g)),
        a + a.T,
        torch.sort(torch.randn(50, generator=g)).values,
        torch.randn(4, 20, generator=g).softmax(-1),
        edge,
        late,
    ]
    whole = [detect(x) for x in tensors]
    monkeypatch.setattr(input_properties, "CHUNK", 7)
    assert [detect(x) for x in tensors] == whole
    assert whole[-6]["lower_triangular"] and whole[-5]["symmetric"] and whole[-4]["sorted"]
    assert whole[-3]["row_stochastic"] and not whole[-2]["sorted"] and not whole[-1]["lower_triangular"]


def test_a_fixed_input_is_never_transformed():
    x = torch.randn(64)
    out, report = reshape(torch, [x, x.clone()], VARIANTS[0], 0, declared={0: "fixed"})
    assert out[0] is x and report["applied_to"] == [1]
    assert report["kept_as_made"] == {"0": "the task declares this input fixed"}


def test_a_declared_property_holds_when_the_sample_does_not_show_it():
    x = torch.randn(6, 6)
    declared = {0: ["symmetric"]}
    assert reshape(torch, [x], VARIANTS[2], 0, declared=declared)[1]["applied_to"] == []
    assert reshape(torch, [x], VARIANTS[4], 0, declared=declared)[1]["applied_to"] == []
    assert reshape(torch, [x], VARIANTS[0], 0, declared=declared)[1]["applied_to"] == [0]


def test_declared_distributions_limit_the_kinds_for_every_input():
    inputs = [torch.randn(64), torch.randn(64)]
    declared = {"distributions": ["scaled"]}
    assert reshape(torch, inputs, VARIANTS[0], 0, declared=declared)[1]["applied_to"] == [0, 1]
    out, report = reshape(torch, inputs, VARIANTS[4], 0, declared=declared)
    assert out[0] is inputs[0] and report["kept_as_made"]["1"] == "the task allows only: scaled"


def test_read_declared_normalises_and_is_idempotent():
    declared = read_declared({1: ("sorted", "nonnegative", "sorted"), 0: "fixed", "distributions": ("shifted",)})
    assert declared == {0: "fixed", 1: ["nonnegative", "sorted"], "distributions": ["shifted"]}
    assert read_declared(declared) == declared
    assert read_declared(None) == {"distributions": list(KINDS)}


@pytest.mark.parametrize(
    "obj",
    [
        [0, "fixed"],
        {0: ["triangular"]},
        {0: "frozen"},
        {0: "symmetric"},
        {-1: ["sorted"]},
        {"0": ["sorted"]},
        {True: ["sorted"]},
        {"distributions": ["scaled", "rotated"]},
        {"distributions": "scaled"},
        {"inputs": {}},
    ],
)
def test_a_malformed_declaration_raises_one_line(obj):
    with pytest.raises(ValueError) as info:
        read_declared(obj)
    assert "\n" not in str(info.value) and "INPUT_CONTRACT" in str(info.value)


def test_an_unknown_property_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown property 'triangular'; known: constant, integer_valued"):
        read_declared({0: ["triangular"]})


def test_a_declaration_beyond_the_inputs_and_a_malformed_variant_raise():
    with pytest.raises(ValueError, match="names input 3"):
        reshape(torch, [torch.randn(4)], VARIANTS[0], 0, declared={3: "fixed"})
    for variant in (
        {"kind": "rotated"},
        {"kind": "scaled", "factor": -2.0},
        {"kind": "scaled"},
        {"kind": "heavy_tailed", "sigma": float("nan")},
    ):
        with pytest.raises(ValueError):
            reshape(torch, [torch.randn(4)], variant, 0)
