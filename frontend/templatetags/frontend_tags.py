from django import template

from market.submissions.models import SubmissionStatus

register = template.Library()

FINAL_STATUSES = {SubmissionStatus.VALID, SubmissionStatus.REJECTED}


@register.filter
def status_is_final(submission) -> bool:
    """Whether the submission's status can still change (pages keep polling until it cannot)."""
    return submission.status in FINAL_STATUSES
