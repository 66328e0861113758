"""Archived workloads in the portal: readable, not changeable, out of the lists."""

from __future__ import annotations

import pytest
from django.urls import reverse

from policies.models import WorkloadPolicyVersion
from policies.services import workload_archive
from tests.policies.test_pages import client_for, workload_post, workload_url

pytestmark = pytest.mark.django_db


class ArchivedWorkloadPageTests:
    def test_its_page_says_so_and_a_save_changes_nothing(self, editor, workload_a):
        workload_archive(workload=workload_a, author="system:test")
        client = client_for(editor)

        page = client.get(workload_url(workload_a, "prod"))

        assert page.status_code == 200
        assert "Archived on" in page.content.decode()
        response = client.post(
            workload_url(workload_a, "prod"), workload_post({"sensitivityCeiling": "internal"})
        )
        assert response.status_code in (409, 422)
        assert "was archived" in response.content.decode()
        assert not WorkloadPolicyVersion.objects.filter(workload=workload_a).exists()

    def test_it_leaves_the_compliance_table_and_the_sandbox(self, editor, workload_a):
        client = client_for(editor)
        slug = editor.workspace.slug
        pages = ("dashboard", "recall:sandbox", "recall:memories")
        for name in pages:
            assert str(workload_a.pk) in client.get(reverse(name, args=[slug])).content.decode()

        workload_archive(workload=workload_a, author="system:test")

        for name in pages:
            html = client.get(reverse(name, args=[slug])).content.decode()
            assert str(workload_a.pk) not in html, name
