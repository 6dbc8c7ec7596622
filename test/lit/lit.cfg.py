import os
import shutil
import sys

import lit.formats

config.name = "ember"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Inputs"]
# ember-opt and filecheck come from the Python environment running lit.
bindir = os.path.dirname(sys.executable)
config.environment["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
ember_opt = shutil.which("ember-opt", path=config.environment["PATH"])
config.substitutions.append(("ember-opt", f"{sys.executable} -m ember.tools.opt"
                             if ember_opt is None else ember_opt))
