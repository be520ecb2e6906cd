"""A test that passes only on its rerun (scripts/test.sh: --reruns 1) has the cause of its first failure printed."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SAMPLE = '''
from pathlib import Path

def test_fails_once(tmp_path_factory):
    marker = Path(__file__).with_name("tried")
    if not marker.exists():
        marker.write_text("once")
        raise AssertionError("no recording within 120 s (first try)")

def test_fails_twice():
    assert False, "a broken rule fails both times"
'''


def test_each_rerun_is_listed_with_the_end_of_its_first_failure(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest",
                             "--reruns", "1", "-rR", "--rootdir", str(tmp_path), str(tmp_path)],
                            cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "why each rerun test failed the first time" in out
    section = out.split("why each rerun test failed the first time", 1)[1]
    assert "test_sample.py::test_fails_once:" in section
    assert "no recording within 120 s (first try)" in section
    # the test that failed twice was rerun too: its first failure is listed, and it still fails the run
    assert "test_sample.py::test_fails_twice:" in section
    assert "1 failed, 1 passed" in out.strip().splitlines()[-1]
