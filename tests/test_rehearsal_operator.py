"""The rehearsal's operator steps without a graph: arming and homing when the driver faults in between.

On a loaded machine the driver can fault between the operator's arm and home (a joint it saw lag), which
disarms it, and the home is refused ("arm the robot first"): the operator recovers the fault and tries
again, as on the robot, and gives up with every reason when the arm never gets home.
"""

import numpy as np
import pytest

from ladder_ros.core.errors import LadderError
from ladder_ros.evaluation.rehearsal import Rehearsal


class DriverDouble:
    """The driver as the operator sees it through :class:`RehearsalObserver`: arm, home, recover, its fault.

    ``faults`` lists, per home request, the fault the driver raises just before it (None: none)."""

    def __init__(self, faults):
        self.faults = list(faults)
        self.fault = ""
        self.armed = False
        self.calls = []

    def arm(self, executor, spin_until):
        self.calls.append("arm")
        if self.fault:
            raise LadderError(f"the driver refused to arm: refused: fault {self.fault}")
        self.armed = True
        return "armed"

    def home(self, executor, spin_until, home_joints):
        self.calls.append("home")
        fault = self.faults.pop(0) if self.faults else None
        if fault:
            self.fault, self.armed = fault, False
        if not self.armed:
            raise LadderError("the driver did not go home: refused: homing moves the arm; arm the robot first")

    def recover(self, executor, spin_until):
        self.calls.append("recover")
        self.fault = ""
        return "rebooted the stalled motor"


def operator(driver):
    rehearsal = Rehearsal.__new__(Rehearsal)
    rehearsal.observer, rehearsal.executor, rehearsal.home_joints = driver, None, np.zeros(6)

    def spin_until(executor, condition, timeout_s, what):
        if not condition():
            raise LadderError(f"timed out after {timeout_s} s waiting for {what}")

    rehearsal._spin_until = spin_until
    return rehearsal


def test_arming_and_homing_without_a_fault_takes_one_of_each():
    driver = DriverDouble([None])
    assert operator(driver).prepare() == "armed (armed), the arm at home"
    assert driver.calls == ["arm", "home"]


def test_a_fault_between_arming_and_homing_is_recovered_and_both_asked_again(capsys):
    driver = DriverDouble(["stall: shoulder"])
    assert operator(driver).prepare() == "armed (armed), the arm at home"
    assert driver.calls == ["arm", "home", "recover", "arm", "home"]
    assert "faulted before the arm was home (stall: shoulder); recovered" in capsys.readouterr().out


def test_an_arm_that_never_gets_home_ends_the_run_with_every_reason():
    driver = DriverDouble(["stall: shoulder", "stall: elbow", "vendor_timeout"])
    with pytest.raises(LadderError) as caught:
        operator(driver).prepare()
    text = str(caught.value)
    assert text.startswith("the arm did not get home in 3 attempts")
    assert "fault 'stall: shoulder', recovered" in text and "fault 'stall: elbow', recovered" in text
    assert text.count("arm the robot first") == 3
    assert driver.calls.count("home") == 3
