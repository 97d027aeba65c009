"""The model card's reader finds the card where it is: beside the pushed model when the run
pushed it there, else in the artifact's own folder."""

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components.serving.model_card_reader import CARD_MARKDOWN, card_folder, read_card_markdown


def test_the_card_folder_is_the_version_pushed_with_it_else_its_own():
    artifact = mlmd_pb2.Artifact(uri="/root/ModelCardGen/model_card/9")
    assert card_folder(artifact, None) == "/root/ModelCardGen/model_card/9"
    assert card_folder(artifact, "/serving/imgpipe/17") == "/serving/imgpipe/17"


def test_reads_the_card_s_markdown_and_none_where_it_is_gone(tmp_path):
    (tmp_path / CARD_MARKDOWN).write_text("# Model card\n\nlabels: cat, dog\n")
    assert read_card_markdown(str(tmp_path)) == "# Model card\n\nlabels: cat, dog\n"
    assert read_card_markdown(str(tmp_path / "gone")) is None
