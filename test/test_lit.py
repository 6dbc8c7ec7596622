"""Run the lit/FileCheck suite under pytest, so one command covers everything."""
import os
import shutil
import subprocess
import sys


def test_lit_suite():
    here = os.path.join(os.path.dirname(__file__), "lit")
    lit = shutil.which("lit", path=os.path.dirname(sys.executable)) or shutil.which("lit")
    assert lit, "lit is not installed (pip install -e .[test])"
    proc = subprocess.run([lit, "-v", here],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "Failed" not in proc.stdout
