from __future__ import annotations

app_name = "maintenance"
urlpatterns: list = []
