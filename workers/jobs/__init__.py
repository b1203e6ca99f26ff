"""Pure helpers of aggregation jobs: a chunk's signals and their stored form, fusion in a child process that a
cancel stops, export of global models, replayable DP noise.

No Django, Celery or market imports: the job runner in ``workers.runner`` calls these.
"""
