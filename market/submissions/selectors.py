from django.db.models import QuerySet

from market.accounts.models import User
from market.errors import NotFound
from market.submissions.models import Submission


def submission_list(*, user: User, federation_slug: str | None = None) -> QuerySet[Submission]:
    """Operators see every submission; everyone else only their own organisation's."""
    submissions = Submission.objects.select_related("federation", "organisation").prefetch_related(
        "model_files"
    )
    if not user.is_operator:
        submissions = (
            submissions.filter(organisation_id=user.organisation_id)
            if user.organisation_id
            else submissions.none()
        )
    if federation_slug:
        submissions = submissions.filter(federation__slug=federation_slug)
    return submissions


def submission_get(*, submission_id: int, user: User) -> Submission:
    submission = submission_list(user=user).filter(id=submission_id).first()
    if submission is None:
        raise NotFound(f"There is no submission #{submission_id} that your organisation can see.")
    return submission
