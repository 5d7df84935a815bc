"""docs/attacks.md names every attack class the catalog and the red team use, with the same codes and
fixtures: the repository's own account of the classes, kept in step with the code."""

import re
from collections import defaultdict

from helpers import ROOT
from kerneljudge.checks.catalog import CATALOG
from kerneljudge.redteam.suite import FIXTURES

ROW = re.compile(r"^\| (H\d\d) \| [^|]+ \| [^|]+ \| ([^|]+) \| ([^|]+) \|$")


def documented():
    rows = {}
    for line in (ROOT / "docs" / "attacks.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = (match.group(2).strip(), match.group(3).strip())
    return rows


def listed(cell):
    return set() if cell == "-" else {part.strip() for part in cell.split(",")}


def codes_of(cell):
    found = set()
    for part in listed(cell):
        span = re.fullmatch(r"KJ-R06(\d)-KJ-R06(\d)", part)
        found |= {f"KJ-R06{n}" for n in range(int(span[1]), int(span[2]) + 1)} if span else {part}
    return found


def test_every_class_of_the_code_is_documented_with_its_codes_and_fixtures():
    rows = documented()
    codes, fixtures = defaultdict(set), defaultdict(set)
    for code, entry in CATALOG.items():
        for attack in entry.attacks:
            codes[attack].add(code)
    for fixture in FIXTURES:
        if fixture.attack != "honest":
            fixtures[fixture.attack].add(fixture.name)
    assert set(codes) | set(fixtures) <= set(rows), sorted(set(codes) | set(fixtures) - set(rows))
    for attack, (code_cell, fixture_cell) in rows.items():
        assert codes_of(code_cell) == codes[attack], attack
        assert listed(fixture_cell) == fixtures[attack], attack
    # Every class but H25 (a property of the timing method) has a fixture.
    assert {a for a, (_, f) in rows.items() if f == "-"} == {"H25"}
