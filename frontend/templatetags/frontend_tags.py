import uuid

from django import template
from django.utils.html import format_html

from frontend.sent_once import FORM_KEY_FIELD
from market.submissions.models import SubmissionStatus

register = template.Library()

FINAL_STATUSES = {SubmissionStatus.VALID, SubmissionStatus.REJECTED}


@register.filter
def status_is_final(submission) -> bool:
    """Whether the submission's status can still change (pages keep polling until it cannot)."""
    return submission.status in FINAL_STATUSES


@register.simple_tag
def form_key_field():
    """The hidden one-time key of a state-changing form (:mod:`frontend.sent_once`): a new one each time the page
    is rendered, the same one when the browser sends the rendered form again."""
    return format_html(
        '<input type="hidden" name="{}" value="{}">', FORM_KEY_FIELD, f"form-{uuid.uuid4()}"
    )
