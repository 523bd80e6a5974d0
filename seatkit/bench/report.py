"""A bench summary as a markdown report and as the rows of the terminal table."""

from __future__ import annotations


def _fmt(stats: dict | None, scale: float = 1.0, digits: int = 1) -> str:
    if not stats:
        return "n/a"
    cv = f", CV {stats['cv']:.1%}" if stats.get("cv") is not None else ""
    return (f"{stats['median'] * scale:.{digits}f} ({stats['min'] * scale:.{digits}f}–"
            f"{stats['max'] * scale:.{digits}f}{cv})")


def rows(summary: dict) -> list[tuple[str, ...]]:
    """suite, content, tok/s, tokens/step, ms/step, acceptance, requests: medians (min–max, CV)."""
    return [(suite, s["content"], _fmt(s["decode_tok_s"]), _fmt(s["tokens_per_step"], digits=2),
             _fmt(s["ms_per_step"], digits=2), _fmt(s["draft_acceptance"], 100, 1),
             str(s["requests"])) for suite, s in summary["suites"].items()]


HEADER = ("suite", "content", "decode tok/s", "tokens/step (bonus incl.)", "ms/step",
          "draft acceptance %", "requests")


def markdown(summary: dict) -> str:
    c = summary["conditions"]
    lines = [f"# Bench report ({summary['schema']})", "",
             f"Model `{c['model']}` at {c['url']}, engine {c.get('engine_version') or 'unknown'}, "
             f"k={c.get('k')}, sampling {c['sampling']}, ignore_eos, reasoning {c['reasoning']}, "
             f"{c['warmups']} warm-ups then {c['repeats']} measured repeats per prompt.",
             f"Requests discarded because another request shared the server: {summary['discarded']}.",
             f"Streams cut short (recorded, never measured): {len(summary.get('truncated', []))}.",
             "", "Medians, with (min–max, coefficient of variation). Code and prose are never blended.",
             "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(summary)]
    lines += ["", "## Best runs", ""]
    for suite, s in summary["suites"].items():
        b = s["best_run"]
        lines.append(f"- {suite}: {b['decode_tok_s']:.1f} tok/s on {b['prompt']} — {b['label']}")
    lines += ["", "## Acceptance by draft position (median, unconditional)", ""]
    for suite, s in summary["suites"].items():
        shown = ", ".join(f"{p:.1%}" for p in s["acceptance_by_position"]) or "n/a"
        lines.append(f"- {suite}: {shown}")
    lines += ["", "## Fits", ""]
    for name, line in summary.get("fits", {}).items():
        shown = (f"{line['intercept']:.3f} + {line['slope']:.5f} x over {line['points']} requests"
                 if line else "not enough spread to fit")
        lines.append(f"- {name}: {shown}")
    if summary.get("truncated"):
        lines += ["", "## Truncated streams", ""] + [f"- {why}" for why in summary["truncated"]]
    if summary.get("skipped"):
        lines += ["", "## Skipped", ""] + [f"- {n}: {why}" for n, why in summary["skipped"].items()]
    lines += ["", "Plots: plots/*.png", "", "## Alarms", ""]
    lines += [f"- {kind} ({a['requests']} requests), e.g.: {a['example']}"
              for kind, a in summary["alarms"].items()] or ["- none"]
    lines += ["", "## Prompts", "", "| prompt | text sha256 | tokens | token ids sha256 |",
              "|---|---|---|---|"]
    for name, h in summary["prompts"].items():
        lines.append(f"| {name} | `{h['text_sha256'][:16]}` | {h['tokens']} | "
                     f"`{(h['token_ids_sha256'] or 'n/a')[:16]}` |")
    return "\n".join(lines) + "\n"
