"""The unknown-key error every config loader raises: the exact message names the file, the key and the fix.

A user reads these when a YAML file is wrong, so their wording is the behaviour: each message is
compared whole (reading files: tests/test_task_and_queue.py).
"""

import pytest

from ladder_ros.core.errors import ConfigError, check_keys


@pytest.mark.parametrize("mapping, where, key, message", [
    ({"cooldown": 8, "cooldwn": 3}, "trigger", "trigger.cooldwn",
     "f.yaml: trigger.cooldwn: unknown key; did you mean 'cooldown'? (valid: budget, cooldown)"),
    ({"zzz": 1}, "", "zzz", "f.yaml: zzz: unknown key (valid: budget, cooldown)"),
    ({"budget": 1, 7: 2}, "a.b", "a.b.7", "f.yaml: a.b.7: unknown key (valid: budget, cooldown)"),
])
def test_an_unknown_key_is_named_with_its_path_the_nearest_and_all_valid_keys(mapping, where, key, message):
    with pytest.raises(ConfigError) as refused:
        check_keys(mapping, iter(("cooldown", "budget")), source="f.yaml", where=where)  # any iterable of names
    assert str(refused.value) == message
    assert (refused.value.source, refused.value.key) == ("f.yaml", key)


def test_valid_keys_pass_and_the_first_unknown_key_is_the_one_named():
    check_keys({}, [], source=None)
    check_keys({"budget": 1, "cooldown": 2}, ["cooldown", "budget"], source="f.yaml")
    with pytest.raises(ConfigError) as refused:
        check_keys({"budget": 1, "x": 2, "y": 3}, ["budget"], source=None)
    assert str(refused.value) == "x: unknown key (valid: budget)" and refused.value.source is None
