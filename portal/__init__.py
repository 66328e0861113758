"""The ground floor: tenancy, access, errors, database helpers, canonical hashing, settings.

Empty on purpose: the domain rules import ``portal.canonical``, and importing a package runs
its ``__init__``; the Celery app is loaded by ``PortalConfig.ready`` (and found by
``celery -A portal`` in ``portal.celery``).
"""
