"""Pure helpers of aggregation jobs: platform metrics, export of global models, replayable DP noise.

No Django, Celery or market imports: the job runner in ``market.jobs.runner`` calls these.
"""
