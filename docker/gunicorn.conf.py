"""Gunicorn for the market's web processes: the Dockerfile, the compose file and benchmarks/catalog.py start it with
``gunicorn -c docker/gunicorn.conf.py market.wsgi``, so what is measured is what is deployed.

Synchronous workers, one more than the cores (``ONEFOLD_WEB_PROCESSES`` overrides). A request is mostly Python
holding the GIL, so one process uses at most about one core whatever its threads. With threaded workers a
keep-alive connection stays with the process that accepted it, and 50 clients split unevenly (48 and 2, 40 and 10
were seen), leaving one process queueing on one core while the other core idled: 600 requests/s and a p95 of
100 ms. A synchronous worker answers one request per connection, so every request goes to whichever process is free:
1,300 requests/s with a p95 of 43 ms on the same machine (benchmarks/catalog.md). The extra process fills a core
while another waits on PostgreSQL or Redis. Slow clients are the load balancer's to buffer (docs/scaling.md), as
gunicorn's own deployment guide says for synchronous workers.
"""

import os

bind = "0.0.0.0:8000"
worker_class = "sync"
workers = int(os.environ.get("ONEFOLD_WEB_PROCESSES") or len(os.sched_getaffinity(0)) + 1)
timeout = 120
