from django import template
from django.utils.html import format_html

from frontend.sent_once import FORM_KEY_FIELD, page_form_key
from market.submissions.models import SubmissionStatus

register = template.Library()

FINAL_STATUSES = {SubmissionStatus.VALID, SubmissionStatus.REJECTED}


@register.filter
def status_is_final(submission) -> bool:
    """Whether the submission's status can still change (pages keep polling until it cannot)."""
    return submission.status in FINAL_STATUSES


@register.simple_tag(takes_context=True)
def form_key_field(context):
    """The hidden one-time key of a state-changing form (:mod:`frontend.sent_once`): one per rendered page, kept
    by form_key.js in the page's history entry for a page loaded again by Back or Reload."""
    return format_html(
        '<input type="hidden" name="{}" value="{}" data-page-form-key>',
        FORM_KEY_FIELD,
        page_form_key(context.get("request")),
    )
