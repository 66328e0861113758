from __future__ import annotations

import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.utils.module_loading import import_string

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

# The apps' WSGI applications in front of Django's (``WSGI_FRONTS``, the first outermost):
# the recall endpoint's usual calls are answered without Django's request handling around
# them (recall/api/lean.py); every other request goes to Django.
application = get_wsgi_application()
for front in reversed(settings.WSGI_FRONTS):
    application = import_string(front)(application)
