"""The bag writer on its own: custom data reads back exactly as it was written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ladder_ros.paths import share_path
from ladder_ros.recording.bag import EpisodeBag, bag_custom_data, config_custom_data


@pytest.mark.parametrize("graph", ["widowx", "franka"])
def test_the_configuration_files_in_a_bag_read_back_exactly(tmp_path, graph):
    # The recorder stores the graph description and params file verbatim, JSON-encoded: long strings
    # with an escaped newline on every line, which YAML emitters fold. A fold right after an escaped
    # backslash must not turn into a space (it did, with these very files).
    files = [str(share_path("config", "graphs", f"{graph}.yaml")), str(share_path("config", f"{graph}_params.yaml"))]
    custom = config_custom_data("e1", graph, files, {"task": "t"})
    bag = EpisodeBag(tmp_path / "e1", custom)
    bag.close()
    back = bag_custom_data(tmp_path / "e1")
    assert back == custom
    stored = json.loads(back["config_files"])
    assert stored == {Path(f).name: Path(f).read_text(encoding="utf-8") for f in files}

    from ruamel.yaml import YAML  # what rosbags reads metadata.yaml with

    info = YAML(typ="safe").load((tmp_path / "e1" / "metadata.yaml").read_text(encoding="utf-8"))
    assert info["rosbag2_bagfile_information"]["custom_data"] == custom
