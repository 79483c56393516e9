"""How runs execute: the executor (in-process or Celery), the concurrency pools, the instance settings and variants."""
