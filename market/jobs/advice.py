"""The budget advisor (issue 40 item 4): from a succeeded L1 pre-flight estimate's scored candidates (settings whose
noise fits every member's remaining budget, :func:`workers.privacy.plans.advised_candidates`, scored by
:mod:`workers.runner.preflight`), the one to propose — the best that passes the publish gate, whose rule includes
beating the operator-only model — beside the operator-only model and the noise-free (L0) fusion, in plain words.
Operators only, like the estimate it reads (market.jobs.visibility.estimate_visible).
"""

from __future__ import annotations

from market.jobs.quality import verdict_of
from workers.numbers import percent_text

ADVICE_SUBJECT = "This setting's model"

MECHANISM_WORDS = {
    "gaussian": "GNMax (Gaussian noise)",
    "laplace": "Laplace noise",
    "confident_gnmax": "Confident-GNMax",
}


def _noise_words(privacy: dict) -> str:
    if privacy.get("gamma") is not None:
        return f"γ {privacy['gamma']:.3g}"
    return f"σ {privacy['sigma']:.3g} votes"


def candidate_words(candidate: dict) -> str:
    """A candidate in plain words: mechanism, queried rows, noise and its price for each silo."""
    return (
        f"{MECHANISM_WORDS.get(candidate['mechanism'], candidate['mechanism'])} on "
        f"{candidate['n_queries']} queried public rows ({_noise_words(candidate['privacy'])}), costing each silo "
        f"ε {candidate['epsilon']:.3g} ({candidate['unit']}, δ = {candidate['delta']:g})"
    )


def _scores_words(metrics: dict | None) -> str:
    metrics = metrics or {}
    return (
        f"accuracy {percent_text(metrics.get('accuracy'))}, balanced accuracy "
        f"{percent_text(metrics.get('balanced_accuracy'))}"
    )


def _ranked(candidate: dict) -> tuple:
    metrics = candidate["metrics"]
    return (metrics.get("balanced_accuracy") or 0.0, metrics.get("accuracy") or 0.0)


def estimate_advice(*, result: dict | None, class_labels: list) -> dict | None:
    """The advice of a succeeded estimate (None where it has no candidates: an L2 estimate, or one computed before
    the advisor): ``candidates`` (each with ``passes_gate`` and ``words``), ``proposal`` (the best candidate that
    passes the gate, or None), ``operator_only`` and ``l0`` (their scores), and ``statement``, one sentence."""
    if not result or "candidates" not in result or result.get("reference") is None:
        return None
    baselines = result["baselines"]
    candidates = [
        {
            **candidate,
            "words": candidate_words(candidate),
            "passes_gate": verdict_of(
                subject=ADVICE_SUBJECT,
                metrics=candidate["metrics"],
                baselines=baselines,
                class_labels=class_labels,
            ).passes_gate,
        }
        for candidate in result["candidates"]
    ]
    passing = [candidate for candidate in candidates if candidate["passes_gate"]]
    proposal = max(passing, key=_ranked) if passing else None
    operator_only = baselines.get("operator_only")
    return {
        "candidates": candidates,
        "proposal": proposal,
        "operator_only": operator_only,
        "l0": result["reference"],
        "statement": _statement(proposal, candidates, operator_only, result["reference"]),
    }


def _statement(proposal, candidates, operator_only, l0) -> str:
    free = (
        f"the operator's rows alone score {_scores_words(operator_only)}"
        if operator_only
        else "no operator-only model could be measured"
    )
    if proposal is not None:
        return (
            f"Proposed: {proposal['words']}; expected {_scores_words(proposal['metrics'])}, which passes the "
            f"publish gate ({free}; without noise, L0, {_scores_words(l0)})."
        )
    tried = (
        f"None of the {len(candidates)} private settings" if candidates else "No private setting"
    )
    return (
        f"{tried} that fit every member's remaining budget is expected to pass the publish gate: nothing private "
        f"can beat the free model with these budgets ({free}; without noise, L0, {_scores_words(l0)})."
    )
