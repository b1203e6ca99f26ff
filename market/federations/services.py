from decimal import Decimal, InvalidOperation

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from market.accounts.models import User
from market.audit.services import audit_record
from market.errors import Conflict, InvalidInput
from market.federations.models import (
    EvaluationSplit,
    Federation,
    MembershipPolicy,
    PrivacyLevel,
    PublicDataset,
    RevenueSplit,
)
from market.federations.selectors import public_dataset_current, require_operator
from market.storage import arrays_to_npz, artifact_save, artifacts_removed_on_error, sha256_of
from workers.features import (
    TableError,
    TableLimits,
    encode_features,
    encode_labels,
    infer_feature_spec,
    read_table,
    table_format,
)
from workers.privacy.settings import PRIVACY_UNITS


def table_limits() -> TableLimits:
    return TableLimits(
        max_rows=settings.ONEFOLD_TABLE_MAX_ROWS,
        max_archive_entries=settings.ONEFOLD_ARCHIVE_MAX_ENTRIES,
        max_unpacked_bytes=settings.ONEFOLD_ARCHIVE_MAX_UNPACKED_BYTES,
        max_memory_bytes=settings.ONEFOLD_TABLE_MAX_MEMORY_BYTES,
    )


def _clean_class_labels(class_labels: list) -> list[str]:
    labels = [str(label).strip() for label in class_labels]
    if len(labels) < 2 or any(not label for label in labels):
        raise InvalidInput(
            "A federation needs at least two non-empty class labels.", field="class_labels"
        )
    if len(set(labels)) != len(labels):
        raise InvalidInput("The class labels must be distinct.", field="class_labels")
    return labels


def _clean_privacy_levels(allowed: list[str], default: str) -> list[str]:
    unknown = sorted(set(allowed) - set(PrivacyLevel.values))
    if not allowed or unknown:
        raise InvalidInput(
            f"Allowed privacy levels must be a non-empty list of {', '.join(PrivacyLevel.values)}."
        )
    if default not in allowed:
        raise InvalidInput(
            f"The default privacy level {default} must be one of the allowed levels ({', '.join(allowed)})."
        )
    return [level for level in PrivacyLevel.values if level in allowed]


def _clean_privacy_units(value) -> list[str]:
    """The units a federation's L1 jobs may protect, in :data:`PRIVACY_UNITS` order; InvalidInput otherwise."""
    if (
        not isinstance(value, list)
        or not value
        or any(not isinstance(unit, str) or unit not in PRIVACY_UNITS for unit in value)
    ):
        raise InvalidInput(
            f"'privacy_units' must be a non-empty list of {', '.join(map(repr, PRIVACY_UNITS))} (what L1 jobs may "
            f"protect: one silo's whole data, one record), not {value!r}.",
            field="privacy_units",
        )
    return [unit for unit in PRIVACY_UNITS if unit in value]


def _clean_policies(policies: dict) -> dict:
    unknown = sorted(set(policies) - set(FEDERATION_POLICIES))
    if unknown:
        raise InvalidInput(f"Unknown federation setting(s): {', '.join(unknown)}.")
    cleaned = {}
    for name, value in policies.items():
        if name in ("default_epsilon_limit", "default_delta"):
            try:
                number = Decimal(str(value))
            except InvalidOperation:
                raise InvalidInput(f"'{name}' must be a number, not {value!r}.") from None
            if not number.is_finite() or number <= 0 or (name == "default_delta" and number >= 1):
                raise InvalidInput(
                    f"'{name}' must be positive{' and below 1' if name == 'default_delta' else ''}, "
                    f"not {value}."
                )
            cleaned[name] = number
        elif name == "membership_policy":
            if value not in MembershipPolicy.values:
                raise InvalidInput(
                    f"'membership_policy' must be one of {', '.join(MembershipPolicy.values)}, not {value!r}."
                )
            cleaned[name] = value
        elif name == "fd_min_contributors":
            if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 1000:
                raise InvalidInput(
                    f"'fd_min_contributors' must be a whole number from 2 to 1000 (an FD average of one "
                    f"silo is that silo's upload), not {value!r}."
                )
            cleaned[name] = value
        elif name == "privacy_units":
            cleaned[name] = _clean_privacy_units(value)
        elif name == "revenue_split":
            if value not in RevenueSplit.values:
                raise InvalidInput(
                    f"'revenue_split' must be one of {', '.join(RevenueSplit.values)}, not {value!r}."
                )
            cleaned[name] = value
        elif not isinstance(value, bool):
            raise InvalidInput(f"'{name}' must be true or false, not {value!r}.")
        else:
            cleaned[name] = value
    return cleaned


#: What else an operator may set when creating a federation (the model's defaults apply otherwise).
FEDERATION_POLICIES = (
    "default_epsilon_limit",
    "default_delta",
    "publish_data_dependent_epsilon",
    "publish_contributions",
    "buyers_may_launch_jobs",
    "accepts_own_models",
    "fd_min_contributors",
    "membership_policy",
    "revenue_split",
    "privacy_units",
)


@transaction.atomic
def federation_create(
    *,
    name: str,
    description: str,
    class_labels: list,
    label_column: str,
    allowed_privacy_levels: list[str],
    default_privacy_level: str,
    default_parameters: dict,
    created_by: User,
    policies: dict | None = None,
    request=None,
) -> Federation:
    """A new federation (audited); ``policies`` may set any of :data:`FEDERATION_POLICIES`."""
    require_operator(created_by, "create federations")
    slug = slugify(name)
    if not slug:
        raise InvalidInput("The federation's name needs at least one letter or digit.")
    if (
        Federation.objects.filter(slug=slug).exists()
        or Federation.objects.filter(name=name).exists()
    ):
        raise Conflict(f"A federation called {name!r} already exists; choose another name.")
    if not label_column.strip():
        raise InvalidInput("Name the label column of the federation's data (for example 'label').")
    federation = Federation.objects.create(
        slug=slug,
        name=name,
        description=description,
        class_labels=_clean_class_labels(class_labels),
        label_column=label_column.strip(),
        default_parameters=default_parameters,
        created_by=created_by,
        allowed_privacy_levels=_clean_privacy_levels(allowed_privacy_levels, default_privacy_level),
        default_privacy_level=default_privacy_level,
        **_clean_policies(policies or {}),
    )
    audit_record(
        action="federation.created",
        actor=created_by,
        target=federation,
        request=request,
        details={
            "slug": slug,
            "classes": len(federation.class_labels),
            "allowed_privacy_levels": federation.allowed_privacy_levels,
        },
    )
    return federation


def _name_taken(name: str, *, other_than: Federation | None = None) -> bool:
    others = Federation.objects.exclude(id=other_than.id) if other_than else Federation.objects
    return others.filter(name__iexact=name).exists()


@transaction.atomic
def federation_update(
    *,
    federation: Federation,
    user: User,
    name: str | None = None,
    description: str | None = None,
    membership_policy: str | None = None,
    revenue_split: str | None = None,
    privacy_units: list[str] | None = None,
    request=None,
) -> Federation:
    """Change a federation's name, description, membership policy, revenue split policy or the privacy units its
    L1 jobs may protect (audited with each change, from and to); its slug, and so every link to it, stays. A membership policy applies to later joins only
    (members stay members); a revenue split policy to later sales only (the ledger's entries stay as paid)."""
    require_operator(user, "edit federations")
    federation = Federation.objects.select_for_update().get(id=federation.id)
    changes = {}
    if name is not None and name.strip() != federation.name:
        name = name.strip()
        if not name or len(name) > 200:
            raise InvalidInput("A federation's name has 1 to 200 characters.", field="name")
        if _name_taken(name, other_than=federation):
            raise Conflict(f"A federation called {name!r} already exists; choose another name.")
        changes["name"] = name
    if description is not None and description != federation.description:
        changes["description"] = description
    if membership_policy is not None and membership_policy != federation.membership_policy:
        changes.update(_clean_policies({"membership_policy": membership_policy}))
    if revenue_split is not None and revenue_split != federation.revenue_split:
        changes.update(_clean_policies({"revenue_split": revenue_split}))
    if (
        privacy_units is not None
    ):  # applies to later L1 jobs only: jobs already charged stay as charged
        cleaned = _clean_privacy_units(privacy_units)
        if cleaned != federation.privacy_units:
            changes["privacy_units"] = cleaned
    if changes:
        before = {field: getattr(federation, field) for field in changes}
        for field, value in changes.items():
            setattr(federation, field, value)
        federation.save(update_fields=list(changes))
        audit_record(
            action="federation.updated",
            actor=user,
            target=federation,
            request=request,
            details={
                "slug": federation.slug,
                "changed": {
                    field: {"from": before[field], "to": changes[field]}
                    for field in changes
                    if field != "description"
                }
                | ({"description": "changed"} if "description" in changes else {}),
            },
        )
    return federation


def feature_spec_preview(*, federation: Federation, data: bytes, user: User) -> dict:
    """The feature specification a public dataset upload of ``data`` would infer; nothing is stored."""
    require_operator(user, "upload public datasets")
    return infer_feature_spec(
        read_table(data, limits=table_limits()), label_column=federation.label_column
    )


def public_dataset_upload(
    *, federation: Federation, data: bytes, uploaded_by: User, request=None
) -> PublicDataset:
    """Infer the feature specification, encode the features once and store them with content hashes (audited)."""
    require_operator(uploaded_by, "upload public datasets")
    content_sha256 = sha256_of(data)
    duplicate = Conflict("This file is already one of the federation's public dataset versions.")
    if federation.public_datasets.filter(content_sha256=content_sha256).exists():
        raise duplicate
    frame = read_table(data, limits=table_limits())
    spec = infer_feature_spec(frame, label_column=federation.label_column)
    features_npz = arrays_to_npz(features=encode_features(frame, spec))
    try:
        with artifacts_removed_on_error() as stored_names, transaction.atomic():
            features_file = artifact_save(
                name=f"federations/{federation.slug}/public/{content_sha256}.npz",
                data=features_npz,
                stored_names=stored_names,
            )
            public_dataset = PublicDataset.objects.create(
                federation=federation,
                content_sha256=content_sha256,
                features_sha256=sha256_of(features_npz),
                features_file=features_file,
                feature_spec=spec,
                source_format=table_format(data),
                n_rows=len(frame),
                n_features=spec["n_features"],
                uploaded_by=uploaded_by,
            )
            audit_record(
                action="public_dataset.uploaded",
                actor=uploaded_by,
                target=public_dataset,
                request=request,
                details={
                    "federation": federation.slug,
                    "sha256": content_sha256,
                    "rows": len(frame),
                    "features": spec["n_features"],
                },
            )
            return public_dataset
    except IntegrityError as error:  # the same file arrived twice at once
        raise duplicate from error


def evaluation_split_upload(
    *, federation: Federation, data: bytes, uploaded_by: User, request=None
) -> EvaluationSplit:
    """Encode a labelled split with the current public specification (audited); only operators ever read it back."""
    require_operator(uploaded_by, "upload evaluation splits")
    public_dataset = public_dataset_current(federation=federation)
    content_sha256 = sha256_of(data)
    duplicate = Conflict("This file is already one of the federation's evaluation splits.")
    if federation.evaluation_splits.filter(content_sha256=content_sha256).exists():
        raise duplicate
    frame = read_table(data, limits=table_limits())
    if federation.label_column not in frame.columns:
        raise InvalidInput(
            f"The evaluation split has no '{federation.label_column}' column; "
            "it needs the federation's label column."
        )
    try:
        labels = encode_labels(frame[federation.label_column], federation.class_labels)
    except TableError as error:
        raise InvalidInput(str(error)) from error
    features = encode_features(frame, public_dataset.feature_spec)
    data_npz = arrays_to_npz(features=features, labels=labels)
    try:
        with artifacts_removed_on_error() as stored_names, transaction.atomic():
            data_file = artifact_save(
                name=f"federations/{federation.slug}/evaluation/{content_sha256}.npz",
                data=data_npz,
                stored_names=stored_names,
            )
            split = EvaluationSplit.objects.create(
                federation=federation,
                public_dataset=public_dataset,
                content_sha256=content_sha256,
                data_file=data_file,
                n_rows=len(frame),
                uploaded_by=uploaded_by,
                class_counts=np.bincount(labels, minlength=federation.n_classes).tolist(),
            )
            audit_record(
                action="evaluation_split.uploaded",
                actor=uploaded_by,
                target=split,
                request=request,
                details={
                    "federation": federation.slug,
                    "sha256": content_sha256,
                    "rows": len(frame),
                },
            )
            return split
    except IntegrityError as error:  # the same file arrived twice at once
        raise duplicate from error
