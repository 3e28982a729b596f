"""Numbers quoted in the README and the docs agree with the results files they cite.

A measured number must not be retyped into prose where a rerun can leave it stale. The
pages that show results include the tables the benchmarks write; what prose still quotes
is checked here, paragraph by paragraph:

* A paragraph (or table, or list item) **cites** results when it names a results path
  (``benchmarks/results/NAME/...``, ``results/NAME``), a benchmark script
  (``benchmarks/NAME.py``) or an experiment (``kernelscale bench NAME``). A heading that
  cites passes its citation to every paragraph of its section, and so does an HTML
  comment right under a heading (``<!-- cites: benchmarks/results/NAME -->``, invisible
  on the page); a paragraph that cites passes its citation to the list items and tables
  that follow it.
* In a citing paragraph, every number that looks measured (a decimal ``0.236``, ``5.05``,
  ``4.9e-4``; a grouped integer ``587,495``; a count with a suffix ``228k``, ``4.78 M``)
  must appear in one of the cited results files, up to the rounding the prose shows:
  ``0.24`` matches 0.2361, ``228k`` matches 227,562, ``37%`` matches 0.37 or 37. Any
  number may come from the cited ``summary.md``; one with at least four significant
  digits may also come from the run's CSV or JSON files (among thousands of raw values
  a coarser number would match by chance). A mean and its spread, ``0.623 ± 0.033``,
  must appear together on one line of a cited summary. Numbers in code spans and code blocks are
  parameters, not results, and are not checked; nor are plain integers (``k = 10``).

So a rerun that changes a result fails this test until the prose follows (or stops
quoting the number), and a paragraph that quotes a number from the wrong file fails too.
A paragraph that tells the story of a fix and quotes the superseded numbers on purpose
says so with ``<!-- history -->`` (invisible on the page); it is not checked.
No Sphinx needed: it reads the Markdown sources.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GENERATED = ("docs/_build", "docs/api", "docs/auto_examples", "docs/results")


def prose_files() -> list[Path]:
    """The hand-written Markdown: README, benchmarks/README.md and docs/ (not generated)."""
    files = [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
    for path in sorted((ROOT / "docs").rglob("*.md")):
        relative = path.relative_to(ROOT).as_posix()
        if not relative.startswith(GENERATED):
            files.append(path)
    return [f for f in files if f.exists()]


# -- what a paragraph cites -----------------------------------------------------------------

#: Scripts whose results directory is named otherwise.
SCRIPT_RESULTS = {"dask_overhead": "dask"}

CITATIONS = [
    re.compile(r"benchmarks/results/([\w.*-]+(?:/[\w.-]+)*)"),
    re.compile(r"(?<![\w/])results/([\w.*-]+(?:/[\w.-]+)*)"),
    re.compile(r"benchmarks/(\w+)\.py"),
    re.compile(r"kernelscale bench (\w+)"),
]


def cited_sources(text: str) -> set[Path]:
    """Results files and directories that ``text`` names (those that exist)."""
    found: set[Path] = set()
    for pattern in CITATIONS:
        for match in pattern.finditer(text):
            path = SCRIPT_RESULTS.get(match.group(1), match.group(1)).rstrip(".")
            if "*" in path:  # benchmarks/results/diskpca_*: every run of a family
                found.update(p for p in RESULTS.glob(path) if p.is_dir())
                continue
            if path.endswith(".md") and (RESULTS / path[:-3]).is_dir():
                path = path[:-3]  # a link to a results page of the site: results/budget.md
            for candidate in (RESULTS / path, RESULTS / f"{path}.md", run_page(path)):
                if candidate is not None and candidate.exists():
                    # A file under a run's directory stands for the whole run: its summary,
                    # CSVs and metadata.
                    if candidate.is_file() and candidate.parent != RESULTS:
                        candidate = candidate.parent
                    found.add(candidate)
                    break
    return found


def run_page(name: str) -> Path | None:
    """``RUN/PAGE.md`` for ``RUN_PAGE`` (or ``RUN_PAGE.md``), None when there is none.

    The site names the page of ``results/budget/hybrids.md`` ``budget_hybrids``, and
    ``benchmarks/budget_hybrids.py`` is the script that writes it.
    """
    stem = name.removesuffix(".md")
    for i in (i for i, c in enumerate(stem) if c == "_"):
        page = RESULTS / stem[:i] / f"{stem[i + 1:]}.md"
        if page.is_file():
            return page
    return None


# -- the numbers a results file holds -------------------------------------------------------

FILE_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?", re.I)


@cache
def source_numbers(source: Path, tables: bool = False) -> tuple[float, ...]:
    """Every number written in a results file or directory: its Markdown summaries, or
    (``tables=True``) its CSV and JSON files."""
    suffixes = (".csv", ".json") if tables else (".md",)
    files = [source] if source.is_file() else [
        p for p in source.rglob("*") if p.suffix in suffixes
        and "quick" not in p.relative_to(source).parts]
    values: set[float] = set()
    for path in files:
        if path.suffix not in suffixes:
            continue
        for token in FILE_NUMBER.findall(path.read_text(errors="replace")):
            token = token.rstrip(",")
            grouped = re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", token)
            pieces = [token.replace(",", "")] if grouped else token.split(",")
            for piece in pieces:
                try:
                    values.add(abs(float(piece)))
                except ValueError:
                    pass
    return tuple(sorted(values))


# -- the numbers a paragraph quotes ---------------------------------------------------------

QUOTED = re.compile(
    r"(?<![\w.^/=-])-?"  # not part of a word, a power (10^6.5), a path or a version
    r"(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?"  # 587,495
    r"|\d+\.\d+(?:e[-+]?\d+)?"  # 0.236, 4.9e-4
    r"|\d+e[-+]?\d+"  # 5e-14
    r"|\d+(?=\s?[kM]\b))"  # 228k (the suffix is read below)
    r"(?P<suffix>\s?[kM]\b|%)?"
    r"(?![\w.,]*\d)"  # not the head of a version number (2.4.6)
    r"(?!\s?x\s?\d)",  # not a data shape (50,000 x 28: the setup, not a result)
    re.I,
)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
LINK_TARGET = re.compile(r"\]\([^)]*\)")


@dataclass(frozen=True)
class Quote:
    text: str  # as written, e.g. '228k'
    digits: int  # significant digits shown
    readings: tuple[tuple[float, float], ...]  # (value, tolerance) a file may hold it as


def quotes(text: str) -> list[Quote]:
    text = LINK_TARGET.sub("]", CODE.sub(" ", text))
    found = []
    for match in QUOTED.finditer(text):
        if re.search(r"\d\s?x\s?$", text[max(0, match.start() - 4):match.start()]):
            continue  # the second side of a data shape (200,000 x 100,000)
        number, suffix = match.group("number"), (match.group("suffix") or "").strip()
        plain = number.replace(",", "").lower()
        mantissa, _, exponent = plain.partition("e")
        decimals = len(mantissa.partition(".")[2])
        # Half a unit of the last digit shown (and a hair for binary floats).
        tolerance = 0.5 * 10.0 ** (int(exponent or 0) - decimals) * 1.0001
        if "," in number and "." not in number:  # 38,500: rounded to its last non-zero digit
            zeros = len(mantissa) - len(mantissa.rstrip("0"))
            tolerance *= 10.0 ** zeros
        value = abs(float(plain))
        readings = [(value, tolerance)]  # as written: '4.78 M' may be in the file as 4.78
        if suffix in ("k", "M"):
            scale = 1e3 if suffix == "k" else 1e6
            readings.append((value * scale, tolerance * scale))
        elif suffix == "%":
            readings.append((value / 100, tolerance / 100))
        digits = len(mantissa.replace(".", "").lstrip("0"))
        found.append(Quote(match.group(0).strip(), digits, tuple(readings)))
    return found


def appears_in(quote: Quote, sources: set[Path]) -> bool:
    """In a cited summary at the precision shown; in a cited CSV or JSON file (thousands
    of raw values) only when the quote shows at least three significant digits."""
    for source in sources:
        for tables in (False, True):
            if tables and quote.digits < 4:
                continue
            values = source_numbers(source, tables)
            for value, tolerance in quote.readings:
                i = bisect.bisect_left(values, value - tolerance)
                if i < len(values) and values[i] <= value + tolerance:
                    return True
    return False


# -- paragraphs, with the citations of their headings ---------------------------------------

@dataclass
class Block:
    path: Path
    line: int
    text: str
    sources: set[Path]


def blocks(path: Path) -> list[Block]:
    """Paragraphs, tables and list items of a Markdown file, with what each one cites."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    headings: list[tuple[int, set[Path]]] = []  # (level, cited) of the open sections
    current: list[str] = []
    start = 0
    fence = False

    lead: set[Path] = set()  # what the paragraph that introduces a list or table cites

    def flush():
        nonlocal lead
        if current:
            text = "\n".join(current)
            inherited = set().union(*(cited for _, cited in headings)) if headings else set()
            own = cited_sources(text)
            if re.match(r"\s*([-*|]|\d+\.)\s", text):  # a list item or table: its lead's
                own |= lead
            else:
                lead = own
            out.append(Block(path, start + 1, text, own | inherited))
            current.clear()

    for i, line in enumerate(lines):
        if line.strip().startswith(("```", ":::")):  # a code block or a directive
            flush()
            fence = not fence
            continue
        if fence:
            continue
        heading = re.match(r"(#+)\s+(.*)", line)
        if heading:
            flush()
            level = len(heading.group(1))
            headings = [h for h in headings if h[0] < level]
            lead = set()
            headings.append((level, cited_sources(heading.group(2))))
            continue
        if line.strip().startswith("<!--") and HISTORY not in line:  # a section's citation
            flush()
            if headings:
                headings[-1][1].update(cited_sources(line))
            else:
                headings.append((0, cited_sources(line)))
            continue
        if not line.strip() or re.match(r"\s*([-*]|\d+\.)\s", line):
            flush()
        if line.strip():
            if not current:
                start = i
            current.append(line)
    flush()
    return out


PAIR = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*(?:±|\+-|\+/-)\s*"
                  r"(\d+(?:\.\d+)?(?:e[-+]?\d+)?)", re.I)


def pairs(text: str) -> list[tuple[Quote, Quote]]:
    """Every ``mean ± spread`` written in ``text``, as two quotes."""
    text = LINK_TARGET.sub("]", CODE.sub(" ", text))
    found = []
    for match in PAIR.finditer(text):
        mean, spread = quotes(match.group(1)), quotes(match.group(2))
        if mean and spread:
            found.append((mean[0], spread[0]))
    return found


@cache
def summary_lines(source: Path) -> tuple[tuple[float, ...], ...]:
    """The numbers of each line of a cited summary (or of the summaries of a directory)."""
    files = [source] if source.is_file() else [
        p for p in source.rglob("*.md") if "quick" not in p.relative_to(source).parts]
    lines = []
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            values = []
            for token in FILE_NUMBER.findall(line):
                try:
                    values.append(abs(float(token.rstrip(",").replace(",", ""))))
                except ValueError:
                    pass
            if len(values) >= 2:
                lines.append(tuple(values))
    return tuple(lines)


def pair_appears_in(mean: Quote, spread: Quote, sources: set[Path]) -> bool:
    def close(quote: Quote, value: float) -> bool:
        return any(abs(value - v) <= tol for v, tol in quote.readings)

    for source in sources:
        for values in summary_lines(source):
            for i in range(len(values) - 1):
                if close(mean, values[i]) and close(spread, values[i + 1]):
                    return True
    return False


#: Marks a paragraph that quotes earlier, superseded numbers on purpose (the story of a
#: fix): written in the Markdown source, invisible on the page, and not checked.
HISTORY = "<!-- history -->"


def block_problems(block: Block) -> list[str]:
    """What in a citing block its cited results do not hold, as written ('0.62', ...)."""
    if not block.sources or HISTORY in block.text:
        return []
    problems = [repr(q.text) for q in quotes(block.text) if not appears_in(q, block.sources)]
    problems += [f"'{mean.text} ± {spread.text}'" for mean, spread in pairs(block.text)
                 if not pair_appears_in(mean, spread, block.sources)]
    return problems


def stale_quotes(path: Path) -> list[str]:
    """'file:line: number (cited: ...)' for every quoted number its cited results lack."""
    problems = []
    for block in blocks(path):
        cited = ", ".join(sorted(s.relative_to(ROOT).as_posix() for s in block.sources))
        for problem in block_problems(block):
            problems.append(f"{path.relative_to(ROOT)}:{block.line}: {problem} is not in "
                            f"{cited}")
    return problems


@pytest.mark.parametrize("path", prose_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_numbers_are_in_the_results_they_cite(path):
    problems = stale_quotes(path)
    assert not problems, "stale or uncited numbers:\n" + "\n".join(problems)


# -- the checker itself, on a results directory of its own ------------------------------------

DEMO_SUMMARY = """# Demo

| method | setting | NMI | upload words |
| --- | --- | --- | --- |
| FK | T = 5 | 0.621 ± 0.019 | 62,999 |
| FK | T = 20 | 0.623 ± 0.033 | 227,562 |

Worst ratio 1.016, median 1.000.
"""


@pytest.fixture
def demo_results(tmp_path, monkeypatch):
    """A results tree holding one run, ``demo``, in place of benchmarks/results."""
    results = tmp_path / "results"
    (results / "demo").mkdir(parents=True)
    (results / "demo" / "summary.md").write_text(DEMO_SUMMARY)
    (results / "demo" / "runs.csv").write_text("seed,nmi\n0,0.61234\n1,0.63456\n")
    monkeypatch.setitem(globals(), "RESULTS", results)
    return tmp_path


def _problems(path: Path) -> list[str]:
    return [problem for block in blocks(path) for problem in block_problems(block)]


def test_checker_catches_a_stale_number(demo_results):
    """A number that the cited summary does not hold fails; the true one passes."""
    page = demo_results / "page.md"
    page.write_text("Measured (`benchmarks/results/demo/`): worst ratio 1.016x.\n")
    assert [b.sources for b in blocks(page)] == [{demo_results / "results" / "demo"}]
    assert _problems(page) == []
    page.write_text("Measured (`benchmarks/results/demo/`): worst ratio 1.139x.\n")
    assert _problems(page) == ["'1.139'"]


def test_checker_reads_rounding_suffixes_and_headings(demo_results):
    page = demo_results / "page.md"
    page.write_text(
        "## Numbers (`benchmarks/results/demo/`)\n\n"
        "FK uploads 228k words (227,562 exactly), NMI 0.62.\n\n"
        "* a list item inherits the section's citation: 63k words.\n\n"
        "## Elsewhere\n\nAn uncited 3.14159 is not checked.\n\n"
        "`n_refine=0.5` in code is a parameter.\n")
    assert _problems(page) == []
    page.write_text("## Numbers (`benchmarks/results/demo/`)\n\nFK uploads 9,876,543 words.\n")
    assert _problems(page) == ["'9,876,543'"]


def test_checker_reads_a_csv_only_at_four_digits(demo_results):
    page = demo_results / "page.md"
    page.write_text("Seed 1 (`benchmarks/results/demo/`): NMI 0.6346.\n")
    assert _problems(page) == []
    page.write_text("Seed 1 (`benchmarks/results/demo/`): NMI 0.635.\n")  # 3 digits: no
    assert _problems(page) == ["'0.635'"]


def test_checker_holds_a_mean_to_its_spread(demo_results):
    """Both numbers exist in the summary, but not as this pair: it fails."""
    page = demo_results / "page.md"
    page.write_text("Measured (`benchmarks/results/demo/`): FK T = 20, 0.623 ± 0.033.\n")
    assert _problems(page) == []
    page.write_text("Measured (`benchmarks/results/demo/`): FK T = 20, 0.623 ± 0.019.\n")
    assert _problems(page) == ["'0.623 ± 0.019'"]


def test_checker_skips_a_paragraph_marked_as_history(demo_results):
    page = demo_results / "page.md"
    page.write_text("Measured (`benchmarks/results/demo/`): once 0.555. <!-- history -->\n")
    assert _problems(page) == []
    page.write_text("Measured (`benchmarks/results/demo/`): once 0.555.\n")
    assert _problems(page) == ["'0.555'"]


# -- claims pinned to one results file --------------------------------------------------------

#: (page, what the page says, results file, what that file says). A page whose section
#: cites a whole family of runs (``benchmarks/results/diskpca_*``) would pass a number
#: found in any of them; these claims must come from the one file that measured them,
#: and say what it says (a speed-up measured in one process is not a modelled one).
PINNED = [
    ("README.md", "is 64.5x\n(polynomial) and 174.7x (RBF) faster than batch KPCA by ARPACK",
     "diskpca_insurance/summary.md", ["64.5 x measured in one process",
                                      "174.7 x measured in one process"]),
    ("README.md", "100.0x\nand 251.5x", "diskpca_insurance/summary.md",
     ["100.0 x with one machine per worker", "251.5 x with one machine per worker"]),
    ("README.md", "|Y| = 16, whose excess is\n0.835", "diskpca_insurance/summary.md",
     ["(|Y| = 16: err / opt = 1.0198, excess 0.835)"]),
    ("docs/papers.md", "in one process: 58.3x to\n  5,468x", "diskpca_insurance/summary.md",
     ["in one process 58.3 x", "(5468.3 x:"]),
    ("docs/papers.md", "(2.7x sketched, 3.3x Gram)", "diskpca_insurance/summary.md",
     ["(3.6 s) 2.7 x with one machine", "(3.6 s) 3.3 x with one machine"]),
    ("docs/methods.md", "1.4x at 10^4 words (0.402 against 0.279), 4.8x at 10^5\n(0.136 "
     "against 0.0281) and 12x at 10^6 (0.0209 against 0.00176)",
     "diskpca_letter_poly/summary.md",
     ["| 0.279 ± 0.022 (24)", "| 0.402 ± 0.025 (24)", "| 0.0281 ± 0.0021 (115)",
      "| 0.136 ± 0.04 (115)", "| 0.00176 ± 9e-05 (419) |", "| 0.0209 ± 0.0064 (3573) |"]),
    ("docs/papers.md", "err / opt <= 1.03", "diskpca_insurance/summary.md",
     ["(err / opt <= 1.03): **holds** from 31,320 fit words"]),
    ("docs/papers.md", "in one process 7.1x\n  and 7.9x", "diskpca_insurance/summary.md",
     ["7.1 x measured in one process", "7.9 x measured in one process"]),
    ("docs/papers.md", "shared, loaded machine", "diskpca_insurance/summary.md",
     ["shared, loaded 2-core machine"]),
    ("docs/papers.md", "5 on digits and insurance", "diskpca_insurance_poly/summary.md",
     ["| diskpca ridge (gram) | 5 |"]),
    ("docs/papers.md", "NMI 0.013 on digits", "diskpca_kmeans_digits_poly/summary.md",
     ["0.0131"]),
    ("docs/papers.md", "NMI within 10^5 words 0.186\n  for disKPCA, 0.158 for the paper's "
     "sampler, 0.203 and 0.211", "diskpca_kmeans_letter_poly/summary.md",
     ["| 0.186 ±", "| 0.158 ±", "| 0.203 ±", "| 0.211 ±"]),
    ("docs/papers.md", "no method has a fit below 225k words", "diskpca_bow_poly/summary.md",
     ["2.254e+05", "2.626e+05"]),
    ("docs/streaming.md", "RNCA is the slowest to train: does not hold",
     "streaming_real/summary.md", ["RNCA is the slowest to train: **does not hold**"]),
]


@pytest.mark.parametrize(("page", "claim", "source", "evidence"), PINNED,
                         ids=[f"{p}: {c.splitlines()[0][:30]}" for p, c, _, _ in PINNED])
def test_pinned_claims_match_their_results(page, claim, source, evidence):
    text = (ROOT / page).read_text()
    assert claim in text, f"{page} no longer says {claim!r}: update PINNED with the page"
    results = (RESULTS / source).read_text()
    missing = [e for e in evidence if e not in results]
    assert not missing, f"{source} does not say {missing}: the page's claim is stale"
