"""Linters run as tests: pyflakes and pycodestyle (through flake8) over the whole tree."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PATHS = ["ladder_ros", "tests", "benchmarks", "scripts", "launch", "setup.py"]


def test_flake8_is_clean():
    if subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True).returncode != 0:
        pytest.skip("flake8 is not installed (requirements/test.txt)")
    result = subprocess.run([sys.executable, "-m", "flake8", "--max-line-length=120", *PATHS], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
