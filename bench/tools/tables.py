"""Markdown tables from rows of dicts (the bench's one table format: RESULTS.md and every scenario print them)."""

from __future__ import annotations


def cell(value: object) -> str:
    return "-" if value is None else str(value)


def markdown(rows: list[dict], header: str = "") -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    lines = [header, ""] if header else []
    lines += ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines) + "\n"
