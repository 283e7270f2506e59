"""CPU checks of scripts: scripts/gpu-py.sh (the device-machine launcher of the Python GPU tests)
parses, and without the bundled libraries it stops at once with a message instead of running
anything; scripts/ll-model.py (docs/low-latency.md, "On a real NIC: a model") reproduces the
committed docs/data/ll-model.csv exactly and refuses unknown options."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "gpu-py.sh")


@unittest.skipUnless(shutil.which("bash"), "no bash")
class TestGpuPyScript(unittest.TestCase):
    def test_syntax(self):
        r = subprocess.run(["bash", "-n", SCRIPT], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_missing_bundle_is_reported(self):
        if os.path.exists(os.path.join(REPO, ".devbuild", "lib", "libepx.so.0")):
            self.skipTest(".devbuild is present here")
        with tempfile.TemporaryDirectory() as out:
            r = subprocess.run([SCRIPT], capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, OUT=out))
            self.assertEqual(r.returncode, 1)
            self.assertIn("libepx.so.0 missing (carry .devbuild", r.stdout)
            with open(os.path.join(out, "py-summary.txt")) as f:
                self.assertIn("missing", f.read())


LL_MODEL = os.path.join(REPO, "scripts", "ll-model.py")


class TestLlModelScript(unittest.TestCase):
    def test_reproduces_the_committed_csv(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "ll-model.csv")
            r = subprocess.run([sys.executable, LL_MODEL, "--out", out], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f, open(os.path.join(REPO, "docs", "data", "ll-model.csv")) as g:
                self.assertEqual(f.read(), g.read(), "docs/data/ll-model.csv differs from what the script writes: "
                                 "rerun python3 scripts/ll-model.py and update docs/low-latency.md")

    def test_unknown_option_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, LL_MODEL, "--bogus"], capture_output=True, text=True, timeout=60, cwd=d)
            self.assertEqual(r.returncode, 2)
            self.assertIn("unrecognized arguments: --bogus", r.stderr)
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
