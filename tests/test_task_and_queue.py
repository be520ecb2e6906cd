"""The task model (Section 3 categories), the subgoal queue's recovery moves (Section 4) and the error types."""

import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError, LadderError, read_text, unknown_name
from ladder_ros.core.queue import QueueEmptyError, SubgoalQueue
from ladder_ros.core.task import Subgoal, Task, TaskCategory

CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
SPOON = Subgoal("spoon", "plate", "put the spoon on the plate")
CORN = Subgoal("corn", "cloth", "put the corn on the cloth")


def task(category, *subgoals, distractors=(), layouts=24):
    return Task(task_id="t", scene="s", category=TaskCategory(category), instruction="do it",
                subgoals=tuple(subgoals), distractors=tuple(distractors), layouts=layouts)


def test_the_eight_categories_of_section_3():
    assert [c.value for c in TaskCategory] == ["single_destination", "split_destinations", "transfer", "relay",
                                               "revisit", "exclusion", "ordered", "duplicates"]
    assert {c for c in TaskCategory if c.chains_legs_per_object} == {TaskCategory.RELAY, TaskCategory.REVISIT}
    order_constrained = {TaskCategory.ORDERED, TaskCategory.RELAY, TaskCategory.REVISIT}
    assert {c for c in TaskCategory if c.is_order_constrained} == order_constrained
    assert TaskCategory.parse("relay") is TaskCategory.RELAY
    with pytest.raises(ConfigError, match="unknown task category 'loop'; valid: duplicates, exclusion"):
        TaskCategory.parse("loop")


def test_prerequisites_follow_the_category():
    ordered = task("ordered", CARROT, SPOON, CORN)
    assert [ordered.prerequisites(i) for i in range(3)] == [(), (0,), (0, 1)]
    cloth = Subgoal("spoon", "cloth", "put the spoon on the cloth")
    pot = Subgoal("spoon", "pot", "put the spoon in the pot")
    revisit = task("revisit", cloth, CARROT, pot, cloth)  # the carrot's leg does not wait for the spoon's
    assert [revisit.prerequisites(i) for i in range(4)] == [(), (), (0,), (0, 2)]
    assert [revisit.has_later_leg(i) for i in range(4)] == [True, False, True, False]
    single = task("single_destination", CARROT, SPOON)
    assert [single.prerequisites(i) for i in range(2)] == [(), ()]
    assert [single.has_later_leg(i) for i in range(2)] == [False, False]
    duplicates = task("duplicates", CORN, CORN)  # two cobs, each its own object: no legs
    assert duplicates.has_later_leg(0) is False and duplicates.prerequisites(1) == ()


@pytest.mark.parametrize("make, message", [
    (lambda: Subgoal("", "plate", "x"), "subgoal object must be a non-empty string, got ''"),
    (lambda: Subgoal("carrot", "  ", "x"), "subgoal destination must be a non-empty string, got '  '"),
    (lambda: Subgoal("carrot", "plate", None), "subgoal text must be a non-empty string, got None"),
    (lambda: task("single_destination"), "t.subgoals: a task needs at least one subgoal"),
    (lambda: task("single_destination", CARROT, layouts=0), "t.layouts: layouts must be a positive integer, got 0"),
    (lambda: task("exclusion", CARROT), "t.distractors: an exclusion task names its distractors"),
    (lambda: task("single_destination", CARROT, distractors=["carrot", "spoon"]),
     "t.distractors: objects are both moved and distractors: ['carrot']"),
])
def test_a_malformed_task_names_what_is_wrong(make, message):
    with pytest.raises(ConfigError) as error:
        make()
    assert str(error.value) == message


def test_a_task_with_one_layout_and_distractors_elsewhere_is_valid():
    t = task("exclusion", CARROT, distractors=["eggplant"], layouts=1)
    assert t.layouts == 1 and t.horizon == 1 and CARROT.key == ("carrot", "plate")


def test_the_queue_moves_of_section_4():
    q = SubgoalQueue([CORN, CARROT, CORN])
    assert (q.current, q.current_subgoal, q.pending, q.ever_current) == (0, CORN, [0, 1, 2], {0})
    assert q.occurrences(0) == q.occurrences(2) == 2 and q.occurrences(1) == 1
    assert q.move_current_to_end() == 0  # an interchangeable duplicate goes to the end
    assert (q.pending, q.current_subgoal, q.ever_current) == ([1, 2, 0], CARROT, {0, 1})
    assert q.complete_current() == 1  # verified: removed and remembered as completed
    assert (q.pending, q.completed, q.completed_subgoals()) == ([2, 0], [1], [CARROT])
    assert q.advance_current() == 2  # left without a verified completion
    assert (q.pending, q.advanced, q.ever_current) == ([0], [2], {0, 1, 2})
    q.restart()  # RoboLab-Long proprioceptive trigger: start over from the first subgoal
    assert q.pending == [0, 1, 2] and q.completed == [1] and q.advanced == [2]
    for _ in range(3):
        q.complete_current()
    assert (q.current, q.current_subgoal) == (None, None)
    for move in (q.complete_current, q.advance_current, q.move_current_to_end):
        with pytest.raises(QueueEmptyError, match="^the queue is empty$"):
            move()
    with pytest.raises(QueueEmptyError, match="^a plan needs at least one subgoal$"):
        SubgoalQueue([])


def test_config_errors_name_the_file_and_the_key():
    assert str(ConfigError("bad", source="a.yaml", key="tasks[0]")) == "a.yaml: tasks[0]: bad"
    assert str(ConfigError("bad", source="a.yaml")) == "a.yaml: bad"
    assert str(ConfigError("bad", key="tasks[0]")) == "tasks[0]: bad"
    assert str(ConfigError("bad")) == "bad"
    error = ConfigError("bad", source="a.yaml", key="k")
    assert (error.source, error.key) == ("a.yaml", "k")
    assert isinstance(error, LadderError) and isinstance(error, ValueError)
    assert issubclass(InvalidInputError, LadderError) and issubclass(InvalidInputError, ValueError)
    assert str(unknown_name("preset", "ur5", ["widowx", "franka"])) == "unknown preset 'ur5'; valid: franka, widowx"


def test_read_text_errors_name_the_file_and_what_it_was_for(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("ok: 1\n", encoding="utf-8")
    assert read_text(good, "suite file") == "ok: 1\n"
    with pytest.raises(ConfigError) as missing:
        read_text(tmp_path / "none.yaml", "suite file")
    assert str(missing.value) == f"{tmp_path / 'none.yaml'}: suite file not found"
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"caf\xe9 au lait")
    with pytest.raises(ConfigError) as undecodable:
        read_text(latin, "trace file")
    assert str(undecodable.value) == f"{latin}: trace file is not UTF-8 text: invalid continuation byte"
    with pytest.raises(ConfigError) as folder:
        read_text(tmp_path, "params file")
    assert str(folder.value) == f"{tmp_path}: cannot read params file: Is a directory"
