"""Run the lit/FileCheck suite under pytest, so one command covers everything."""
import os
import subprocess
import sys


def test_lit_suite():
    here = os.path.join(os.path.dirname(__file__), "lit")
    proc = subprocess.run([sys.executable, "-m", "lit", "-v", here],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "Failed" not in proc.stdout
