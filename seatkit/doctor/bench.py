"""The last bench against the profile's reference card: which factor carries the gap, and which
of the doctor's other rows usually move that factor."""

from __future__ import annotations

from pathlib import Path

from seatkit import safe_yaml
from seatkit.bench import cards, compare, sides, verdicts
from seatkit.doctor.rows import Row, cannot, ok, warn
from seatkit.errors import SeatError
from seatkit.seat.profiles import Profile

LAYER = "bench"
# The rows that move each factor (verdicts.what_moves says it in words).
MOVERS = {"ms_per_step": ("gpu", "host", "image"), "tokens_per_step": ("server", "models")}


def last_run(profile: Profile, runs: Path) -> Path | None:
    """The newest finished bench of this profile under runs/ (folders are named by UTC time)."""
    for folder in sorted(runs.glob("*/summary.json"), reverse=True):
        try:
            if (
                safe_yaml.read_json(folder, "bench summary", sides.SUMMARY_BYTES)["conditions"].get("profile")
                == profile.name
            ):
                return folder.parent
        except (SeatError, OSError, ValueError, KeyError, TypeError, AttributeError):  # torn, foreign
            continue
    return None


def card_for(profile: Profile) -> Path | None:
    """The reference card whose model is the profile's base model on the hub."""
    repository = profile.models[profile.model].repository
    for path in sorted(cards.REFERENCES.glob("*.yaml")):
        if repository and cards.load(path).conditions.model == repository:
            return path
    return None


def published_step(profile: Profile) -> dict | None:
    """The published step at ctx0 (ms/step, tokens/step) from the profile's reference card, for
    `seat host verify-p2p --step` to hold its train against."""
    path = card_for(profile)
    if path is None:
        return None
    card = cards.load(path)
    for figure in card.figures:
        if figure.ms_per_step and figure.tokens_per_step and card.conditions_of(figure).get("context") == 0:
            return {
                "card": path.stem,
                "figure": figure.id,
                "ms_per_step": figure.ms_per_step,
                "tokens_per_step": figure.tokens_per_step,
                "k": card.conditions_of(figure).get("k"),
            }
    return None


def gap(run: Path, card: Path, others: list[Row]) -> Row:
    result = compare.compare(str(run), str(card), force=True)  # the card is matched by repository
    judged = [r for r in result.rows if "factor" in r["verdict"] or r["verdict"].get("within_noise")]
    if not judged:
        refusals = [r["harness"] for r in result.rows if (r.get("harness") or "").startswith("refused")]
        return cannot(
            LAYER,
            "vs card",
            refusals[0] if refusals else f"{run.name} and {card.stem} share no figure with both factors",
        )
    row = max(judged, key=lambda r: abs(r["ratios"]["decode_tok_s"] - 1))
    r, verdict = row["ratios"], row["verdict"]
    figures = (
        f"{row['a']} vs {row['b']}: tok/s x{r['decode_tok_s']:.2f}, tokens/step "
        f"x{r['tokens_per_step']:.2f}, ms/step x{r['ms_per_step']:.2f}"
    )
    if verdict.get("within_noise"):
        return ok(LAYER, "vs card", f"{figures}: within noise")
    factor = verdict["factor"]
    suspects = [
        f"{o.layer} {o.check} {o.status}" for o in others if o.layer in MOVERS[factor] and o.status != "OK"
    ]
    return warn(
        LAYER,
        "vs card",
        f"{figures}; {factor.replace('_', ' ')} carries {verdict['share']:.0%}"
        f" of the gap; rows above that move it: {', '.join(suspects) or 'none flagged'}",
        f"what usually moves it: {verdicts.what_moves(factor)}",
    )


def rows(profile: Profile, runs: Path, others: list[Row]) -> list[Row]:
    run = last_run(profile, runs)
    if run is None:
        return [
            cannot(
                LAYER, "last bench", f"no bench of {profile.name} under {runs}", f"seat bench {profile.name}"
            )
        ]
    card = card_for(profile)
    if card is None:
        return [
            cannot(
                LAYER,
                "vs card",
                f"last bench {run.name}; no reference card for "
                f"{profile.models[profile.model].repository or 'a locally built model'}",
            )
        ]
    try:
        return [gap(run, card, others)]
    except (SeatError, KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as exc:
        return [
            cannot(
                LAYER,
                "vs card",
                f"{run.name}/summary.json does not compare with {card.stem}: "
                f"{type(exc).__name__}: {str(exc)[:120]}",
                f"seat bench {profile.name}",
            )
        ]
