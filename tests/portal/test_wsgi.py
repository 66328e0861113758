"""The application the servers run is Django's own handler: every request, the recall's
included, goes through the middleware (``MIDDLEWARE``) and DRF's dispatch."""

from __future__ import annotations

from django.core.handlers.wsgi import WSGIHandler


class WsgiTests:
    def test_every_request_goes_through_djangos_handler(self):
        from portal import serve, wsgi

        assert type(wsgi.application) is WSGIHandler
        assert serve._django() is wsgi.application
