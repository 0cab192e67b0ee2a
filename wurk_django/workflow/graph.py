"""A workflow drawn as a picture: inline SVG, rendered on the server (no JavaScript).

Steps are boxes in columns by dependency level (a step's level is one more than
its deepest dependency), arrows run from each dependency to the step, and a
box's colour is its state. A workflow with more than :data:`DRAW_LIMIT` steps
is drawn one box per level, with how many of its steps are in each state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from .status import STEP_STATES, StepView

#: Most steps drawn one box each; above it, one box per level.
DRAW_LIMIT = 200
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 160, 38, 60, 14, 10
#: Fill and stroke per state.
COLOURS = {
    "waiting": ("#eceff1", "#90a4ae"),
    "enqueued": ("#bbdefb", "#1e88e5"),
    "succeeded": ("#c8e6c9", "#43a047"),
    "failed": ("#ffcdd2", "#e53935"),
    "cancelled": ("#f5f5f5", "#bdbdbd"),
}


def levels(steps: Sequence[StepView]) -> dict[str, int]:
    """Each step's level: 0 without dependencies, else one more than its deepest dependency."""
    level: dict[str, int] = {}
    for step in steps:  # steps come each after its dependencies
        level[step.name] = 1 + max((level.get(d, 0) for d in step.after), default=-1)
    return level


def state_label(state: str) -> str:
    labels = {"waiting": _("waiting"), "enqueued": _("enqueued"), "succeeded": _("succeeded"),
              "failed": _("failed"), "cancelled": _("cancelled")}
    return labels.get(state, state)


def _short(text: str, most: int = 22) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _box(x: int, y: int, state: str, lines: list[str], title: str, extra: str = "") -> str:
    fill, stroke = COLOURS.get(state, COLOURS["waiting"])
    dash = ' stroke-dasharray="4 3"' if state == "cancelled" else ""
    bold = ' font-weight="bold"'
    text = "".join(
        f'<text x="{x + 8}" y="{y + 15 + 14 * i}" font-size="{12 if i == 0 else 10}"'
        f'{bold if i == 0 else ""}>{escape(line)}</text>' for i, line in enumerate(lines))
    return (f'<g class="wurk-wf-step" data-state="{escape(state)}"{extra}><title>{escape(title)}</title>'
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="{fill}" stroke="{stroke}"'
            f' stroke-width="1.5"{dash}/>{text}</g>')


def _svg(width: int, height: int, body: str, label: str) -> SafeString:
    arrow = ('<defs><marker id="wurk-wf-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7"'
             ' markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#78909c"/></marker>'
             '</defs>')
    return mark_safe(  # noqa: S308 (every text in it went through escape())
        f'<svg xmlns="http://www.w3.org/2000/svg" class="wurk-wf-graph" role="img" aria-label="{escape(label)}"'
        f' font-family="sans-serif" width="{width}" height="{height}" viewBox="0 0 {width} {height}">{arrow}{body}</svg>')


def draw(steps: Sequence[StepView]) -> SafeString:
    """The SVG of a workflow's steps (as :meth:`Workflow.steps` returns them)."""
    if len(steps) > DRAW_LIMIT:
        return _draw_levels(steps)
    level = levels(steps)
    rows: dict[int, int] = Counter()
    where: dict[str, tuple[int, int]] = {}
    for step in steps:
        column = level[step.name]
        where[step.name] = (PAD + column * (BOX_W + GAP_X), PAD + rows[column] * (BOX_H + GAP_Y))
        rows[column] += 1
    edges = []
    for step in steps:
        x2, y2 = where[step.name]
        for dep in step.after:
            if dep in where:
                x1, y1 = where[dep]
                sx, sy, ex, ey = x1 + BOX_W, y1 + BOX_H // 2, x2, y2 + BOX_H // 2
                mid = (sx + ex) // 2
                edges.append(f'<path d="M{sx},{sy} C{mid},{sy} {mid},{ey} {ex},{ey}" fill="none" stroke="#78909c"'
                             f' stroke-width="1.2" marker-end="url(#wurk-wf-arrow)"/>')
    boxes = []
    for step in steps:
        x, y = where[step.name]
        title = f"{step.name}: {step.target} ({state_label(step.state)})"
        if step.error:
            title += f"\n{step.error}"
        boxes.append(_box(x, y, step.state, [_short(step.name), _short(f"{state_label(step.state)} · "
                                                                      f"{step.target.rsplit('.', 1)[-1]}", 28)],
                          title, f' data-step="{escape(step.name)}"'))
    width = PAD * 2 + (max(level.values(), default=0) + 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + max(rows.values(), default=1) * (BOX_H + GAP_Y) - GAP_Y
    return _svg(width, height, "".join(edges) + "".join(boxes), _("Workflow graph: steps by dependency level"))


def _draw_levels(steps: Sequence[StepView]) -> SafeString:
    level = levels(steps)
    by_level: dict[int, Counter] = {}
    for step in steps:
        by_level.setdefault(level[step.name], Counter())[step.state] += 1
    body = []
    for number, counts in sorted(by_level.items()):
        x = PAD + number * (BOX_W + GAP_X)
        worst = next((s for s in ("failed", "enqueued", "waiting", "cancelled") if counts.get(s)), "succeeded")
        lines = [_("level %(number)d: %(count)d steps") % {"number": number, "count": sum(counts.values())}]
        lines += [f"{state_label(s)}: {counts[s]}" for s in STEP_STATES if counts.get(s)]
        height = 15 + 14 * len(lines)
        fill, stroke = COLOURS[worst]
        text = "".join(f'<text x="{x + 8}" y="{PAD + 15 + 14 * i}" font-size="{12 if i == 0 else 10}">'
                       f'{escape(line)}</text>' for i, line in enumerate(lines))
        body.append(f'<g class="wurk-wf-level" data-state="{worst}"><rect x="{x}" y="{PAD}" width="{BOX_W}"'
                    f' height="{height}" rx="5" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>{text}</g>')
        if number:
            body.append(f'<path d="M{x - GAP_X},{PAD + 20} L{x},{PAD + 20}" stroke="#78909c" stroke-width="1.2"'
                        f' marker-end="url(#wurk-wf-arrow)"/>')
    width = PAD * 2 + len(by_level) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + 15 + 14 * (len(STEP_STATES) + 1)
    return _svg(width, height, "".join(body), _("Workflow graph: one box per dependency level"))
