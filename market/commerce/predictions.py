"""Predictions through the platform: a bought model answers rows in the federation's raw feature schema; a
predictions-only purchase's calls are limited, metered and charged (market.commerce.usage).
"""

from market.accounts.models import User
from market.audit.services import audit_record
from market.commerce.delivery import global_model_probabilities
from market.commerce.prediction_rows import prediction_frame
from market.commerce.selectors import global_model_require_access, predictions_entitlement
from market.commerce.usage import UsageOutcome, usage_charge, usage_limits_check, usage_replay
from workers.features import encode_features


def model_predict(
    *,
    user: User,
    global_model_id: int,
    rows: list | None = None,
    csv_data: bytes | None = None,
    idempotency_key: str | None = None,
    request=None,
) -> dict:
    """Classes and probabilities of a bought model for rows in the federation's raw feature schema. A
    predictions-only purchase's call is checked against the listing's limits before the model runs, and metered
    and charged after (market.commerce.usage); a refused call is charged nothing."""
    global_model = global_model_require_access(user=user, global_model_id=global_model_id)
    spec = global_model.job.public_dataset.feature_spec
    frame = prediction_frame(
        rows=rows, csv_data=csv_data, spec=spec, label_column=global_model.federation.label_column
    )
    entitlement = predictions_entitlement(user=user, global_model_id=global_model.id)
    if entitlement is not None and (
        usage_replay(entitlement=entitlement, idempotency_key=idempotency_key, rows=len(frame))
        is None
    ):
        usage_limits_check(entitlement=entitlement, rows=len(frame))
    probabilities = global_model_probabilities(global_model, encode_features(frame, spec))
    labels = list(global_model.federation.class_labels)
    usage = None
    if entitlement is not None:
        usage = usage_charge(
            entitlement=entitlement,
            user=user,
            rows=len(frame),
            idempotency_key=idempotency_key,
            request=request,
        )
    audit_record(
        action="model.predicted",
        actor=user,
        target=global_model,
        request=request,
        details={"rows": len(frame), **({"usage_charge": usage.charge.id} if usage else {})},
    )
    return {
        "classes": [labels[index] for index in probabilities.argmax(axis=1)],
        "probabilities": probabilities.round(6).tolist(),
        "class_labels": labels,
        "usage": None if usage is None else usage_output(usage),
    }


def usage_output(usage: UsageOutcome) -> dict:
    charge = usage.charge
    return {
        "charge": charge.id,
        "replayed": usage.replayed,
        "rows": charge.rows,
        "free_rows": charge.free_rows,
        "amount_cents": charge.amount_cents,
        "monthly_fee_cents": charge.monthly_fee_cents,
        "month_rows": usage.month_rows,
        "remaining_cap_rows": usage.remaining_cap_rows,
    }
