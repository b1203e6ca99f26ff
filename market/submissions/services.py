"""Writes of submissions: a silo's upload (its model files, privacy declaration and design), checked before
anything is stored (market.submissions.uploads: format, static inspection, declared privacy), stored with its L2
charge and its outbox row in one transaction. Validating the stored models in the sandbox is a worker's
(workers.submission_validation), recording its verdict through market.submissions.validation.
"""

from django.db import IntegrityError, transaction

from market.accounts.models import User
from market.audit.services import audit_record, audit_refusals
from market.budgets.services import BudgetExceeded, budget_refusal_record
from market.constraints import violated_constraint
from market.errors import (
    Conflict,
    IdempotencyKeyReused,
    InvalidInput,
    PermissionDenied,
)
from market.federations.models import Federation
from market.federations.selectors import federation_is_member, public_dataset_current
from market.outbox import outbox_add
from market.storage import artifact_save, artifacts_removed_on_error
from market.submissions.models import ModelFile, Submission, SubmissionOutbox
from market.submissions.spending import submission_budget_charge
from market.submissions.uploads import CheckedUpload, SubmissionUpload, upload_checked


@audit_refusals("submission.uploaded", target_argument="federation")
def submission_create(
    *, federation: Federation, user: User, upload: SubmissionUpload
) -> Submission:
    """Check and store a silo's upload, then queue its validation by a worker. The same ``idempotency_key`` with
    the same federation and files returns the first submission (``replayed`` True on it, nothing stored or charged
    again); with others it is refused (422)."""
    key = upload.idempotency_key
    if key is not None and not 1 <= len(key) <= 200:
        raise InvalidInput("The Idempotency-Key header must be 1 to 200 characters long.")
    if user.organisation is None or not federation_is_member(federation=federation, user=user):
        raise PermissionDenied(
            f"Your organisation is not a member of '{federation.slug}'; join it first."
        )
    if not upload.models:
        raise InvalidInput("Attach at least one model file.")
    public_dataset = public_dataset_current(federation=federation)
    checked = upload_checked(
        federation=federation, user=user, upload=upload, public_dataset=public_dataset
    )
    replayed = _earlier_submission(
        user=user, idempotency_key=key, federation=federation, content_sha256=checked.content_sha256
    )
    if replayed is not None:
        return replayed
    if Submission.objects.filter(
        federation=federation, organisation=user.organisation, content_sha256=checked.content_sha256
    ).exists():
        raise _duplicate()
    try:
        submission = _submission_store(
            federation=federation, user=user, checked=checked, public_dataset=public_dataset
        )
    except IntegrityError as error:
        return _submission_raced(federation=federation, user=user, checked=checked, error=error)
    except (
        BudgetExceeded
    ) as error:  # nothing was stored; the refusal is audited outside the rolled-back block
        budget_refusal_record(
            error=error,
            actor=user,
            target=federation,
            details={"privacy_level": upload.privacy_level},
        )
        raise
    submission.replayed = False
    return submission


def _duplicate() -> Conflict:
    return Conflict(
        "Your organisation already submitted exactly these model files to this federation."
    )


def _submission_store(
    *, federation: Federation, user: User, checked: CheckedUpload, public_dataset
) -> Submission:
    """The submission, its L2 charge, its files, its audit entry and its outbox row, in one transaction."""
    upload = checked.upload
    with artifacts_removed_on_error() as stored_names, transaction.atomic():
        submission = Submission.objects.create(
            federation=federation,
            organisation=user.organisation,
            submitted_by=user,
            public_dataset=public_dataset,
            model_family=upload.model_family,
            n_local_examples=upload.n_local_examples,
            local_validation_score=upload.local_validation_score,
            label_distribution=upload.label_distribution,
            privacy_level=upload.privacy_level,
            privacy_parameters=upload.privacy_parameters,
            declared_epsilon=upload.declared_epsilon,
            privacy_report=checked.privacy_report,
            own_model_validation_score=upload.own_model_validation_score,
            partitions=upload.partitions,
            teachers=upload.teachers,
            disjoint_partitions=upload.disjoint_partitions,
            content_sha256=checked.content_sha256,
            idempotency_key=upload.idempotency_key,
        )
        # L2: the declared ε, or BudgetExceeded
        submission_budget_charge(submission=submission, actor=user)
        _model_files_store(submission, checked=checked, stored_names=stored_names)
        audit_record(
            action="submission.uploaded",
            actor=user,
            target=submission,
            details={
                "federation": federation.slug,
                "files": len(checked.models),
                "privacy_level": upload.privacy_level,
                **({"exchange": upload.exchange} if upload.exchange is not None else {}),
                **({"own_model": True} if checked.has_own_model else {}),
            },
        )
        outbox_add(SubmissionOutbox(submission=submission))  # validated once the broker has it
    return submission


def _model_files_store(submission: Submission, *, checked: CheckedUpload, stored_names) -> None:
    for position, (model, inspection, file_hash) in enumerate(
        zip(checked.models, checked.inspections, checked.file_hashes)
    ):
        stored_name = artifact_save(
            name=f"federations/{submission.federation.slug}/submissions/{submission.id}/{file_hash}",
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


def _submission_raced(
    *, federation: Federation, user: User, checked: CheckedUpload, error: IntegrityError
) -> Submission:
    """The answer when a constraint stopped the store: the first submission of a key that arrived twice at once,
    or a duplicate's refusal; any other violation is raised (the budget's own constraint is the budgets' to
    answer)."""
    replayed = _earlier_submission(
        user=user,
        idempotency_key=checked.upload.idempotency_key,
        federation=federation,
        content_sha256=checked.content_sha256,
    )
    if replayed is not None:
        return replayed
    if violated_constraint(error) != "no_duplicate_submission":
        raise error
    raise _duplicate() from error  # the same files arrived twice at once; the constraint let only one through


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
