"""Write one page per benchmark result (docs/results/*.md) that includes what the benchmark wrote.

Run by ``conf.py`` before every build. The pages hold no number of their own: each
copies in the ``summary.md`` a benchmark script wrote under ``benchmarks/results/``
(escaping the bars of ``|Y|`` inside table cells, which would split the cells) and
shows its figures, so a rerun of the benchmark is what changes the site.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = ROOT / "benchmarks" / "results"
OUT = HERE / "results"

#: Which script or command writes each result (the default: benchmarks/NAME.py).
PRODUCERS = {
    "diskpca_words": "python benchmarks/diskpca_words.py",
    "dask": "python benchmarks/dask_overhead.py",
}


def producer(name: str) -> str:
    if name in PRODUCERS:
        return PRODUCERS[name]
    top = name.split("/")[0]
    if (ROOT / "benchmarks" / f"{top}.py").exists():
        return f"python benchmarks/{top}.py"
    return f"kernelscale bench {top} --plot"


def summaries() -> list[tuple[str, Path]]:
    """(page name, summary file) for every committed benchmark summary."""
    found = []
    for summary in sorted(RESULTS.rglob("summary.md")):
        run = summary.parent.relative_to(RESULTS)
        if "quick" in run.parts:
            continue
        found.append(("_".join(run.parts), summary))
        for extra in sorted(summary.parent.glob("*.md")):  # e.g. budget/hybrids.md
            if extra.name != "summary.md":
                found.append(("_".join((*run.parts, extra.stem)), extra))
    for table in sorted(RESULTS.glob("*.md")):
        found.append((table.stem, table))
    return found


def title_of(summary: Path) -> tuple[str, int]:
    """The summary's first heading and the line after it (what the page includes)."""
    lines = summary.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# "):
            title = line[2:].strip()
            meta = summary.parent / "meta.json"
            if title == summary.parent.name and meta.exists():
                # An experiment of the paper-001 harness: name it by what it reproduces.
                description = json.loads(meta.read_text()).get("description", "")
                head = re.split(r" \(n =|\. |, error against|; ", description)[0]
                head = head.rstrip(".").replace(": ", ", ", 1)
                title = f"{title}: {head}" if head else title
            return title, i + 1
    return summary.parent.name, 0


SEPARATOR_ROW = re.compile(r"^\|[\s:|-]+\|$")


def escape_cell_pipes(line: str) -> str:
    """Escape the bars of ``|Y|`` inside a Markdown table's cells (``chosen (|Y|)``).

    The summaries write cells as ``| a | b |``: a bar between two spaces, or at either
    end of the line, separates cells; any other bar is text and must be ``\\|``, or the
    row splits into too many cells and the table does not render.
    """
    stripped = line.strip()
    if not (stripped.startswith("|") and stripped.endswith("|")) or SEPARATOR_ROW.match(stripped):
        return line
    chars = list(stripped)
    out = []
    for i, ch in enumerate(chars):
        boundary = i in (0, len(chars) - 1) or (chars[i - 1] == " " and chars[i + 1] == " ")
        out.append(ch if ch != "|" or boundary else "\\|")
    return "".join(out)


#: The results index's sections: (caption, page-name prefixes), the first match wins.
GROUPS = [
    ("Paper 001: distributed kernel PCA", ("diskpca",)),
    ("Paper 002: vertical one-shot kernel PCA", ("vertical",)),
    ("Paper 003: federated kernel k-means", ("federated",)),
    ("Paper 004: streaming kernel PCA", ("streaming",)),
    ("The library: budget, samplers, scale, Dask", ("",)),
]


def groups(names: list[str]) -> list[tuple[str, list[str]]]:
    out: dict[str, list[str]] = {caption: [] for caption, _ in GROUPS}
    for name in names:
        caption = next(c for c, prefixes in GROUPS if name.startswith(prefixes))
        out[caption].append(name)
    return [(caption, members) for caption, members in out.items() if members]


#: Figures wider than this (pixels) are shown at the page's width, not the text column's.
WIDE = 1100


def png_width(path: Path) -> int:
    """The width of a PNG, from its header (bytes 16-19 of the IHDR chunk)."""
    with open(path, "rb") as f:
        head = f.read(24)
    return int.from_bytes(head[16:20], "big") if head[:8] == b"\x89PNG\r\n\x1a\n" else 0


def write_pages() -> list[str]:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir()
    names = []
    for name, summary in summaries():
        title, start = title_of(summary)
        folder = summary.parent.relative_to(ROOT).as_posix()
        lines = [f"# {title}", "",
                 f"Written by `{producer(name)}` into `{folder}/`"
                 + (" (this page shows its `summary.md`; the CSVs there hold every run)."
                    if summary.name == "summary.md"
                    else f" (this page shows its `{summary.name}`)."),
                 ""]
        if summary.name == "summary.md":
            for image in sorted(summary.parent.glob("*.png")):
                rel = Path("..", "..", image.relative_to(ROOT)).as_posix()
                lines += [f"```{{image}} {rel}", f":alt: {image.stem}", ":width: 100%",
                          *([":class: wide-figure"] if png_width(image) > WIDE else []),
                          "```", ""]
        body = summary.read_text().splitlines()[start:]
        lines += [escape_cell_pipes(line) for line in body] + [""]
        (OUT / f"{name}.md").write_text("\n".join(lines))
        names.append(name)
    index = ["# Benchmark results", "",
             "Every page below shows what one benchmark script wrote: its summary, with the "
             "verdicts on the papers' claims, and its figures. Rerun the script and rebuild "
             "the site to update a page. The user guide quotes these pages; "
             "`tests/test_docs_numbers.py` checks that every number it quotes is here.", ""]
    for caption, members in groups(names):
        index += [f"## {caption}", "", "```{toctree}", ":maxdepth: 1", "", *members, "```", ""]
    (OUT / "index.md").write_text("\n".join(index))
    return names
