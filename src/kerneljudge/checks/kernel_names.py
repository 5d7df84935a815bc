"""Kernel names as a trace reports them, read for what they say about a kernel's origin. Pure: names in, names out.

The profiler reports a CUDA kernel by its demangled C++ signature (`void at::native::vectorized_elementwise_kernel
<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, ...)`), sometimes by its mangled symbol
(`_ZN2at6native29vectorized_elementwise_kernel...`), a Triton or cuBLAS kernel by a bare identifier. From either
form `qualified_name` takes the function's own qualified name: template arguments, parameters and the return type
dropped, an anonymous namespace kept as the component `(anonymous namespace)`, an operator kept whole
(`operator()`, `operator<<`), a lambda as `{lambda()#1}`.

What a kernel is, is then decided by where its name puts it (checks/trace.py, `kind_of`):
- torch's own: the function lies in one of torch's namespaces (`at::`, `c10::`); torch's copy and fill kernels
  among them (`TORCH_MOVEMENT`: their functor or copy routine appears in the full name) are data movement;
- the candidate's: its bare function name is one its source declares, and the function is not in torch's
  namespaces (a Triton kernel's name is a bare identifier; a CUDA kernel's lies in the global, an anonymous or
  the candidate's own namespace);
- anything else is other work (cuBLAS, cuDNN, cuRAND, torch's compute).
A source that defines names inside torch's namespaces itself (`namespace at { ... }`, `claims_torch_namespaces`)
can make a kernel that reads like torch's: its judgment gives no kernel movement credit by name.
"""

from __future__ import annotations

import re

ANONYMOUS = "(anonymous namespace)"
TORCH_NAMESPACES = frozenset({"at", "c10", "at_cuda_detail"})
# torch's copy and fill kernels, by the routine or functor their instantiation names (ATen's Copy.cu, Fill.cu,
# Shape.cu): a copy (to another layout or dtype), a fill (zeros, ones, full), a concatenation.
TORCH_MOVEMENT = re.compile(r"FillFunctor|\w*copy_kernel_cuda|CatArrayBatchedCopy")
TORCH_NAMESPACE_DEFINED = re.compile(r"\bnamespace\s+(?:at|c10|at_cuda_detail)\s*(?:::|\{)")

_OPERATOR = re.compile(
    r"\boperator\s*(?:\(\)|\[\]|<=>|<<=|>>=|<<|>>|<=|>=|->\*|->|==|!=|&&|\|\||\+\+|--|new\[\]|delete\[\]|new\b|"
    r"delete\b|\"\"\s*\w+|[-+*/%^&|~!=<>,]=?|\s+[\w:]+[\s*&]*)"
)
_QUALIFIERS = re.compile(r"^(?:\s*(?:const|volatile|noexcept|&&|&))*\s*$")
_CLOSE = {"<": ">", "(": ")", "[": "]", "{": "}"}


def claims_torch_namespaces(source: str) -> bool:
    """Whether a candidate's source defines something inside one of torch's namespaces (any string or code in it)."""
    return TORCH_NAMESPACE_DEFINED.search(source) is not None


def qualified_name(name: str) -> tuple[str, ...]:
    """The components of a kernel's function name, outermost first: `void (anonymous namespace)::k<float>(float*)`
    -> ('(anonymous namespace)', 'k'); a mangled `_Z...` symbol read the same way; () where nothing can be read."""
    name = name.strip()
    if name.startswith("_Z"):
        return _mangled(name) or ()
    atoms: list[str] = []

    def atom(match: re.Match[str]) -> str:
        atoms.append(match.group(0).strip())
        return f"\x02{len(atoms) - 1}\x03"

    masked = _OPERATOR.sub(atom, name.replace(ANONYMOUS, "\x01"))
    groups = _top_groups(masked)
    params = next(
        (g for g in reversed(groups) if masked[g[0]] == "(" and _QUALIFIERS.match(masked[g[1] + 1 :])),
        None,
    )
    head = masked[: params[0]] if params is not None else masked
    head = re.sub(r"\)\s+(?:const|volatile)\b", ")", head).rstrip()
    spaces = [i for i, c in _top_chars(head) if c.isspace()]
    qualified = head[spaces[-1] + 1 :] if spaces else head
    parts = _split_top(qualified, "::")
    components = []
    for part in parts:
        part = _strip_trailing_groups(part).strip()
        for index, text in enumerate(atoms):
            part = part.replace(f"\x02{index}\x03", text)
        components.append(part.replace("\x01", ANONYMOUS))
    return tuple(components) if components and components[-1] else ()


def kernel_base(name: str) -> str:
    """The bare function name of a kernel: `void ns::k<T>(args)` -> `k`; '' where none can be read."""
    components = qualified_name(name)
    return components[-1] if components else ""


def in_torch(components: tuple[str, ...]) -> bool:
    """Whether a function of these name components (`qualified_name`) lies in one of torch's namespaces."""
    return len(components) > 1 and components[0] in TORCH_NAMESPACES


def identifiers(name: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", name))


def _top_chars(text: str) -> list[tuple[int, str]]:
    """The characters of `text` outside any bracket group, with their positions."""
    out, stack = [], []
    for i, c in enumerate(text):
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif stack and c == stack[-1]:
            stack.pop()
        elif not stack:
            out.append((i, c))
    return out


def _top_groups(text: str) -> list[tuple[int, int]]:
    """The outermost bracket groups of `text`: (position of the opener, position of its closer)."""
    groups, stack = [], []
    for i, c in enumerate(text):
        if c in _CLOSE:
            stack.append((_CLOSE[c], i))
        elif stack and c == stack[-1][0]:
            _, opened = stack.pop()
            if not stack:
                groups.append((opened, i))
    return groups


def _split_top(text: str, separator: str) -> list[str]:
    cuts = [i for i, c in _top_chars(text) if text.startswith(separator, i)]
    cuts = [i for k, i in enumerate(cuts) if k == 0 or i != cuts[k - 1] + 1]  # `::` once, not `:` twice
    pieces, begun = [], 0
    for cut in cuts:
        pieces.append(text[begun:cut])
        begun = cut + len(separator)
    return [*pieces, text[begun:]]


def _strip_trailing_groups(part: str) -> str:
    """A component without its template arguments and, for a function that owns a local name, its parameters."""
    part = part.rstrip()
    while part and part[-1] in ">)":
        groups = _top_groups(part)
        if not groups or groups[-1][1] != len(part) - 1 or groups[-1][0] == 0:
            break
        part = part[: groups[-1][0]].rstrip()
    return part


def _number(s: str, i: int) -> tuple[int, int]:
    j = i
    while j < len(s) and s[j].isdigit():
        j += 1
    return int(s[i:j]), j


def _mangled(s: str) -> tuple[str, ...] | None:
    """The components of an Itanium-mangled function's name (`_ZN2at6native4fillE...` -> at, native, fill)."""
    i = 3 if s.startswith("_ZL") else 2
    if i < len(s) and s[i].isdigit():
        length, i = _number(s, i)
        return (s[i : i + length],) if length else None
    if i >= len(s) or s[i] != "N":
        return None
    i += 1
    while i < len(s) and s[i] in "rVKRO":
        i += 1
    components: list[str] = []
    while i < len(s) and s[i] != "E":
        c = s[i]
        if c.isdigit():
            length, i = _number(s, i)
            text = s[i : i + length]
            components.append(ANONYMOUS if text.startswith("_GLOBAL__N") else text)
            i += length
        elif s.startswith("St", i):
            components.append("std")
            i += 2
        elif c == "S":
            end = s.find("_", i)
            if end < 0:
                return None
            components.append("?")
            i = end + 1
        elif c == "I":
            i = _skip_arguments(s, i)
        elif c in "CD" and i + 1 < len(s) and s[i + 1] in "0123456" and components:
            components.append(components[-1] if c == "C" else "~" + components[-1])
            i += 2
        elif s.startswith("Ut", i) or s.startswith("Ul", i):
            closing = s.find("E", i) if s[i + 1] == "l" else i
            end = s.find("_", closing)
            if end < 0:
                return None
            components.append("{lambda}" if s[i + 1] == "l" else "{unnamed type}")
            i = end + 1
        elif c.islower() and i + 1 < len(s) and s[i + 1].isalpha():
            components.append("operator" + s[i : i + 2])
            i += 2
        else:
            return None
    return tuple(components) if components else None


def _skip_arguments(s: str, i: int) -> int:
    """The position after the template arguments `I...E` that begin at `i` (bracketed by I/N/X/J/F ... E)."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c.isdigit():
            length, i = _number(s, i)
            i += length
            continue
        if c == "L" and not s.startswith("L_Z", i):
            end = s.find("E", i)
            i = end + 1 if end >= 0 else len(s)
            if depth == 0:
                return i
            continue
        if c in "INXJF" or s.startswith(("DT", "Dt"), i):
            depth += 1
            i += 2 if c == "D" else 1
            continue
        if c == "E":
            depth -= 1
            i += 1
            if depth <= 0:
                return i
            continue
        if c in "ST" or s.startswith("Dv", i) or c == "A":
            end = s.find("_", i)
            i = end + 1 if end >= 0 else len(s)
            continue
        i += 2 if c == "D" else 1
    return i
