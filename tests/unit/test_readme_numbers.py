"""Every figure the README takes from docs/BENCHMARKS.md is the figure BENCHMARKS states.

Each entry of FIGURES names a README passage (a regular expression whose groups are its
figures), the BENCHMARKS section the figures come from, and the passage there (its groups:
the same figures, in the same order). Both documents are read with their line breaks and
runs of spaces folded to one space, so re-wrapping a paragraph changes nothing. A figure is
the same when the source's figure, times `scale` (its unit into the README's), rounded to as
many decimals as the README gives, is the README's: `1.40` and `1.40`, `78.9` MiB and `79`,
`131.0 ms` and `0.13 s`. A figure changed in one document and not in the other fails here;
so does a README passage or a source that is no longer found (reworded: update the entry).

Also: each BENCHMARKS section the README names in quotes, and each `BENCHMARKS.md#anchor`
link in README and docs/, exists.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "BENCHMARKS.md"
NUMBER = re.compile(r"^-?\d[\d,]*(\.\d+)?$")


class Figure(NamedTuple):
    """README figures and their source in one BENCHMARKS section."""

    what: str
    readme: str  # regex over the folded README; its groups are the figures
    section: str  # a BENCHMARKS heading (its start); "generated": the `make bench` block
    source: str  # regex over that section, folded; groups: the same figures, same order
    scale: float = 1.0  # the source's unit in the README's (ms -> s: 0.001)


def _ratio(row: str, bold: bool) -> str:
    """The B/A cell of a row of the generated table: bold in Results, bracketed in Not
    results (the load tool set the pace: a bound)."""
    cell = r"\*\*([\d.]+)\*\*" if bold else r"\(([\d.]+)\)"
    return re.escape(f"| {row} |") + r"(?: [^|]* \|){3} " + cell + r" \|"


FIGURES = [
    Figure(
        "make bench's commit and date",
        r"`make bench` at (\w+) on a quiet 2-core VM, (\d{4}-\d\d-\d\d)\)",
        "generated",
        r"Generated (\d{4}-\d\d-\d\d) \d\d:\d\d UTC at commit \*\*(\w+)\*\*",
    ),
    Figure(
        "put, 50 connections x16 (a result)",
        r"puts with 50 pipelining connections at ([\d.]+)x beanstalkd",
        "generated",
        _ratio("put, 50 conns x16 pipelined (ops/s)", bold=True),
    ),
    Figure(
        "mixed, 50 connections (a bound)",
        r"mixed put/reserve/delete ([\d.]+)x",
        "generated",
        _ratio("mixed, 50 conns (ops/s)", bold=False),
    ),
    Figure(
        "reserve+delete (a bound)",
        r"reserve\+delete ([\d.]+)x",
        "generated",
        _ratio("reserve+delete, 50 conns (pre-filled) (ops/s)", bold=False),
    ),
    Figure(
        "multitube (a bound)",
        r"consumers watching tubes on both shards ([\d.]+)x",
        "generated",
        _ratio("multitube, 16 tubes / 64 conns (ops/s)", bold=False),
    ),
    Figure(
        "put, one client (a bound)",
        r"one client ([\d.]+)x \(pingpong",
        "generated",
        _ratio("put, 1 conn (ops/s)", bold=False),
    ),
    Figure(
        "pingpong (a bound)",
        r"one client [\d.]+x \(pingpong ([\d.]+)x,",
        "generated",
        _ratio("pingpong, 1 client (cycles/s)", bold=False),
    ),
    Figure(
        "one client with another core busy: put and pingpong",
        r"one client with another core busy ([\d.]+)x \(pingpong ([\d.]+)x\)",
        "generated",
        _ratio("put, 1 conn, one core busy (ops/s)", bold=False)
        + ".*"
        + _ratio("pingpong, 1 client, one core busy (cycles/s)", bold=False),
    ),
    Figure(
        "memory for 1M jobs",
        r"Memory for 1M ready jobs: ([\d.]+)x beanstalkd's RSS",
        "generated",
        r"B/A of RSS \*\*([\d.]+)\*\*",
    ),
    Figure(
        "how long make bench takes",
        r"`make bench` \(([\d.]+) minutes on the quiet 2-core VM, ([\d.]+) on a busy one",
        "shardq benchmarks",
        r"make bench # ([\d.]+) min on the quiet 2-core VM, ([\d.]+) min on a busy one",
    ),
    Figure(
        "an idle default server by RSS",
        r"against 4 processes and ([\d.]+) MiB now, by RSS",
        "Every hop over `links`",
        r"RSS summed over\s+the 4 processes \*\*[\d.]+ → ([\d.]+) MiB\*\*",
    ),
    Figure(
        "an idle default server by PSS",
        r"an idle default server takes about ([\d.]+) MiB",
        "Footprint at rest",
        r"\| \*\*default server\*\* \| \*\*[\d.]+\*\* \| \*\*([\d.]+)\*\* \|",
    ),
    Figure(
        "8 shards (the old default on 16 cores) idle by RSS",
        r"got 8 shards and 10 processes, which take ([\d.]+) MiB idle",
        "Footprint at rest",
        r"\| \*\*`--shards 8`\*\* [^|]*\| 10 \| \*\*([\d.]+)\*\* \|",
    ),
    Figure(
        "a shard process more, idle, by RSS and by PSS",
        r"a process more \(≈ ([\d.]+) MiB idle by RSS, ≈ ([\d.]+) MiB by PSS\)",
        "Footprint at rest",
        r"\| the 8-shard server less the default, per shard process more \| 1 \| ([\d.]+) \|"
        r" ([\d.]+) \|",
    ),
    Figure(
        "the hop to a shard of its own, per command",
        r"a hop \(≈ (\d+)–(\d+) µs more CPU a command",
        "What a command costs",
        r"\| the hop to a shard in another process, per command, [^|]*\| ≈ (\d+)–(\d+) µs",
    ),
    Figure(
        "2 serving processes, clients on tubes of their own",
        r"2 serving processes do ([\d.]+)x the work of one",
        "Scaling: 1, 2 and 4 serving processes",
        r"Clients on tubes of their own\*\* \(pingpong, N clients\): \*\*([\d.]+)x\*\* with 2",
    ),
    Figure(
        "2 serving processes, consumers watching every shard",
        r"consumers that each watch tubes on every shard they do ([\d.]+)x",
        "Scaling: 1, 2 and 4 serving processes",
        r"Consumers watching tubes on every shard\*\* \(multitube\): \*\*([\d.]+)x\*\* with 2",
    ),
    Figure(
        "the C generator against beanstalkd at 1eeb06f",
        r"At 1eeb06f \(.Every turn's shard calls and the wait in C.\): put 50×16 ([\d.]+)x, "
        r"reserve and delete ([\d.]+)x, mixed ([\d.]+)x with 50 connections and ([\d.]+)x with "
        r"200, multitube ([\d.]+)x; one client while a core is busy ([\d.]+)x, pingpong then "
        r"([\d.]+)x",
        "Every turn's shard calls and the wait in C",
        r"\| put 50×16 \|[^*]*\*\*([\d.]+)\*\*.*\| reserve\+delete 50 conns \|[^*]*\*\*([\d.]+)\*\*"
        r".*\| mixed 50 conns \|[^*]*\*\*([\d.]+)\*\*.*\| mixed 200 conns \|[^*]*\*\*([\d.]+)\*\*"
        r".*\| multitube 16 tubes, 64 conns \|[^*]*\*\*([\d.]+)\*\*.*put 1 conn \*\*([\d.]+)\*\*"
        r".*pingpong \*\*([\d.]+)\*\*",
    ),
    Figure(
        "the C generator against beanstalkd at 85908aa",
        r"At 85908aa \(.The jobs in blocks, the replies in place.\): put 50×16 ([\d.]+)x, "
        r"reserve and delete ([\d.]+)x, mixed ([\d.]+)x with 50 connections and ([\d.]+)x "
        r"with 200, multitube ([\d.]+)x; one client while a core is busy ([\d.]+)x, pingpong "
        r"then ([\d.]+)x; 1M ready jobs in ([\d.]+)x beanstalkd's RSS \(([\d.]+)x by PSS\)",
        "The jobs in blocks, the replies in place",
        r"\*\*([\d.]+)x\*\* beanstalkd's RSS.*\*\*([\d.]+)x\*\* by PSS"
        r".*\| put 50×16 \|[^*]*\*\*([\d.]+)\*\*"
        r".*\| reserve\+delete 50 conns \|[^*]*\*\*([\d.]+)\*\*"
        r".*\| mixed 50 conns \|[^*]*\*\*([\d.]+)\*\*.*\| mixed 200 conns \|[^*]*\*\*([\d.]+)\*\*"
        r".*\| multitube 16 tubes, 64 conns \|[^*]*\*\*([\d.]+)\*\*.*put 1 conn \*\*([\d.]+)\*\*"
        r".*pingpong \*\*([\d.]+)\*\*",
    ),
    Figure(
        "the C generator against beanstalkd at 5739250",
        r"At 5739250 \(.The engine's big ints and the turn's look-ups by name., a slow window "
        r"for the VM\): put 50×16 ([\d.]+)x, reserve and delete ([\d.]+)x, mixed ([\d.]+)x with "
        r"50 connections and ([\d.]+)x with 200, multitube ([\d.]+)x; one client while a core "
        r"is busy ([\d.]+)x, pingpong then ([\d.]+)x",
        "The engine's big ints and the turn's look-ups by name",
        r"\| put 50×16 \|[^*]*\*\*([\d.]+)\*\*.*\| reserve\+delete 50 conns \|[^*]*\*\*([\d.]+)\*\*"
        r".*\| mixed 50 conns \|[^*]*\*\*([\d.]+)\*\*.*\| mixed 200 conns \|[^*]*\*\*([\d.]+)\*\*"
        r".*\| multitube 16 tubes, 64 conns \|[^*]*\*\*([\d.]+)\*\*.*put 1 conn \*\*([\d.]+)\*\*"
        r".*pingpong \*\*([\d.]+)\*\*",
    ),
    Figure(
        "shardqd binds its port",
        r"It binds the port ≈ ([\d.]+) s after launch",
        "Third pass",
        r"\| port bound \(`connect`\) \| [\d.]+ ms \| ([\d.]+) ms \|",
        0.001,
    ),
    Figure(
        "shardqd answers its first command",
        r"answers its first command ≈ ([\d.]+) s after launch",
        "Third pass",
        r"\| first `stats` answered \| [\d.]+ ms \| ([\d.]+) ms \|",
        0.001,
    ),
    Figure(
        "shardq serve binds its port",
        r"which loads its CLI library first: ≈ ([\d.]+) s and",
        "Start-up",
        r"\| port bound \(`connect`\) \| (?:\d+, ){4}\d+ ms \| ([\d.]+) ms \|",
        0.001,
    ),
    Figure(
        "shardq serve answers its first command",
        r"≈ [\d.]+ s and ≈ ([\d.]+) s; beanstalkd",
        "Start-up",
        r"\| first `stats` answered \| (?:\d+, ){4}\d+ ms \| ([\d.]+) ms \|",
        0.001,
    ),
    Figure(
        "analyze, 90k events: CPU sized to the input and with Spark's defaults",
        r"\((\d+) s instead of (\d+) s, start-up included",
        "Spark's settings sized to the input",
        r"\| 90,001 events, Spark's defaults \| [^|]* \| \*\*([\d.]+) s\*\* \|.*"
        r"\| 90,001 events, sized to the input [^|]*\| [^|]* \| \*\*([\d.]+) s\*\* \|",
    ),
    Figure(
        "analyze, the floor: 1,000 events",
        r"fixed cost \(≈ ([\d.]+) s of CPU for 1,000 events\)",
        "A small input in a few seconds",
        r"the floor \| [^|]* \| \*\*([\d.]+) s\*\* \|",
    ),
    Figure(
        "beanstalkd answers its first command",
        r"beanstalkd: ([\d.]+) ms\)",
        "Importing less",
        r"\| beanstalkd 1\.12 \(one core\) \| ([\d.]+) ms \|",
    ),
]


def fold(text: str) -> str:
    """Line breaks and runs of spaces as one space."""
    return re.sub(r"\s+", " ", text)


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every Markdown heading outside fenced code."""
    out = []
    fenced = False
    for i, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#+) (.*)", line)):
            out.append((i, len(m.group(1)), m.group(2).strip()))
    return out


def section(text: str, title: str) -> str:
    """The section whose heading starts with `title`, up to the next heading of its level
    or higher; "generated": the block `make bench` writes."""
    if title == "generated":
        return text.split("<!-- bench:begin", 1)[1].split("<!-- bench:end", 1)[0]
    lines = text.splitlines()
    found = headings(text)
    for k, (i, level, name) in enumerate(found):
        if name.startswith(title):
            end = next((j for j, lv, _ in found[k + 1 :] if lv <= level), len(lines))
            return "\n".join(lines[i:end])
    raise AssertionError(f"docs/BENCHMARKS.md has no section {title!r}")


@cache
def documents() -> tuple[str, str]:
    return README.read_text(encoding="utf-8"), BENCHMARKS.read_text(encoding="utf-8")


def same(readme: str, source: str, scale: float) -> bool:
    """The README's figure is the source's, in the README's unit and precision."""
    if not (NUMBER.match(readme) and NUMBER.match(source)):
        return readme == source
    decimals = len(readme.partition(".")[2])
    value = float(source.replace(",", "")) * scale
    return f"{value:.{decimals}f}" == readme.replace(",", "")


def figures_of(pattern: str, text: str, where: str) -> list[str]:
    """The groups of the one match of `pattern` in `text`."""
    matches = list(re.finditer(pattern, fold(text)))
    assert len(matches) == 1, f"{where}: {len(matches)} matches of {pattern!r} (want 1)"
    return sorted(matches[0].groups(), key=order)


def order(figure: str) -> tuple[float, str]:
    """Figures compared in ascending order (a README range `0.53–0.58` against two rows)."""
    return (float(figure.replace(",", "")), "") if NUMBER.match(figure) else (float("inf"), figure)


@pytest.mark.parametrize("figure", FIGURES, ids=[f.what for f in FIGURES])
def test_a_readme_figure_is_its_source_in_benchmarks(figure: Figure) -> None:
    readme, benchmarks = documents()
    said = figures_of(figure.readme, readme, "README.md")
    source = figures_of(figure.source, section(benchmarks, figure.section), figure.section)
    assert len(said) == len(source)
    pairs = zip(said, source, strict=True)
    assert all(same(r, s, figure.scale) for r, s in pairs), (
        f"{figure.what}: README says {said}, docs/BENCHMARKS.md ({figure.section!r}) {source}"
    )


def test_sections_the_docs_name_exist() -> None:
    """`docs/BENCHMARKS.md, "Footprint at rest"` in README, CHANGELOG or docs/: every section
    named so is a heading (its start)."""
    _, benchmarks = documents()
    titles = [name for _, _, name in headings(benchmarks)]
    docs = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = [
        (doc.name, n)
        for doc in docs
        for n in re.findall(r'BENCHMARKS\.md,? "([^"]+)"', fold(doc.read_text(encoding="utf-8")))
    ]
    assert named
    missing = [(name, n) for name, n in named if not any(t.startswith(n) for t in titles)]
    assert not missing, f"BENCHMARKS sections named that do not exist: {missing}"


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces
    as `-`."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def test_links_into_benchmarks_find_their_heading() -> None:
    _, benchmarks = documents()
    anchors = {slug(name) for _, _, name in headings(benchmarks)}
    docs = [README, *sorted((ROOT / "docs").glob("*.md"))]
    links = [
        (doc.name, a)
        for doc in docs
        for a in re.findall(r"BENCHMARKS\.md#([\w\-]+)", doc.read_text(encoding="utf-8"))
    ]
    assert links
    broken = [(name, a) for name, a in links if a not in anchors]
    assert not broken, f"links to no heading of docs/BENCHMARKS.md: {broken}"
