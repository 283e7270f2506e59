"""CPU checks of scripts/gpu-py.sh (the device-machine launcher of the Python GPU tests): it parses,
and without the bundled libraries it stops at once with a message instead of running anything."""

import os
import shutil
import subprocess
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


if __name__ == "__main__":
    unittest.main()
