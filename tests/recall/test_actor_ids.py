"""Actor ids that look alike are one actor or refused (NFC; no invisible, bidirectional,
whitespace, compatibility or mixed-script names)."""

from __future__ import annotations

import unicodedata

import pytest

from recall.actor_ids import ActorIdError, normalize_actor_id
from tests.recall import factories
from tests.recall.test_api_memories import new_memory


@pytest.mark.parametrize(
    "actor_id",
    [
        "user:ada",
        "user:ada.lovelace",
        "user:ada_l-1",
        "team:support-eu",
        "user:Zoë",
        "user:Дмитрий",  # one script: Cyrillic
        "user:東京太郎",  # Han
        "user:yamada-たろう",  # Latin with Hiragana: Japanese
        "user:김민준",  # Hangul
        "user:ada@example.com",
    ],
)
def test_plain_names_pass_unchanged(actor_id):
    assert normalize_actor_id(actor_id) == actor_id


def test_a_decomposed_name_is_the_composed_one():
    decomposed = "user:" + unicodedata.normalize("NFD", "Zoë")
    assert decomposed != "user:Zoë"
    assert normalize_actor_id(decomposed) == "user:Zoë"


@pytest.mark.parametrize(
    ("actor_id", "why"),
    [
        ("user:ada\u200b", "invisible or text-direction"),  # zero-width space
        ("user:\u202eada", "invisible or text-direction"),  # right-to-left override
        ("user:ada ", "space"),
        ("user:a da", "space"),
        ("user:ada\u00a0", "space"),  # no-break space
        ("user:ada\x00", "control"),
        ("user:ada\n", "control"),
        ("user:\u0430da", "mixes scripts"),  # a Cyrillic а among Latin letters
        ("user:p\u0430ypal", "mixes scripts"),
        ("user:\uff41da", "compatibility form"),  # a full-width a
        ("user:\ufb01le", "compatibility form"),  # the fi ligature
        ("ada", "kind:name"),
        ("robot:ada", "kind:name"),
        ("user:", "kind:name"),
        ("user:" + "a" * 201, "200 characters"),
    ],
)
def test_lookalike_and_malformed_names_are_refused(actor_id, why):
    with pytest.raises(ActorIdError, match=why):
        normalize_actor_id(actor_id)


@pytest.mark.django_db
class ActorIdApiTests:
    def test_a_lookalike_is_a_400_naming_the_actor_and_writes_nothing(self, editor):
        response = editor.api().post(
            "/v1/memory/actors/user:\u0430da/memories", new_memory(), format="json"
        )

        assert response.status_code == 400
        error = response.json()["error"]
        assert "mixes scripts" in error["details"]["fields"]["actorId"]
        from recall.models import Actor

        assert not Actor.objects.exists()

    def test_the_decomposed_form_finds_the_same_actor(self, editor):
        factories.memories(editor.workspace, {"content": "hi"}, actor_id="user:Zoë")
        decomposed = unicodedata.normalize("NFD", "Zoë")

        response = editor.api().get(f"/v1/memory/actors/user:{decomposed}/memories")

        assert response.status_code == 200, response.content
        assert response.json()["count"] == 1
