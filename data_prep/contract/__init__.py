"""The data contract: the Example features and the label map every stage reads."""
