"""A silo's upload as the API reads it (:class:`SubmissionUpload`, its files :class:`UploadedModel`) and its checks
before anything is stored (:func:`upload_checked`): the declared privacy, exchange, label distribution, own model
and FedKT design, then each file's format and static inspection (nothing native is loaded). Storing it is
market.submissions.services'.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from market.accounts.models import User
from market.budgets.services import epsilon_decimal
from market.errors import InvalidInput, RefusedFormat
from market.exchanges.models import LogitUpload
from market.federations.models import Federation, PrivacyLevel, PublicDataset
from market.sandbox import model_limits
from market.storage import sha256_of
from market.submissions.models import OWN_MODEL_ROLE
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


@dataclass(frozen=True)
class SubmissionUpload:
    """A silo's upload as the API or a page read it from validated input: its model files and what it declares.

    ``feature_view`` is the view of the federation's features the models read (market.feature_views); their input
    width must match it. ``exchange``: the FD exchange the network was trained through, if any (it must then be
    L0). ``own_model_file``: the name of the uploaded file that is the silo's own model on all its rows, with its
    held-out ``own_model_validation_score`` (stored last, its ``ModelFile.info["role"]`` :data:`OWN_MODEL_ROLE`);
    ``partitions`` and ``teachers``: the FedKT design the silo trained its students with; ``disjoint_partitions``:
    the silo's declaration that each student was fitted on its own disjoint partition of its rows (record-level L1).
    ``idempotency_key``: the uploader's ``Idempotency-Key``."""

    models: Sequence[UploadedModel]
    model_family: str
    n_local_examples: int
    local_validation_score: float
    label_distribution: list | None
    privacy_level: str
    privacy_parameters: dict
    declared_epsilon: float | None
    feature_view: str = ONE_HOT_VIEW
    exchange: int | None = None
    own_model_file: str | None = None
    own_model_validation_score: float | None = None
    partitions: int | None = None
    teachers: int | None = None
    disjoint_partitions: bool = False
    idempotency_key: str | None = None


@dataclass(frozen=True)
class CheckedUpload:
    """An upload that passed every check before storage: its models in stored order (the own model last), their
    inspections and hashes, and the privacy report its L2 declaration implies."""

    upload: SubmissionUpload
    models: list[UploadedModel]
    inspections: list[dict]
    file_hashes: list[str]
    content_sha256: str
    privacy_report: dict | None
    has_own_model: bool


def upload_checked(
    *, federation: Federation, user: User, upload: SubmissionUpload, public_dataset: PublicDataset
) -> CheckedUpload:
    """Every check before storage, declarations first, then the files' bytes (nothing native is loaded)."""
    privacy_report = _check_privacy_declaration(
        federation=federation,
        privacy_level=upload.privacy_level,
        privacy_parameters=upload.privacy_parameters,
        declared_epsilon=upload.declared_epsilon,
        model_family=upload.model_family,
        n_local_examples=upload.n_local_examples,
    )
    _check_exchange_declaration(
        federation=federation,
        user=user,
        privacy_level=upload.privacy_level,
        exchange_id=upload.exchange,
    )
    _check_label_distribution(
        upload.label_distribution,
        n_classes=federation.n_classes,
        n_local_examples=upload.n_local_examples,
    )
    models = list(upload.models)
    own_position = _own_model_checked(
        federation=federation,
        models=models,
        privacy_level=upload.privacy_level,
        own_model_file=upload.own_model_file,
        own_model_validation_score=upload.own_model_validation_score,
    )
    _check_design(
        partitions=upload.partitions,
        teachers=upload.teachers,
        n_students=len(models) - (own_position is not None),
        privacy_parameters=upload.privacy_parameters,
    )
    if own_position is not None:  # stored last (workers.algorithms.registry.member_model_positions)
        models = [model for index, model in enumerate(models) if index != own_position] + [
            models[own_position]
        ]
    inspections = _inspections(
        models,
        n_features=view_width(public_dataset.feature_spec, upload.feature_view),
        n_classes=federation.n_classes,
        feature_view=upload.feature_view,
        has_own_model=own_position is not None,
    )
    file_hashes = [sha256_of(model.data) for model in models]
    return CheckedUpload(
        upload=upload,
        models=models,
        inspections=inspections,
        file_hashes=file_hashes,
        content_sha256=sha256_of("".join(file_hashes).encode()),
        privacy_report=privacy_report,
        has_own_model=own_position is not None,
    )


def _inspections(
    models: list[UploadedModel],
    *,
    n_features: int,
    n_classes: int,
    feature_view: str,
    has_own_model: bool,
) -> list[dict]:
    """Each file's static inspection, labelled with the feature view it reads (and the own model's role)."""
    inspections = [
        _inspect_upload(model, n_features=n_features, n_classes=n_classes) for model in models
    ]
    for inspection in inspections:
        inspection["info"]["feature_view"] = feature_view
    if has_own_model:
        inspections[-1]["info"]["role"] = OWN_MODEL_ROLE
    return inspections
