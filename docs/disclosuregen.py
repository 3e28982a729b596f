"""Write the disclosure table of ``docs/flower.md`` from the code's classification.

Run by ``conf.py`` before every build. The table holds nothing of its own: every
row is a protocol of :data:`kernelscale.backends.flower.protocols.PROTOCOLS` (the
code's table of what each estimator runs on a federation, checked against the
estimators by ``tests/test_flower_policy.py``), every step's class is what the
step declares (``kernelscale.runtime.steps``), and what a party's node answers
is what :class:`~kernelscale.backends.flower.policy.NodePolicy` decides. A
change in the code changes the page.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelscale.backends.flower.policy import NodePolicy, PolicyRefusal
from kernelscale.backends.flower.protocols import PROTOCOLS, protocol_estimators
from kernelscale.runtime.steps import AGGREGATES, NOTHING, PER_ROW, ROWS, resolve_step

HERE = Path(__file__).resolve().parent
OUT = HERE / "_generated" / "disclosure.inc"
CLASSES = ((ROWS, "raw rows"), (PER_ROW, "per-row values"), (AGGREGATES, "aggregates"))
POLICIES = (("default policy", NodePolicy()), ('`disclose="aggregates"`',
                                               NodePolicy(most=AGGREGATES)))


def short(name: str) -> str:
    """``module:function`` -> ``function``."""
    return name.rsplit(":", 1)[1]


def answered(policy: NodePolicy, steps) -> str:
    """"yes", or "refused" with the most the refused steps would disclose."""
    refused = []
    for name, disclosure in steps:
        try:
            policy.check_step(name, disclosure)
        except PolicyRefusal:
            refused.append(disclosure)
    if not refused:
        return "yes"
    return f"refused ({next(label for d, label in CLASSES if d in refused)})"


def protocol_table(estimator: str) -> list[str]:
    rows = [f"**{estimator}**", "",
            "| options | " + " | ".join(label for _, label in CLASSES) + " | "
            + " | ".join(label for label, _ in POLICIES) + " |",
            "| --- " * (1 + len(CLASSES) + len(POLICIES)) + "|"]
    for protocol in PROTOCOLS:
        if protocol.estimator != estimator:
            continue
        cells = []
        for disclosure, _ in CLASSES:
            names = [f"`{short(n)}`" for n, d in protocol.steps if d == disclosure]
            cells.append(", ".join(names) or "none")
        cells += [answered(policy, protocol.steps) for _, policy in POLICIES]
        rows.append(f"| `{protocol.label}` | " + " | ".join(cells) + " |")
    return rows + [""]


def markdown(text: str) -> str:
    """A docstring line as Markdown: ``code`` in single backticks, roles dropped."""
    text = re.sub(r":(?:func|class|meth|mod|data|attr):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


def step_table() -> list[str]:
    """Every step of the table: where it lives, what it replies, what it discloses."""
    seen: dict[str, set] = {}
    for protocol in PROTOCOLS:
        for name, disclosure in protocol.steps:
            seen.setdefault(name, set()).add(disclosure)
    rows = ["| step | module | discloses | what it does |", "| --- | --- | --- | --- |"]
    order = {d: i for i, d in enumerate((ROWS, PER_ROW, AGGREGATES, NOTHING))}
    for name, found in sorted(seen.items(), key=lambda item: (min(order[d] for d in item[1]),
                                                               item[0])):
        doc = (resolve_step(name).__doc__ or "").strip().splitlines()
        summary = markdown(doc[0]) if doc else ""
        classes = " or ".join(sorted(found, key=order.get))
        if len(found) > 1:
            classes += " (by its arguments)"
        module = name.split(":")[0]
        rows.append(f"| `{short(name)}` | `{module}` | {classes} | {summary} |")
    return rows + [""]


def write_table() -> Path:
    lines = ["What each protocol's steps disclose, by class, and whether a party's node "
             "answers every step of it under the default policy and under "
             '`disclose="aggregates"` (a party that sets `allow-rows=true` answers '
             "them all). `method=None` (the default of `DistributedKernelPCA`) runs one of "
             "its methods below, chosen by the word budget and the pilot; `gamma=0.5` "
             "stands for any `gamma` given (without one, the paper's rule adds the "
             "`moment_step` round).", ""]
    for estimator in protocol_estimators():
        lines += protocol_table(estimator)
    lines += ["Every step above:", ""] + step_table()
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines))
    return OUT


if __name__ == "__main__":
    print(write_table())
