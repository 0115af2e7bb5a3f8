"""The model card of a pretrained backbone (:class:`ModelCard`): read once with one-line errors,
written back as the same JSON, unknown keys kept."""
from __future__ import annotations

import json
import re

import pytest

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.inference.backbones import CARD_FILE, PRETRAINED_DIR, describe, list_pretrained, read_card
from dgl_graphtx.inference.model_card import ModelCard

SHIPPED = sorted(path.parent.name for path in PRETRAINED_DIR.glob(f"*/{CARD_FILE}"))
FIX = "restore it or re-run 'dgl-graphtx pretrain'"


def _card(name="gradformer-tiny-moses3k"):
    return json.loads((PRETRAINED_DIR / name / CARD_FILE).read_text())


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_card_reads_into_fields_and_writes_the_same_json(name):
    text = (PRETRAINED_DIR / name / CARD_FILE).read_text()
    card = read_card(PRETRAINED_DIR / name / CARD_FILE, name)
    assert card.name == name and card.corpus.molecules > 0 and len(card.targets.names) == card.targets.count
    assert json.dumps(card.to_dict(), indent=2) == json.dumps(json.loads(text), indent=2)  # keys in the same order too


def test_list_pretrained_gives_the_shipped_cards():
    cards = list_pretrained()
    assert [card.name for card in cards] == SHIPPED and all(isinstance(card, ModelCard) for card in cards)
    assert describe(cards[0]).startswith(f"{SHIPPED[0]}: ")


def test_unknown_keys_are_kept_and_notes_may_be_absent():
    stored = _card()
    stored["added_later"] = [1]
    stored["corpus"]["url"] = "https://example.org"
    del stored["notes"]  # the earliest cards have none
    card = ModelCard.from_dict(stored)
    assert card.other == {"added_later": [1]} and card.corpus.other == {"url": "https://example.org"} and card.notes == ""
    written = card.to_dict()
    assert written["added_later"] == [1] and written["corpus"] == stored["corpus"]


@pytest.mark.parametrize("edit,message", [
    (lambda card: card.pop("sha256"), "lacks 'sha256'"),
    (lambda card: (card.pop("epochs"), card.pop("variant")), "lacks 'variant', 'epochs'"),
    (lambda card: card["corpus"].pop("molecules"), "lacks 'corpus.molecules'"),
    (lambda card: card.update(targets=["a"]), "'s 'targets' is not a JSON object (it holds a list)"),
    (lambda card: card.update(sha256=None), "'s 'sha256' should be text, it holds None"),
    (lambda card: card.update(epochs="40"), "'s 'epochs' should be a whole number, it holds '40'"),
    (lambda card: card["targets"].update(names=[1, 2]), "'s 'targets.names' should be a list of text, it holds [1, 2]"),
])
def test_a_card_missing_a_field_is_one_error_naming_the_file_and_the_fix(tmp_path, edit, message):
    stored = _card()
    edit(stored)
    path = tmp_path / CARD_FILE
    path.write_text(json.dumps(stored))
    with pytest.raises(ConfigError) as info:
        read_card(path, "mine")
    text = str(info.value)
    assert "\n" not in text
    assert re.fullmatch(rf"pretrained model 'mine': its model card {re.escape(str(path))}.*; {re.escape(FIX)}", text)
    assert message in text
