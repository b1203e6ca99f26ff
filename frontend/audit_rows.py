"""The audit log as people read it: each event's object as a link where the app has a page for it, and its
details as labelled values (JSON for nested values, never a Python repr)."""

import json

from django.urls import reverse

from market.federations.models import Federation


def _federation_slugs(events) -> dict[str, str]:
    ids = {
        event.object_id
        for event in events
        if event.object_type == "Federation" and event.object_id.isdecimal()
    }
    return {
        str(pk): slug
        for pk, slug in Federation.objects.filter(pk__in=ids).values_list("pk", "slug")
    }


def _object_url(event, federation_slugs: dict[str, str]) -> str:
    if not event.object_id.isdecimal():
        return ""
    if event.object_type == "Job":
        return reverse("job-detail", args=[int(event.object_id)])
    if event.object_type == "Listing":
        return reverse("commerce-listing", args=[int(event.object_id)])
    if event.object_type == "Federation" and event.object_id in federation_slugs:
        return reverse("federation-detail", args=[federation_slugs[event.object_id]])
    return ""


def readable_value(value) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "—"}[value]
    return str(value)


def audit_rows(events) -> list[dict]:
    events = list(events)
    federation_slugs = _federation_slugs(events)
    return [
        {
            "event": event,
            "object_url": _object_url(event, federation_slugs),
            "object_label": f"{event.object_type} #{event.object_id}" if event.object_type else "",
            "details": [
                (key.replace("_", " "), readable_value(value))
                for key, value in sorted((event.details or {}).items())
            ],
        }
        for event in events
    ]
