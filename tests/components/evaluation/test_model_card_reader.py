"""The model card's reader finds the card where ModelCardGen put it: beside the pushed model
when it placed it there, else in the artifact's own folder."""

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from components.evaluation.model_card_reader import CARD_MARKDOWN, card_folder, read_card_markdown


def _artifact(uri: str, placed_at: str | None = None) -> mlmd_pb2.Artifact:
    artifact = mlmd_pb2.Artifact(uri=uri)
    if placed_at is not None:
        artifact.custom_properties[metadata_keys.PLACED_AT_PROPERTY].string_value = placed_at
    return artifact


def test_the_card_folder_is_where_the_card_was_placed_else_its_own():
    assert card_folder(_artifact("/root/ModelCardGen/model_card/9")) == (
        "/root/ModelCardGen/model_card/9"
    )
    placed = _artifact("/root/ModelCardGen/model_card/9", "/serving/imgpipe/17")
    assert card_folder(placed) == "/serving/imgpipe/17"


def test_reads_the_card_s_markdown_and_none_where_it_is_gone(tmp_path):
    (tmp_path / CARD_MARKDOWN).write_text("# Model card\n\nlabels: cat, dog\n")
    assert read_card_markdown(str(tmp_path)) == "# Model card\n\nlabels: cat, dog\n"
    assert read_card_markdown(str(tmp_path / "gone")) is None
