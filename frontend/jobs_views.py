"""Job pages: the launcher (with the privacy price of an L1 job and, for operators, a pre-flight estimate of its
model before launching), the job list, and the job page whose progress, log and results htmx refreshes every second
until the job ends.

They call the same services and selectors as ``/api/federations/<slug>/jobs/`` and ``/api/jobs/<id>/``.
"""

import io
import json
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from frontend.decorators import page
from frontend.sent_once import sent_once
from frontend.value_plot import contribution_value_bars
from market.budgets.selectors import price_quote_visible
from market.errors import DomainError, InvalidInput, RateLimited
from market.federations.selectors import (
    evaluation_split_current,
    federation_get,
    public_dataset_current,
)
from market.jobs.advice import estimate_advice
from market.jobs.models import EstimateStatus, JobStatus
from market.jobs.parameters import (
    job_kind_choices,
    job_kind_default,
    job_kind_priced_default,
    job_learns_from_evaluation,
    job_parameter_choices,
    job_parameter_defaults,
    job_parameter_help,
)
from market.jobs.preflight import (
    ESTIMATED_LEVELS,
    job_estimate_create,
    job_estimate_get,
    job_estimate_lost,
    job_estimate_progress,
)
from market.jobs.pricing import job_price_quote
from market.jobs.quality import launcher_statements, quality_verdict
from market.jobs.selectors import (
    SUBMISSION_LEVELS_FOR,
    job_get,
    job_launch_require_permission,
    job_levels_available,
    job_list,
    job_log_lines,
    job_progress,
)
from market.jobs.services import (
    EstimateGateRefusal,
    EstimateOverride,
    FailedEstimateRefusal,
    job_cancel,
    job_create,
)
from market.jobs.visibility import (
    estimate_visible,
    global_model_view,
    named_contribution_values,
    named_contributions,
    named_submission_metrics,
    named_value_copies,
)
from market.json_input import json_text_parse
from market.submissions.models import Submission, SubmissionStatus
from market.submissions.selectors import submission_list
from workers.numbers import without_float_noise
from workers.privacy.settings import PrivacySettings

FINAL = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


def _defaults_by_kind(federation) -> dict:
    n_public = public_dataset_current(federation=federation).n_rows
    defaults = {}
    for kind, _ in job_kind_choices():
        for level in federation.allowed_privacy_levels:
            try:
                defaults[f"{kind}-{level}"] = form_parameters(
                    job_parameter_defaults(
                        kind=kind, federation=federation, n_public=n_public, privacy_level=level
                    )
                )
            except (InvalidInput, ValueError):
                continue
    return defaults


def form_parameters(parameters: dict, *, order: dict | None = None) -> dict:
    """Parameters as the launcher's form shows them, one control per concept: the privacy settings a request
    gives (``n_queries`` follows from the query: PrivacySettings.given), keys in ``order``'s order where given
    (a stored estimate's parameters come back from PostgreSQL in its own key order), floats without noise."""
    shown = {key: value for key, value in parameters.items() if key != "privacy"}
    if "privacy" in parameters:
        shown["privacy"] = PrivacySettings.of(parameters["privacy"]).given()
    return without_float_noise(_in_order(shown, order or {}))


def _in_order(values: dict, order: dict) -> dict:
    ranked = sorted(values, key=lambda key: list(order).index(key) if key in order else len(order))
    return {
        key: _in_order(values[key], order[key])
        if isinstance(values[key], dict) and isinstance(order.get(key), dict)
        else values[key]
        for key in ranked
    }


def _form_values(request, federation) -> dict:
    kind = request.POST.get("kind") or request.GET.get("kind") or job_kind_default()
    # the federation's default level, or the first that can run where it cannot
    runnable = [
        level for level, why_not in job_levels_available(federation=federation) if not why_not
    ]
    default_level = (
        federation.default_privacy_level
        if federation.default_privacy_level in runnable or not runnable
        else runnable[0]
    )
    level = request.POST.get("privacy_level") or request.GET.get("privacy_level") or default_level
    return {
        "kind": kind,
        "privacy_level": level,
        # a proposal's link (the budget advisor's, _advice_context) fills the form from its address
        "parameters": request.POST.get("parameters") or request.GET.get("parameters", ""),
        "seed": request.POST.get("seed") or request.GET.get("seed", ""),
        "submissions": request.POST.getlist("submissions") or request.GET.getlist("submissions"),
        "acknowledge_failed_estimate": request.POST.get("acknowledge_failed_estimate", ""),
        "launch_despite_estimate": request.POST.get("launch_despite_estimate", ""),
        "launch_reason": request.POST.get("launch_reason", ""),
    }


def _estimate_context(estimate) -> dict:
    """What the launcher's estimate section shows of ``estimate`` (None: nothing asked yet)."""
    if estimate is None:
        return {"estimate": None}
    succeeded = estimate.status == EstimateStatus.SUCCEEDED
    statements = (
        launcher_statements(
            result=estimate.result, class_labels=estimate.federation.class_labels or []
        )
        if succeeded
        else None
    )
    return {
        **_advice_context(estimate),
        "estimate": estimate,
        "estimate_progress": job_estimate_progress(estimate),
        "estimate_final": estimate.status in (EstimateStatus.SUCCEEDED, EstimateStatus.FAILED)
        or job_estimate_lost(estimate),
        "estimate_statements": statements,
        # Launch waits for a ticked box and a reason while the form holds what this estimate says fails the gate.
        "confirm_estimate_id": estimate.id
        if statements and not statements["passes_gate"]
        else None,
    }


def _advice_context(estimate) -> dict:
    """The budget advisor's candidates and proposal of a succeeded L1 estimate (market.jobs.advice), with the
    launcher's address that fills the form with the proposal (its parameters, the estimate's seed and members)."""
    advice = (
        estimate_advice(result=estimate.result, class_labels=estimate.federation.class_labels or [])
        if estimate.status == EstimateStatus.SUCCEEDED
        else None
    )
    if advice is None or advice["proposal"] is None:
        return {"advice": advice, "advice_url": None}
    query = urlencode(
        {
            "kind": estimate.kind,
            "privacy_level": estimate.privacy_level,
            "parameters": json.dumps(form_parameters(advice["proposal"]["parameters"]), indent=2),
            "seed": estimate.seed,
            "submissions": estimate.submission_ids,
        },
        doseq=True,
    )
    return {
        "advice": advice,
        "advice_url": f"{reverse('job-launch', args=[estimate.federation.slug])}?{query}",
    }


def _previous_job(request, federation, values: dict) -> dict | None:
    """The newest succeeded job of the chosen kind and level here that the viewer may see, with what the quality
    rule says of its model under the viewer's baselines (market.jobs.quality), when it says anything."""
    job = (
        job_list(user=request.user, federation_slug=federation.slug)
        .filter(kind=values["kind"], privacy_level=values["privacy_level"])
        .filter(status=JobStatus.SUCCEEDED, global_model__isnull=False)
        .first()
    )
    if job is None:
        return None
    view = global_model_view(global_model=job.global_model, user=request.user)
    statements = quality_verdict(job.global_model, baselines=view.baselines).statements()
    return {"job": job, "statements": statements} if statements else None


def _values_of(estimate) -> dict:
    """The launcher's form as the estimate was asked, so that launching after it launches what was estimated
    (its seed too: the job's non-DP randomness is then the estimate's)."""
    return {
        "kind": estimate.kind,
        "privacy_level": estimate.privacy_level,
        "parameters": json.dumps(
            form_parameters(
                estimate.parameters,
                order=_defaults_by_kind(estimate.federation).get(
                    f"{estimate.kind}-{estimate.privacy_level}"
                ),
            ),
            indent=2,
        ),
        "seed": str(estimate.seed),
        "submissions": [str(id) for id in estimate.submission_ids],
    }


def _launcher_context(request, federation, values: dict, error: str = "", estimate=None) -> dict:
    defaults = _defaults_by_kind(federation)
    levels = job_levels_available(federation=federation)
    if not values["parameters"]:
        values["parameters"] = json.dumps(
            defaults.get(f"{values['kind']}-{values['privacy_level']}", {}), indent=2
        )
    # As the API lists them: operators every submission, anyone else their own organisation's.
    submissions = (
        submission_list(user=request.user, federation_slug=federation.slug)
        .filter(status=SubmissionStatus.VALID)
        .order_by("id")
    )
    return {
        "section": "jobs",
        "federation": federation,
        "kinds": job_kind_choices(),
        "levels": levels,
        "levels_unavailable": [(level, why_not) for level, why_not in levels if why_not],
        "values": values,
        "help": job_parameter_help(),
        "choices": job_parameter_choices(),
        "error": error,
        "submissions": submissions,
        "defaults": defaults,
        "chosen": set(values["submissions"]) or {str(s.id) for s in submissions},
        "may_estimate": estimate_visible(user=request.user),
        "estimated_levels": ESTIMATED_LEVELS,
        "previous": _previous_job(request, federation, values),
        **_estimate_context(estimate),
    }


@require_http_methods(["GET", "POST"])
@page
@sent_once
def job_launch_page(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    job_launch_require_permission(federation=federation, user=request.user)
    values = _form_values(request, federation)
    if request.method == "GET":
        estimate = _asked_estimate(request)
        if estimate is not None and estimate.federation_id == federation.id:
            values = _values_of(estimate)
        return render(
            request,
            "frontend/jobs/launch.html",
            _launcher_context(request, federation, values, estimate=estimate),
        )
    try:
        request_fields = _launch_fields(values)
    except ValueError as error:
        return render(
            request,
            "frontend/jobs/launch.html",
            _launcher_context(request, federation, values, _unreadable(error)),
            status=400,
        )
    try:
        job = job_create(
            federation=federation, requested_by=request.user, request=request, **request_fields
        )
    except DomainError as error:
        context = _launcher_context(request, federation, values, str(error))
        # the refusal names the estimate: the launcher may tick that it has read why (and, where the estimate
        # expects a model that fails the gate, write why) and launch anyway
        if isinstance(error, FailedEstimateRefusal):
            context["failed_estimate_id"] = error.estimate_id
        if isinstance(error, EstimateGateRefusal) or values["launch_despite_estimate"]:
            context["confirm_estimate_id"] = (
                error.estimate_id
                if isinstance(error, EstimateGateRefusal)
                else int(values["launch_despite_estimate"])
            )
        return render(request, "frontend/jobs/launch.html", context, status=error.status_code)
    messages.success(request, f"Job #{job.id} queued.")
    return redirect("job-detail", job_id=job.id)


def _request_fields(values: dict) -> dict:
    """The form's job request as the services take it; ValueError when a field cannot be read."""
    submission_ids = [int(id) for id in values["submissions"]]
    return {
        "kind": values["kind"],
        "privacy_level": values["privacy_level"],
        "parameters": json_text_parse(values["parameters"] or "{}"),
        "seed": int(values["seed"]) if values["seed"].strip() else None,
        "submissions": submission_ids or "all",
    }


def _launch_fields(values: dict) -> dict:
    """:func:`_request_fields` and, where the launcher ticked them, the failed estimate it has read and the
    estimate it launches despite, with the reason written beside it."""
    acknowledged = values["acknowledge_failed_estimate"]
    despite = values["launch_despite_estimate"]
    return {
        **_request_fields(values),
        "acknowledge_failed_estimate": int(acknowledged) if acknowledged.strip() else None,
        "launch_despite_estimate": EstimateOverride(
            estimate_id=int(despite), reason=values["launch_reason"]
        )
        if despite.strip()
        else None,
    }


def _unreadable(error: ValueError) -> str:
    return (
        f"The parameters must be a JSON object, the seed and the submissions whole numbers: {error}"
    )


def _asked_estimate(request):
    """The estimate the launcher's address names (``?estimate=``), for an operator; None otherwise."""
    asked = request.GET.get("estimate", "")
    if not asked.isdigit() or not estimate_visible(user=request.user):
        return None
    return job_estimate_get(estimate_id=int(asked), user=request.user)


@require_POST
@page
@sent_once
def job_estimate_action(request, slug):
    """Ask for a pre-flight estimate of the launcher's job (operators only) and show the launcher with it; the same
    form sent again (Back, reload) is answered by its first send (sent_once), and the same request from a new form
    reads the estimate already running or done (market.jobs.preflight)."""
    federation = federation_get(slug=slug, user=request.user)
    values = _form_values(request, federation)
    try:
        request_fields = _request_fields(values)
    except ValueError as error:
        return render(
            request,
            "frontend/jobs/launch.html",
            _launcher_context(request, federation, values, _unreadable(error)),
            status=400,
        )
    try:
        created = job_estimate_create(
            federation=federation, requested_by=request.user, **request_fields
        )
    except DomainError as error:
        response = render(
            request,
            "frontend/jobs/launch.html",
            _launcher_context(request, federation, values, str(error)),
            status=error.status_code,
        )
        if isinstance(error, RateLimited):
            response["Retry-After"] = str(error.retry_after)
        return response
    if created.replayed:
        messages.info(request, "This estimate was already asked for; here it is.")
    return redirect(
        f"{reverse('job-launch', args=[federation.slug])}?estimate={created.estimate.id}"
    )


@require_GET
@page
def job_estimate_partial(request, estimate_id):
    """What htmx swaps in every second while an estimate runs; then its scores and statements, and no more polls."""
    estimate = job_estimate_get(estimate_id=estimate_id, user=request.user)
    return render(request, "frontend/jobs/partials/estimate.html", _estimate_context(estimate))


@require_GET
@page
def job_price_partial(request, slug):
    """The privacy price of the form's L1 parameters, without reserving anything; like the budget-price API, a
    non-operator sees its own silo's line and whether the job fits that budget only."""
    federation = federation_get(slug=slug, user=request.user)
    job_launch_require_permission(federation=federation, user=request.user)
    context = {"quote": None, "message": ""}
    level = request.GET.get("privacy_level")
    if level != "L1":
        context["message"] = (
            "L0 spends no privacy budget (no noise; members trust each other)."
            if level == "L0"
            else "L2 students were charged their declared ε at upload; this job costs nothing more."
        )
    else:
        try:
            kind = request.GET.get("kind") or job_kind_priced_default()
            ids = [int(id) for id in request.GET.getlist("submissions")]
            # One entry per submission: a silo with k submissions in the job is priced for moving k·s votes.
            organisations = list(
                Submission.objects.filter(
                    federation=federation,
                    status=SubmissionStatus.VALID,
                    privacy_level__in=SUBMISSION_LEVELS_FOR["L1"],
                    **({"id__in": ids} if ids else {}),
                ).values_list("organisation_id", flat=True)
            )
            parameters = json_text_parse(request.GET.get("parameters") or "{}")
            quote = job_price_quote(
                federation=federation,
                organisations=organisations,
                kind=kind,
                parameters=parameters,
                privacy=None,
            )
            context["quote"] = price_quote_visible(quote=quote, user=request.user)
            context["n_public"] = public_dataset_current(federation=federation).n_rows
            if request.user.is_operator and job_learns_from_evaluation(
                kind=kind, federation=federation, privacy_level="L1", parameters=parameters
            ):  # issue 40: semi-private students learn from the operator's fit-half rows too
                split = evaluation_split_current(federation=federation, user=request.user)
                context["operator_rows"] = split.n_rows // 2
        except (ValueError, DomainError) as error:
            context["message"] = f"No price yet: {error}"
    return render(request, "frontend/jobs/partials/price.html", context)


@require_GET
@page
def job_list_page(request):
    from market.federations.selectors import federation_list

    jobs = job_list(user=request.user, federation_slug=request.GET.get("federation"))[:200]
    federations = federation_list(user=request.user) if request.user.is_operator else []
    return render(
        request,
        "frontend/jobs/list.html",
        {"section": "jobs", "jobs": jobs, "federations": federations},
    )


def _quality_context(global_model, view) -> dict:
    """The job page's plain statements about its model and its comparisons with the free baselines."""
    if view is None:
        return {"quality_statements": [], "comparison_statements": []}
    verdict = quality_verdict(global_model, baselines=view.baselines)
    return {
        "quality_statements": verdict.statements(),
        "comparison_statements": verdict.comparison_statements(),
    }


def _job_context(request, job_id: int) -> dict:
    job = job_get(job_id=job_id, user=request.user)
    global_model = getattr(job, "global_model", None) if job.status == JobStatus.SUCCEEDED else None
    view = (
        global_model_view(global_model=global_model, user=request.user)
        if global_model is not None
        else None
    )
    values = named_contribution_values(view) if view else []
    return {
        "section": "jobs",
        "job": job,
        **_quality_context(global_model, view),
        "progress": job_progress(job),
        "log": job_log_lines(job),
        "is_final": job.status in FINAL,
        "global_model": global_model,
        "view": view,
        "silos": named_submission_metrics(view) if view else [],
        "contributions": named_contributions(view) if view else [],
        "contribution_values": values,
        "value_plot": contribution_value_bars(values)
        if values and request.user.is_operator
        else None,
        "value_copies": named_value_copies(view) if view else [],
        "may_cancel": job.status not in FINAL
        and (request.user.is_operator or request.user.id == job.requested_by_id),
    }


@require_GET
@page
def job_detail_page(request, job_id):
    return render(request, "frontend/jobs/detail.html", _job_context(request, job_id))


@require_GET
@page
def job_progress_partial(request, job_id):
    """What htmx swaps in every second: progress, log and, once the job ended, its results."""
    return render(request, "frontend/jobs/partials/progress.html", _job_context(request, job_id))


@require_POST
@page
@sent_once
def job_cancel_action(request, job_id):
    job = job_cancel(
        job=job_get(job_id=job_id, user=request.user), user=request.user, request=request
    )
    messages.info(
        request,
        f"Job #{job.id}: "
        + (
            "cancelled."
            if job.status == JobStatus.CANCELLED
            else "cancellation requested; the worker stops at its next check."
        ),
    )
    return redirect("job-detail", job_id=job.id)


@require_GET
@page
def job_comparison_png(request, job_id):
    """A strip plot: per metric, one dot per participating submission (sorted), a line for the global model and a
    dashed one for the operator's rows alone (the free model it must beat)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    context = _job_context(request, job_id)
    global_model = context["global_model"]
    if global_model is None:
        return HttpResponse(status=404)
    # ?size=phone: a square figure drawn for a 390 px screen (the page picks it there), so its text stays
    # readable instead of the wide figure shrunk to half its size.
    phone = request.GET.get("size") == "phone"
    metrics = [
        ("accuracy", "Accuracy"),
        ("balanced_accuracy", "Balanced\naccuracy" if phone else "Balanced accuracy"),
        ("macro_f1", "Macro F1"),
    ]
    figure = Figure(figsize=(3.9, 3.9) if phone else (7.5, 3.6), dpi=100)
    axes = figure.subplots()
    for position, (key, _) in enumerate(metrics):
        # One dot per silo, sorted left to right, so 200 silos read as a strip, not 200 bars or legend entries.
        values = sorted(silo[key] for silo in context["silos"] if silo.get(key) is not None)
        spread = [position - 0.3 + 0.6 * (rank + 0.5) / len(values) for rank in range(len(values))]
        axes.scatter(
            spread,
            values,
            s=14,
            color="#6b7685",
            alpha=0.8,
            zorder=2,
            label=f"a silo's submission ({len(values)})" if position == 0 else None,
        )
        axes.hlines(
            global_model.metrics[key],
            position - 0.4,
            position + 0.4,
            color="#1f5fa8",
            linewidth=3,
            zorder=3,
            label="global model" if position == 0 else None,
        )
        operator_only = (context["view"].baselines.get("operator_only") or {}).get(key)
        if operator_only is not None:  # what the operator has without the silos (issue 39)
            axes.hlines(
                operator_only,
                position - 0.4,
                position + 0.4,
                color="#b35900",
                linewidth=2,
                linestyles="dashed",
                zorder=3,
                label="operator's rows alone" if position == 0 else None,
            )
    axes.set_xticks(range(len(metrics)), [name for _, name in metrics])
    axes.set_xlim(-0.5, len(metrics) - 0.5)
    axes.set_ylim(0, 1)
    axes.yaxis.set_major_formatter(
        PercentFormatter(1.0)
    )  # metrics as percentages, as on every page
    axes.set_ylabel("on the evaluation split")
    axes.grid(axis="y", color="#e3e7ec", zorder=0)
    axes.legend(fontsize=8, loc="lower right")
    axes.set_title(
        f"Job #{job_id}: global model (line), silos (dots)"
        if phone
        else f"Job #{job_id}: the global model (line) against each silo's submission (dots)",
        fontsize=10,
    )
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return HttpResponse(buffer.getvalue(), content_type="image/png")
