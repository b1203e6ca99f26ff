"""Writes of submissions: a silo's upload (its model files, privacy declaration and design), checked before
anything is stored (format, static inspection, declared privacy, the budget its L2 noise spends), stored with its
outbox row in one transaction. Validating the stored models in the sandbox is market.submissions.validation's.
"""

import math
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from market.accounts.models import User
from market.audit.services import audit_record, audit_refusals
from market.budgets.services import BudgetExceeded, budget_refusal_record, epsilon_decimal
from market.constraints import violated_constraint
from market.errors import (
    Conflict,
    IdempotencyKeyReused,
    InvalidInput,
    PermissionDenied,
    RefusedFormat,
)
from market.exchanges.models import LogitUpload
from market.federations.models import Federation, PrivacyLevel
from market.federations.selectors import federation_is_member, public_dataset_current
from market.outbox import outbox_add
from market.sandbox import model_limits
from market.storage import (
    artifact_save,
    artifacts_removed_on_error,
    sha256_of,
)
from market.submissions.models import (
    OWN_MODEL_ROLE,
    ModelFile,
    Submission,
    SubmissionOutbox,
)
from market.submissions.spending import submission_budget_charge
from workers.features import ONE_HOT_VIEW, view_width
from workers.modelio import RefusedModelError, identify_format, inspect_model
from workers.modelio.families import NETWORK_FAMILIES
from workers.privacy.declarations import is_dp_sgd, party_side_bound
from workers.privacy.reports import DP_SGD_MECHANISM


@dataclass(frozen=True)
class UploadedModel:
    name: str
    data: bytes


def _check_privacy_declaration(
    *,
    federation: Federation,
    privacy_level: str,
    privacy_parameters: dict,
    declared_epsilon: float | None,
    model_family: str,
    n_local_examples: int,
) -> dict | None:
    """Check the declared privacy; for L2 return the data-independent report the parameters imply
    (FedKT vote noise, or DP-SGD recomputed by the market's RDP accountant: workers.privacy.declarations)."""
    if privacy_level not in federation.allowed_privacy_levels:
        raise InvalidInput(
            f"The federation allows privacy levels {', '.join(federation.allowed_privacy_levels)}, "
            f"not {privacy_level}."
        )
    if privacy_level != PrivacyLevel.L2:
        if declared_epsilon is not None:
            raise InvalidInput(
                f"Only L2 submissions declare an ε; at {privacy_level} the server accounts for privacy."
            )
        return None
    if declared_epsilon is None or not math.isfinite(declared_epsilon) or declared_epsilon <= 0:
        raise InvalidInput(
            "An L2 submission must declare the positive ε its party-side noise spent."
        )
    if is_dp_sgd(privacy_parameters) and model_family not in NETWORK_FAMILIES:
        raise InvalidInput(
            f"DP-SGD trains networks: a DP-SGD declaration goes with model family "
            f"{' or '.join(NETWORK_FAMILIES)}, not {model_family}."
        )
    try:
        bound, _ = party_side_bound(privacy_parameters, n_local_examples=n_local_examples)
    except ValueError as error:
        raise InvalidInput(f"The L2 privacy parameters are not valid: {error}") from error
    if declared_epsilon < bound.epsilon:
        how = (
            f"{bound.n_queries} DP-SGD steps at sample rate {bound.sample_rate:.4g}, the market's RDP accountant"
            if bound.mechanism == DP_SGD_MECHANISM
            else "data-independent"
        )
        raise InvalidInput(
            f"You declared ε = {declared_epsilon:g}, but these parameters spend ε = "
            f"{epsilon_decimal(bound.epsilon).normalize():f} (example-level, {how}, δ = {bound.delta:g}, rounded "
            "up to the millionth); declare at least that."
        )
    return bound.as_dict()


def _check_exchange_declaration(
    *, federation: Federation, user: User, privacy_level: str, exchange_id: int | None
) -> None:
    """A network trained through an FD exchange learnt from the other silos' noiseless logits: it is L0 (a
    party-level bound charged to its own silo alone would ignore the others), and it names an exchange of this
    federation that its organisation took part in. The market cannot see an undeclared one (docs/fd-exchange.md)."""
    if exchange_id is None:
        return
    took_part = LogitUpload.objects.filter(
        exchange_round__exchange_id=exchange_id,
        exchange_round__exchange__federation=federation,
        organisation_id=user.organisation_id,
    ).exists()
    if not took_part:
        raise InvalidInput(
            f"Your organisation took part in no exchange #{exchange_id} of '{federation.slug}'; declare the "
            "exchange the network was trained through."
        )
    if privacy_level != PrivacyLevel.L0:
        raise InvalidInput(
            f"A network trained through FD exchange #{exchange_id} learnt from the other silos' noiseless logits, "
            f"so it is L0, not {privacy_level}: submit it at L0."
        )


def _check_label_distribution(
    label_distribution: list | None, *, n_classes: int, n_local_examples: int
) -> None:
    if label_distribution is None:
        return
    if len(label_distribution) != n_classes or any(
        not isinstance(count, int) or isinstance(count, bool) or count < 0
        for count in label_distribution
    ):
        raise InvalidInput(
            f"The label distribution must list {n_classes} non-negative example counts, one per class."
        )
    if sum(label_distribution) != n_local_examples:
        raise InvalidInput(
            f"The label distribution adds up to {sum(label_distribution)} examples, "
            f"but the submission declares {n_local_examples}."
        )


def _inspect_upload(model: UploadedModel, *, n_features: int, n_classes: int) -> dict:
    """Static checks on an upload's bytes: format by content, then structure; nothing native is loaded."""
    try:
        model_format = identify_format(model.data)
    except RefusedModelError as error:
        raise RefusedFormat(f"'{model.name}': {error}") from error
    if (
        settings.ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS
    ):  # tests only: let the sandbox meet a tampered model
        return {"format": model_format, "info": {}}
    try:
        info = inspect_model(
            model.data, n_features=n_features, n_classes=n_classes, limits=model_limits()
        )
    except RefusedModelError as error:
        raise InvalidInput(f"'{model.name}': {error}") from error
    return {
        "format": model_format,
        "info": {"family": info.family, "classes": list(info.classes), **info.detail},
    }


def _own_model_checked(
    *,
    federation: Federation,
    models: list[UploadedModel],
    privacy_level: str,
    own_model_file: str | None,
    own_model_validation_score: float | None,
) -> int | None:
    """The position among ``models`` of the silo's own model (issue 31), or None when it uploaded none. It goes
    beside FedKT students, in an L0 submission of a federation that accepts own models, with its held-out score."""
    if own_model_file is None:
        if own_model_validation_score is not None:
            raise InvalidInput(
                "You declared an own model's validation score but named no own model file; give "
                "own_model_file (the name of the uploaded file that is your own model) or leave the score out."
            )
        return None
    if not federation.accepts_own_models:
        raise InvalidInput(
            f"'{federation.slug}' does not accept silos' own models; upload your FedKT students without "
            f"'{own_model_file}'."
        )
    if privacy_level != PrivacyLevel.L0:
        raise InvalidInput(
            f"Your own model is trained without noise, so only an L0 submission may carry one, not a "
            f"{privacy_level} one: upload your students without '{own_model_file}', or submit at L0."
        )
    names = [model.name for model in models]
    if names.count(own_model_file) != 1:
        raise InvalidInput(
            f"own_model_file names '{own_model_file}', which is not one of the uploaded files "
            f"({', '.join(names)})."
        )
    if len(models) < 2:
        raise InvalidInput(
            "An own model goes beside FedKT students; a model alone is a local submission: upload it without "
            "own_model_file."
        )
    if own_model_validation_score is None:
        raise InvalidInput(
            "Declare your own model's accuracy on your held-out rows as own_model_validation_score."
        )
    return names.index(own_model_file)


def _check_design(
    *, partitions: int | None, teachers: int | None, n_students: int, privacy_parameters: dict
) -> None:
    """The FedKT design the silo declares: one student per partition, and at L2 the s and t its noise was
    declared for."""
    if partitions is not None and partitions != n_students:
        raise InvalidInput(
            f"You declared s = {partitions} partitions but uploaded {n_students} student file(s); FedKT trains "
            "one student per partition."
        )
    for name, value in (("partitions", partitions), ("teachers", teachers)):
        declared = privacy_parameters.get(name)
        if value is not None and declared is not None and declared != value:
            raise InvalidInput(
                f"You declared {name} = {value}, but your L2 privacy parameters say {declared}; declare the "
                "design you trained with in both."
            )


@audit_refusals("submission.uploaded", target_argument="federation")
def submission_create(
    *,
    federation: Federation,
    user: User,
    models: list[UploadedModel],
    model_family: str,
    n_local_examples: int,
    local_validation_score: float,
    label_distribution: list | None,
    privacy_level: str,
    privacy_parameters: dict,
    declared_epsilon: float | None,
    feature_view: str = ONE_HOT_VIEW,
    exchange: int | None = None,
    own_model_file: str | None = None,
    own_model_validation_score: float | None = None,
    partitions: int | None = None,
    teachers: int | None = None,
    disjoint_partitions: bool = False,
    idempotency_key: str | None = None,
) -> Submission:
    """Check and store a silo's upload, then queue its validation by a worker. ``feature_view`` is the view of
    the federation's features the models read (market.feature_views); their input width must match it.
    ``exchange``: the FD exchange the network was trained through, if any (it must then be L0).
    ``own_model_file``: the name of the uploaded file that is the silo's own model on all its rows, with its
    held-out ``own_model_validation_score`` (stored last, its ``ModelFile.info["role"]`` :data:`OWN_MODEL_ROLE`);
    ``partitions`` and ``teachers``: the FedKT design the silo trained its students with; ``disjoint_partitions``: the
    silo's declaration that each student was fitted on its own disjoint partition of its rows (record-level L1).
    ``idempotency_key``: the uploader's ``Idempotency-Key``; the same key with the same federation and files returns
    the first submission (``replayed`` True on it, nothing stored or charged again), with others it is refused (422).
    """
    if idempotency_key is not None and not 1 <= len(idempotency_key) <= 200:
        raise InvalidInput("The Idempotency-Key header must be 1 to 200 characters long.")
    if user.organisation is None or not federation_is_member(federation=federation, user=user):
        raise PermissionDenied(
            f"Your organisation is not a member of '{federation.slug}'; join it first."
        )
    if not models:
        raise InvalidInput("Attach at least one model file.")
    public_dataset = public_dataset_current(federation=federation)
    privacy_report = _check_privacy_declaration(
        federation=federation,
        privacy_level=privacy_level,
        privacy_parameters=privacy_parameters,
        declared_epsilon=declared_epsilon,
        model_family=model_family,
        n_local_examples=n_local_examples,
    )
    _check_exchange_declaration(
        federation=federation, user=user, privacy_level=privacy_level, exchange_id=exchange
    )
    _check_label_distribution(
        label_distribution, n_classes=federation.n_classes, n_local_examples=n_local_examples
    )
    own_position = _own_model_checked(
        federation=federation,
        models=models,
        privacy_level=privacy_level,
        own_model_file=own_model_file,
        own_model_validation_score=own_model_validation_score,
    )
    _check_design(
        partitions=partitions,
        teachers=teachers,
        n_students=len(models) - (own_position is not None),
        privacy_parameters=privacy_parameters,
    )
    if (
        own_position is not None
    ):  # the own model is stored last (workers.algorithms.registry.member_model_positions)
        models = [model for index, model in enumerate(models) if index != own_position] + [
            models[own_position]
        ]
    n_features = view_width(public_dataset.feature_spec, feature_view)
    inspections = [
        _inspect_upload(model, n_features=n_features, n_classes=federation.n_classes)
        for model in models
    ]
    for inspection in inspections:
        inspection["info"]["feature_view"] = feature_view
    if own_position is not None:
        inspections[-1]["info"]["role"] = OWN_MODEL_ROLE
    file_hashes = [sha256_of(model.data) for model in models]
    content_sha256 = sha256_of("".join(file_hashes).encode())
    duplicate = Conflict(
        "Your organisation already submitted exactly these model files to this federation."
    )
    replayed = _earlier_submission(
        user=user,
        idempotency_key=idempotency_key,
        federation=federation,
        content_sha256=content_sha256,
    )
    if replayed is not None:
        return replayed
    if Submission.objects.filter(
        federation=federation, organisation=user.organisation, content_sha256=content_sha256
    ).exists():
        raise duplicate
    try:
        with artifacts_removed_on_error() as stored_names, transaction.atomic():
            submission = Submission.objects.create(
                federation=federation,
                organisation=user.organisation,
                submitted_by=user,
                public_dataset=public_dataset,
                model_family=model_family,
                n_local_examples=n_local_examples,
                local_validation_score=local_validation_score,
                label_distribution=label_distribution,
                privacy_level=privacy_level,
                privacy_parameters=privacy_parameters,
                declared_epsilon=declared_epsilon,
                privacy_report=privacy_report,
                own_model_validation_score=own_model_validation_score,
                partitions=partitions,
                teachers=teachers,
                disjoint_partitions=disjoint_partitions,
                content_sha256=content_sha256,
                idempotency_key=idempotency_key,
            )
            # L2: the declared ε, or BudgetExceeded
            submission_budget_charge(submission=submission, actor=user)
            for position, (model, inspection, file_hash) in enumerate(
                zip(models, inspections, file_hashes)
            ):
                stored_name = artifact_save(
                    name=f"federations/{federation.slug}/submissions/{submission.id}/{file_hash}",
                    data=model.data,
                    stored_names=stored_names,
                )
                ModelFile.objects.create(
                    submission=submission,
                    position=position,
                    original_name=model.name[:255],
                    stored_name=stored_name,
                    sha256=file_hash,
                    size_bytes=len(model.data),
                    **inspection,
                )
            audit_record(
                action="submission.uploaded",
                actor=user,
                target=submission,
                details={
                    "federation": federation.slug,
                    "files": len(models),
                    "privacy_level": privacy_level,
                    **({"exchange": exchange} if exchange is not None else {}),
                    **({"own_model": True} if own_position is not None else {}),
                },
            )
            outbox_add(SubmissionOutbox(submission=submission))  # validated once the broker has it
    except IntegrityError as error:
        replayed = _earlier_submission(
            user=user,
            idempotency_key=idempotency_key,
            federation=federation,
            content_sha256=content_sha256,
        )
        if (
            replayed is not None
        ):  # the same key arrived twice at once: the first one's submission stands
            return replayed
        if violated_constraint(error) != "no_duplicate_submission":
            raise  # not a duplicate: never answered as one (the budget's own constraint is the budgets' to answer)
        raise duplicate from error  # the same files arrived twice at once; the constraint let only one through
    except (
        BudgetExceeded
    ) as error:  # nothing was stored; the refusal is audited outside the rolled-back block
        budget_refusal_record(
            error=error, actor=user, target=federation, details={"privacy_level": privacy_level}
        )
        raise
    submission.replayed = False
    return submission


def _earlier_submission(
    *, user: User, idempotency_key: str | None, federation: Federation, content_sha256: str
) -> Submission | None:
    """The organisation's submission made with ``idempotency_key`` (``replayed`` set), if the same upload; None
    when the key is new; :class:`IdempotencyKeyReused` when it came with other files or another federation."""
    if idempotency_key is None:
        return None
    earlier = Submission.objects.filter(
        organisation=user.organisation, idempotency_key=idempotency_key
    ).first()
    if earlier is None:
        return None
    if (earlier.federation_id, earlier.content_sha256) != (federation.id, content_sha256):
        raise IdempotencyKeyReused(
            f"The Idempotency-Key {idempotency_key!r} was already used for another upload (submission "
            f"#{earlier.id}); send a new key for new files."
        )
    earlier.replayed = True
    return earlier
