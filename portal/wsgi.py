from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_application = get_wsgi_application()

# The recall endpoint's usual calls are answered without Django's request handling around
# them (recall/api/lean.py); every other request goes to Django.
from recall.api.lean import LeanRecall  # noqa: E402  (Django is set up above)

application = LeanRecall(django_application)
