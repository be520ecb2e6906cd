"""The bag writer on its own: custom data reads back exactly as it was written."""

from __future__ import annotations

import json

import pytest

from ladder_ros.recording.bag import EpisodeBag, bag_custom_data


@pytest.mark.parametrize("shift", range(0, 12))
def test_long_custom_data_with_escapes_reads_back_exactly(tmp_path, shift):
    # A configuration file JSON-encoded into the custom data: long, with a backslash escape every line.
    # YAML emitters fold such strings; a fold right after an escaped backslash must not become a space.
    text = "x" * shift + "".join(f"# line {k}: a comment long enough to be folded by the emitter\n" for k in range(40))
    custom = {"config_files": json.dumps({"params.yaml": text}), "episode_id": "e1"}
    bag = EpisodeBag(tmp_path / "e1", custom)
    bag.close()
    back = bag_custom_data(tmp_path / "e1")
    assert back == custom
    assert json.loads(back["config_files"])["params.yaml"] == text

    from ruamel.yaml import YAML  # what rosbags reads metadata.yaml with

    info = YAML(typ="safe").load((tmp_path / "e1" / "metadata.yaml").read_text(encoding="utf-8"))
    assert info["rosbag2_bagfile_information"]["custom_data"] == custom
