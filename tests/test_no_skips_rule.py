"""With LADDER_ROS_NO_SKIPS=1 (CI, after a full setup) a skipped test fails with its reason; GPU-only tests may skip."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SAMPLE = '''
import pytest

def test_needs_a_missing_folder():
    pytest.skip("no .venv-example: scripts/setup.sh builds it")

@pytest.mark.gpu
def test_needs_cuda():
    pytest.skip("no CUDA device on this machine")

def test_runs():
    assert True
'''
MODULE_SKIP = 'import pytest\npytest.skip("assets missing", allow_module_level=True)\n'


def _run(tmp_path: Path, strict: bool, sample: str = SAMPLE) -> subprocess.CompletedProcess:
    if sample:
        (tmp_path / "test_sample.py").write_text(sample)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    env = {**os.environ, "LADDER_ROS_NO_SKIPS": "1" if strict else "0"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest", "-rs",
                           "-o", "markers=gpu: needs a CUDA device", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_a_skip_for_a_missing_prerequisite_fails_where_none_may_skip(tmp_path):
    result = _run(tmp_path, strict=True)
    assert result.returncode == 1, result.stdout
    assert "skipped where every prerequisite must be present" in result.stdout
    assert "no .venv-example" in result.stdout
    assert "modules skipped where every prerequisite must be present" in result.stdout
    assert "test_module_skip.py: Skipped: assets missing" in result.stdout
    summary = result.stdout.strip().splitlines()[-1]
    assert "1 failed" in summary and "1 passed" in summary and "2 skipped" in summary  # the GPU test, the module


def test_without_the_rule_skips_are_listed_with_their_reasons(tmp_path):
    result = _run(tmp_path, strict=False)
    assert result.returncode == 0, result.stdout
    assert "SKIPPED" in result.stdout and "no .venv-example" in result.stdout and "assets missing" in result.stdout


def test_a_module_that_skips_as_a_whole_fails_the_run_alone(tmp_path):
    result = _run(tmp_path, strict=True, sample="")
    assert result.returncode == 1, result.stdout
    assert "test_module_skip.py: Skipped: assets missing" in result.stdout
