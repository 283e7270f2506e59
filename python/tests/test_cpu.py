"""CPU tests of the epx Python package: no GPU and no torch needed (plain unittest).

  python3 -m unittest discover -s python/tests -p 'test_*.py' -v

Environment (all optional):
  EPX_LIBRARY        libepx to load for the tests that call it (size hints, config errors); those
                     tests are skipped when no libepx can be loaded.
  EPX_HEADER_DIRS    os.pathsep-separated include dirs for the ABI probe (default: the repository's
                     host/include and /usr/local/cuda/include); CC: the C compiler (default cc).
"""

import ctypes as C
import ctypes.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)  # python/
REPO = os.path.dirname(PKG_ROOT)
sys.path.insert(0, PKG_ROOT)

import epx  # noqa: E402
from epx import _abi, _checks, _lib  # noqa: E402

EP_H = os.path.join(REPO, "host", "include", "epx", "ep.h")
EP_LL_H = os.path.join(REPO, "host", "include", "epx", "ep_ll.h")
LB_H = os.path.join(REPO, "host", "include", "epx", "lb.h")
ENGRAM_H = os.path.join(REPO, "host", "include", "epx", "engram.h")


def all_structs():
    """{name: class} of every mirrored struct (ep.h, ep_ll.h, lb.h and engram.h)."""
    return dict(_abi.STRUCTS, **_abi.LL_STRUCTS, **_abi.LB_STRUCTS, **_abi.ENGRAM_STRUCTS)


def read_lb_header():
    """lb.h's structs parsed from the header."""
    with open(LB_H) as f:
        return header_structs(f.read())


def read_engram_header():
    """engram.h's structs parsed from the header."""
    with open(ENGRAM_H) as f:
        return header_structs(f.read())


def read_headers():
    """(ep.h structs, ep_ll.h structs) parsed from the headers."""
    with open(EP_H) as f:
        ht = header_structs(f.read())
    with open(EP_LL_H) as f:
        ll = header_structs(f.read())
    return ht, ll


def run_py(code, env_update=None):
    env = dict(os.environ)
    env.pop("EPX_LIBRARY", None)
    env.update(env_update or {})
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def build_shared_lib(test, d, name, source):
    """Compile `source` (C) into d/name with $CC (default cc); skips the test when that cannot be done."""
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        test.skipTest("no C compiler (%s)" % cc)
    src = os.path.join(d, name + ".c")
    so = os.path.join(d, name)
    with open(src, "w") as f:
        f.write(source)
    c = subprocess.run([cc, "-shared", "-fPIC", "-o", so, src], capture_output=True, text=True)
    if c.returncode != 0:
        test.skipTest("cannot build a shared library: %s" % c.stderr)
    return so


# --- ep.h parsing ---------------------------------------------------------------------------------
def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_structs(text):
    """{struct name: [field names in order]} for every `typedef struct { ... } name;` of the header."""
    out = {}
    for body, name in re.findall(r"typedef\s+struct\s*\{([^{}]*)\}\s*(\w+)\s*;", strip_comments(text)):
        fields = []
        for decl in body.split(";"):
            decl = decl.strip()
            if decl:
                fields.append(re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", decl).group(1))
        out[name] = fields
    return out


def probe_source(structs):
    lines = ["#include <epx/ep.h>", "#include <epx/ep_ll.h>", "#include <epx/lb.h>", "#include <epx/engram.h>",
             "#include <stdio.h>",
             "#include <stddef.h>", "int main(void) {"]
    for s, fields in structs.items():
        lines.append('  printf("sizeof %s %%zu\\n", sizeof(%s));' % (s, s))
        for f in fields:
            lines.append('  printf("field %s %s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s*)0)->%s));'
                         % (s, f, s, f, s, f))
    lines.append('  printf("sizeof ncclUniqueId %zu\\n", sizeof(ncclUniqueId));')
    lines.append('  printf("sizeof enum %zu\\n", sizeof(ncclResult_t));')
    consts = ["EPX_VERSION_CODE", "NCCL_EP_CONFIG_MAGIC", "NCCL_EP_UNDEF_INT", "ncclEpAlgoAuto",
              "ncclEpAlgoHighThroughput", "ncclEpAlgoLowLatency", "ncclEpLayoutExpanded",
              "ncclEpLayoutDeduplicated", "ncclEpModeExact", "ncclEpModeCapacity",
              "ncclEpCombineBf16Partials", "ncclEpCombineFp32", "ncclSuccess", "ncclUnhandledCudaError",
              "ncclSystemError", "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage",
              "ncclRemoteError", "ncclInProgress", "ncclInt32", "ncclInt64", "ncclFloat32", "ncclBfloat16",
              "ncclFloat8e4m3", "NCCL_UNIQUE_ID_BYTES", "NCCL_EP_LL_SEND", "NCCL_EP_LL_RECV",
              "NCCL_EP_LL_SEND_RECV", "NCCL_EP_LB_CONFIG_MAGIC", "NCCL_EP_LB_MAX_TENSORS",
              "NCCL_EP_ENGRAM_CONFIG_MAGIC", "NCCL_EP_ENGRAM_MAX_LAYERS"]
    for c in consts:
        lines.append('  printf("const %s %%lld\\n", (long long)(%s));' % (c, c))
    for s, macro in (("ncclEpConfig_t", "NCCL_EP_CONFIG_INITIALIZER"),
                     ("ncclEpHandleConfig_t", "NCCL_EP_HANDLE_CONFIG_INITIALIZER"),
                     ("ncclEpLbConfig_t", "NCCL_EP_LB_CONFIG_INITIALIZER"),
                     ("ncclEpEngramConfig_t", "NCCL_EP_ENGRAM_CONFIG_INITIALIZER")):
        lines.append("  { %s v = %s;" % (s, macro))
        for f in structs[s]:
            lines.append('    printf("init %s %s %%lld\\n", (long long)v.%s);' % (s, f, f))
        lines.append("  }")
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


_probe_cache = {}


def run_probe(testcase):
    """Compile and run the ABI probe once; returns its output lines as tuples. Skips without a compiler."""
    if "out" in _probe_cache:
        return _probe_cache["out"]
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        testcase.skipTest("no C compiler (set CC)")
    dirs = os.environ.get("EPX_HEADER_DIRS")
    dirs = dirs.split(os.pathsep) if dirs else [os.path.join(REPO, "host", "include"), "/usr/local/cuda/include"]
    if not any(os.path.exists(os.path.join(d, "cuda_runtime.h")) for d in dirs):
        testcase.skipTest("cuda_runtime.h not found in %s (set EPX_HEADER_DIRS)" % dirs)
    ht, ll = read_headers()
    structs = dict(ht, **ll, **read_lb_header(), **read_engram_header())
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "abi_probe.c")
        exe = os.path.join(tmp, "abi_probe")
        with open(src, "w") as f:
            f.write(probe_source(structs))
        cmd = [cc, "-std=c11", "-Wall", "-Werror"] + ["-I" + d for d in dirs] + [src, "-o", exe]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("ABI probe failed to compile (%s):\n%s" % (" ".join(cmd), r.stderr))
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    _probe_cache["out"] = [tuple(line.split()) for line in out.splitlines()]
    return _probe_cache["out"]


class TestImport(unittest.TestCase):
    def test_import_without_torch(self):
        # sys.modules["torch"] = None makes any `import torch` fail: epx must not need it to import.
        r = run_py("import sys; sys.modules['torch'] = None\n"
                   "import epx\n"
                   "assert epx.EPX_VERSION_CODE == 100\n"
                   "try:\n"
                   "    epx.Buffer(None, 128, 1024, 8, 2)\n"
                   "except ImportError:\n"
                   "    print('buffer-needs-torch')\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("buffer-needs-torch", r.stdout)

    def test_buffer_without_torch_says_it_needs_pytorch(self):
        # Not a bare ModuleNotFoundError("No module named 'torch'"): an ImportError naming epx.Buffer.
        r = run_py("import sys; sys.modules['torch'] = None\n"
                   "import epx\n"
                   "try:\n"
                   "    epx.Buffer(None, 128, 1024, 8, 2)\n"
                   "except ImportError as e:\n"
                   "    print('TYPE', type(e).__name__)\n"
                   "    print('MSG', e)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("TYPE ImportError", r.stdout)
        self.assertIn("MSG epx.Buffer needs PyTorch", r.stdout)

    def test_import_does_not_load_libepx(self):
        r = run_py("import epx, epx._lib as L; assert L._lib is None; print('ok')",
                   {"EPX_LIBRARY": "/nonexistent/libepx.so.0"})
        self.assertEqual(r.returncode, 0, r.stderr)


class TestAbiLayout(unittest.TestCase):
    """The ctypes structures against ep.h: names, order, sizeof, offsets, field sizes, constants."""

    def setUp(self):
        self.ht, self.ll = read_headers()
        self.lb = read_lb_header()
        self.engram = read_engram_header()
        self.structs = dict(self.ht, **self.ll, **self.lb, **self.engram)

    def test_same_structs_and_field_names(self):
        self.assertEqual(sorted(self.ht), sorted(_abi.STRUCTS), "structs of ep.h and epx/_abi.py STRUCTS differ")
        self.assertEqual(sorted(self.ll), sorted(_abi.LL_STRUCTS),
                         "structs of ep_ll.h and epx/_abi.py LL_STRUCTS differ")
        self.assertEqual(len(self.ll), 5)
        self.assertEqual(sorted(self.lb), sorted(_abi.LB_STRUCTS), "structs of lb.h and epx/_abi.py LB_STRUCTS differ")
        self.assertEqual(sorted(self.engram), sorted(_abi.ENGRAM_STRUCTS),
                         "structs of engram.h and epx/_abi.py ENGRAM_STRUCTS differ")
        for name, fields in self.structs.items():
            py = [f[0] for f in all_structs()[name]._fields_]
            self.assertEqual(py, fields, "field names/order of %s differ from the header" % name)

    def test_sizes_and_offsets_match_c(self):
        out = run_probe(self)
        n = 0
        for row in out:
            if row[0] == "sizeof" and row[1] in all_structs():
                self.assertEqual(C.sizeof(all_structs()[row[1]]), int(row[2]), "sizeof(%s)" % row[1])
                n += 1
            elif row[0] == "field":
                _, s, f, off, size = row
                d = getattr(all_structs()[s], f)
                self.assertEqual(d.offset, int(off), "offsetof(%s, %s)" % (s, f))
                self.assertEqual(d.size, int(size), "sizeof(%s.%s)" % (s, f))
                n += 1
            elif row[0] == "sizeof" and row[1] == "ncclUniqueId":
                self.assertEqual(C.sizeof(_abi.ncclUniqueId), int(row[2]))
            elif row[0] == "sizeof" and row[1] == "enum":
                self.assertEqual(C.sizeof(_abi.c_enum), int(row[2]))
        expected = len(self.structs) + sum(len(v) for v in self.structs.values())
        self.assertEqual(n, expected)

    def test_constants_match_c(self):
        consts = {row[1]: int(row[2]) for row in run_probe(self) if row[0] == "const"}
        self.assertTrue(consts)
        for name, value in consts.items():
            self.assertEqual(getattr(_abi, name), value, name)

    def test_initializers_match_c(self):
        init = {}
        for row in run_probe(self):
            if row[0] == "init":
                init.setdefault(row[1], {})[row[2]] = int(row[3])
        for s, make in (("ncclEpConfig_t", _abi.config_initializer),
                        ("ncclEpHandleConfig_t", _abi.handle_config_initializer),
                        ("ncclEpLbConfig_t", _abi.lb_config_initializer),
                        ("ncclEpEngramConfig_t", _abi.engram_config_initializer)):
            v = make()
            self.assertEqual(set(init[s]), {f[0] for f in v._fields_})
            for f, want in init[s].items():
                self.assertEqual(getattr(v, f), want, "%s.%s" % (s, f))


class TestLoader(unittest.TestCase):
    def test_env_pointing_nowhere(self):
        r = run_py("import epx\n"
                   "try:\n"
                   "    epx.library_path()\n"
                   "except epx.LibraryNotFoundError as e:\n"
                   "    print('MSG', e)\n", {"EPX_LIBRARY": "/nonexistent/libepx.so.0"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("EPX_LIBRARY=/nonexistent/libepx.so.0", r.stdout)
        self.assertIn("cannot load libepx", r.stdout)

    def test_torch_imported_before_libepx(self):
        # libepx's libnccl.so.2 must resolve to torch's copy: epx imports torch before loading it.
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "torch"))
            with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
                f.write("IMPORTED_BEFORE_LIBEPX = True\n")
            r = run_py("import sys, epx\n"
                       "assert 'torch' not in sys.modules\n"
                       "try:\n"
                       "    epx.library_path()\n"
                       "except epx.LibraryNotFoundError:\n"
                       "    pass\n"
                       "print('torch' in sys.modules)\n",
                       {"EPX_LIBRARY": "/nonexistent/libepx.so.0", "PYTHONPATH": d})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "True")

    def test_env_pointing_at_a_library_that_is_not_libepx(self):
        # libc has none of the ncclEp* symbols: not "older than this package", but not a libepx.
        libc = ctypes.util.find_library("c")
        if not libc:
            self.skipTest("no libc found by ctypes.util.find_library")
        r = run_py("import epx\n"
                   "try:\n"
                   "    epx.library_path()\n"
                   "except epx.LibraryNotFoundError as e:\n"
                   "    print('MSG', e)\n", {"EPX_LIBRARY": libc})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("it is not a libepx", r.stdout)
        self.assertIn(libc, r.stdout)
        self.assertNotIn("older than", r.stdout)

    def test_env_pointing_at_an_older_libepx(self):
        # A library with some but not all of the symbols is still reported as an older libepx.
        with tempfile.TemporaryDirectory() as d:
            so = build_shared_lib(self, d, "libepx.so.0", "const char* ncclEpGetLastError(void) { return 0; }\n")
            r = run_py("import epx\n"
                       "try:\n"
                       "    epx.library_path()\n"
                       "except epx.LibraryNotFoundError as e:\n"
                       "    print('MSG', e)\n", {"EPX_LIBRARY": so})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("older than this package", r.stdout)
        self.assertIn("ncclEpGroupCreate", r.stdout)
        self.assertNotIn("ncclEpGetLastError,", r.stdout)

    def test_env_dir_without_lib(self):
        with tempfile.TemporaryDirectory() as d:
            r = run_py("import epx\n"
                       "try:\n"
                       "    epx.Buffer.get_buffer_size_hint(1, 128, 1024, 8, 2)\n"
                       "except epx.LibraryNotFoundError as e:\n"
                       "    print('MSG', e)\n", {"EPX_LIBRARY": d})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("directory without libepx.so", r.stdout)

    def test_not_found_anywhere_lists_what_was_tried(self):
        r = run_py("import epx, epx._lib as L\n"
                   "L._PKG_LIB_DIR = '/nonexistent/_lib'\n"
                   "try:\n"
                   "    epx.library_path()\n"
                   "    print('FOUND')\n"
                   "except epx.LibraryNotFoundError as e:\n"
                   "    print('MSG', e)\n", {"LD_LIBRARY_PATH": ""})
        self.assertEqual(r.returncode, 0, r.stderr)
        if "FOUND" in r.stdout:
            self.skipTest("a libepx is installed system-wide")
        self.assertIn("EPX_LIBRARY (not set)", r.stdout)
        self.assertIn("libepx.so.0", r.stdout)


def _libepx_available():
    try:
        _lib.lib()
        return True
    except epx.LibraryNotFoundError:
        return False


@unittest.skipUnless(_libepx_available(), "no libepx to load (set EPX_LIBRARY)")
class TestWithLibepx(unittest.TestCase):
    """Calls into libepx that need neither a GPU nor torch."""

    def test_nccl_versions_of_this_build(self):
        v = epx.nccl_versions()
        self.assertEqual(set(v), {"runtime", "build", "libnccl", "compatible"})
        self.assertRegex(v["runtime"], r"^2\.\d+\.\d+$")
        self.assertRegex(v["build"], r"^2\.\d+\.\d+$")
        self.assertTrue(v["compatible"], v)  # the tests load the NCCL libepx was built against
        self.assertIn("libnccl.so", v["libnccl"])
        self.assertEqual(_lib.version_string(22809), "2.28.9")
        self.assertEqual(_lib.version_string(23203), "2.32.3")
        self.assertEqual(_lib.version_string(2804), "2.8.4")

    def test_an_nccl_that_cannot_run_libepx_is_named_at_load(self):
        # A process whose NCCL reports 2.27.0 (ncclGetVersion interposed with LD_PRELOAD): loading
        # libepx raises NcclVersionError naming both versions and the library; nccl_versions() says so.
        with tempfile.TemporaryDirectory() as d:
            so = build_shared_lib(self, d, "libfakever.so", "int ncclGetVersion(int* v) { *v = 22700; return 0; }\n")
            r = run_py("import epx\n"
                       "try:\n"
                       "    epx.Buffer.get_buffer_size_hint(1, 128, 1024, 8, 2)\n"
                       "    print('NO ERROR')\n"
                       "except epx.NcclVersionError as e:\n"
                       "    print('MSG', e)\n"
                       "    print('VERSIONS', e.runtime, e.build)\n"
                       "v = epx.nccl_versions()\n"
                       "print('INFO', v['runtime'], v['compatible'])\n",
                       {"EPX_LIBRARY": _lib.library_path(), "LD_PRELOAD": so})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("NO ERROR", r.stdout)
        self.assertIn("ncclInvalidUsage", r.stdout)
        self.assertIn("NCCL runtime 2.27.0", r.stdout)
        build = epx.nccl_versions()["build"]
        self.assertIn("VERSIONS 2.27.0 %s" % build, r.stdout)
        self.assertIn("loaded libnccl:", r.stdout)
        self.assertIn("INFO 2.27.0 False", r.stdout)

    def test_size_hint(self):
        a = epx.Buffer.get_buffer_size_hint(1, 128, 1024, 8, 2)
        b = epx.Buffer.get_buffer_size_hint(8, 128, 1024, 8, 2)
        self.assertGreater(a, 0)
        self.assertGreater(b, a)
        self.assertGreater(epx.Buffer.get_buffer_size_hint(8, 128, 1024, 8, 2, exact_combine=True), b)

    def test_size_hint_hybrid_forwarding(self):
        direct = epx.Buffer.get_buffer_size_hint(8, 128, 1024, 8, 2, forwarding="direct")
        self.assertEqual(epx.Buffer.get_buffer_size_hint(8, 128, 1024, 8, 2), direct)  # auto = direct for now
        hybrid = epx.Buffer.get_buffer_size_hint(8, 128, 1024, 8, 2, forwarding="hybrid", forward_node_size=2)
        self.assertGreater(hybrid, direct)  # the forwarding regions
        with self.assertRaises(ValueError):
            epx.Buffer.get_buffer_size_hint(8, 128, 1024, 8, 2, forwarding="rail")
        with self.assertRaises(epx.EpError) as cm:  # 3 does not divide 8 ranks
            epx.Buffer.get_buffer_size_hint(8, 128, 1024, 8, 2, forwarding="hybrid", forward_node_size=3)
        self.assertEqual(cm.exception.code, _abi.ncclInvalidArgument)
        self.assertIn("divide the EP size 8", cm.exception.message)
        with self.assertRaises(epx.EpError) as cm:  # a node size without hybrid forwarding
            epx.Buffer.get_buffer_size_hint(8, 128, 1024, 8, 2, forward_node_size=2)
        self.assertIn("forwardNodeSize", cm.exception.message)

    def test_size_hint_invalid_config_raises_with_message(self):
        cases = [((1, 128, 1001, 8, 2), "hidden"),  # not a multiple of 8
                 ((1, 128, 1024, 8, 0), "topk"),
                 ((3, 128, 1024, 8, 2), "numExperts"),  # 8 experts over 3 ranks
                 ((1, 0, 1024, 8, 2), "maxTokensPerRank")]
        for args, word in cases:
            with self.assertRaises(epx.EpError) as cm:
                epx.Buffer.get_buffer_size_hint(*args)
            self.assertEqual(cm.exception.code, _abi.ncclInvalidArgument, args)
            self.assertEqual(cm.exception.name, "ncclInvalidArgument")
            self.assertIn(word, cm.exception.message, args)
            self.assertEqual(epx.get_last_error(), cm.exception.message)

    def test_low_latency_size_hint_and_limits(self):
        # docs/low-latency.md, "Memory": 2*E*T*(2H+16) + T*K*(2H+16) + 2*E*T*2H + E*T*2H bytes plus
        # synchronization words (E = 8, T = 128, H = 1024, K = 2: 11,046,912).
        n = epx.Buffer.get_buffer_size_hint(1, 128, 1024, 8, 2, algorithm="low_latency")
        self.assertGreaterEqual(n, 2 * 8 * 128 * 2064 + 128 * 2 * 2064 + 2 * 8 * 128 * 2048 + 8 * 128 * 2048)
        self.assertNotEqual(n, epx.Buffer.get_buffer_size_hint(1, 128, 1024, 8, 2))
        for args, word in (((1, 128, 2880, 8, 2), "multiple of 128"), ((1, 4097, 1024, 8, 2), "maxTokensPerRank")):
            with self.assertRaises(epx.EpError) as cm:
                epx.Buffer.get_buffer_size_hint(*args, algorithm="low_latency")
            self.assertEqual(cm.exception.code, _abi.ncclInvalidArgument)
            self.assertIn(word, cm.exception.message)
            self.assertIn("LowLatency", cm.exception.message)

    def test_fp8_needs_hidden_multiple_of_128(self):
        epx.Buffer.get_buffer_size_hint(1, 128, 1024, 8, 2, fp8=True)
        with self.assertRaises(epx.EpError):
            epx.Buffer.get_buffer_size_hint(1, 128, 1032, 8, 2, fp8=True)


class TestConfigInPython(unittest.TestCase):
    def test_bad_types(self):
        with self.assertRaises(TypeError):
            epx.Buffer.get_buffer_size_hint(1, 128.0, 1024, 8, 2)
        with self.assertRaises(ValueError):
            epx.Buffer.get_buffer_size_hint(1, 128, 1024, 8, 2, algorithm="fast")

    def test_ints_outside_c_int_raise_value_error_naming_the_argument(self):
        # ctypes would wrap these modulo 2**32 silently; they are rejected before libepx is called.
        cases = [(dict(num_ranks=2 ** 40), "num_ranks"),
                 (dict(num_ranks=-2 ** 31 - 1), "num_ranks"),
                 (dict(max_tokens_per_rank=2 ** 31), "max_tokens_per_rank"),
                 (dict(hidden=2 ** 32 + 1024), "hidden"),
                 (dict(num_experts=2 ** 63), "num_experts"),
                 (dict(topk=-2 ** 31 - 1), "topk"),
                 (dict(sm_budget=2 ** 31), "sm_budget"),
                 (dict(timeout_ms=2 ** 40), "timeout_ms")]
        base = dict(num_ranks=1, max_tokens_per_rank=128, hidden=1024, num_experts=8, topk=2)
        for over, name in cases:
            with self.assertRaises(ValueError, msg=over) as cm:
                epx.Buffer.get_buffer_size_hint(**dict(base, **over))
            self.assertIn(name + "=", str(cm.exception))
            self.assertIn("C int", str(cm.exception))
        # The bounds themselves pass the Python check (libepx may then reject them).
        from epx import buffer as B  # noqa: PLC0415
        self.assertEqual(B._check_int32("x", 2 ** 31 - 1), 2 ** 31 - 1)
        self.assertEqual(B._check_int32("x", -2 ** 31), -2 ** 31)

    def test_error_object(self):
        e = epx.EpError(5, "why")
        self.assertEqual((e.code, e.name, e.message), (5, "ncclInvalidUsage", "why"))
        self.assertIn("ncclInvalidUsage (5): why", str(e))
        self.assertTrue(issubclass(epx.EpAsyncError, epx.EpError))


# --- argument checks with fake tensors ------------------------------------------------------------
class FakeTensor:
    """Just what epx._checks reads: shape, dtype, device, is_cuda, is_contiguous(), data_ptr()."""

    def __init__(self, shape, dtype, ptr=0x10000, cuda=True, contiguous=True, pinned=False):
        self.shape = tuple(shape)
        self.dtype = "torch." + dtype
        self.is_cuda = cuda
        self.device = "cuda:0" if cuda else "cpu"
        self._contig = contiguous
        self._ptr = ptr
        self._pinned = pinned

    def is_contiguous(self):
        return self._contig

    def is_pinned(self):
        return self._pinned

    def data_ptr(self):
        return self._ptr


def dispatch_args(**over):
    t, h, k = over.pop("t", 4), 256, 2
    a = dict(x=FakeTensor((t, h), "bfloat16"), x_scales=None, topk_idx=FakeTensor((t, k), "int64"),
             topk_weights=FakeTensor((t, k), "float32"))
    a.update(over)
    kw = dict(hidden=h, topk=k, max_tokens=8, fp8_enabled=False, device="cuda:0")
    return a, kw


class TestDispatchChecks(unittest.TestCase):
    def check(self, **over):
        fp8 = over.pop("fp8_enabled", False)
        a, kw = dispatch_args(**over)
        kw["fp8_enabled"] = fp8
        return _checks.check_dispatch_args(a["x"], a["x_scales"], a["topk_idx"], a["topk_weights"], **kw)

    def test_valid_bf16(self):
        _, _, t, xt, it = self.check()
        self.assertEqual((t, xt, it), (4, _abi.ncclBfloat16, _abi.ncclInt64))
        _, _, _, _, it = self.check(topk_idx=FakeTensor((4, 2), "int32"), topk_weights=None)
        self.assertEqual(it, _abi.ncclInt32)

    def test_zero_tokens(self):
        self.assertEqual(self.check(t=0)[2], 0)

    def test_x_errors(self):
        cases = [
            (dict(x=FakeTensor((4, 128), "bfloat16")), ValueError, "shape [4, 256]"),
            (dict(x=FakeTensor((4, 256), "float16")), TypeError, "torch.bfloat16 or torch.float8_e4m3fn"),
            (dict(x=FakeTensor((4, 256), "bfloat16", cuda=False)), ValueError, "CUDA tensor"),
            (dict(x=FakeTensor((4, 256), "bfloat16", contiguous=False)), ValueError, "contiguous"),
            (dict(x=FakeTensor((4, 256), "bfloat16", ptr=0x10008)), ValueError, "16-byte aligned"),
            (dict(x=FakeTensor((4, 256, 1), "bfloat16")), ValueError, "2-D"),
            (dict(t=9), ValueError, "max_tokens_per_rank=8"),
            (dict(x_scales=FakeTensor((4, 2), "float32")), ValueError, "FP8"),
        ]
        for over, exc, text in cases:
            with self.assertRaises(exc, msg=str(over)) as cm:
                self.check(**over)
            self.assertIn(text, str(cm.exception))

    def test_topk_errors(self):
        with self.assertRaisesRegex(TypeError, "topk_idx must have dtype torch.int32 or torch.int64"):
            self.check(topk_idx=FakeTensor((4, 2), "float32"))
        with self.assertRaisesRegex(ValueError, r"topk_idx must have shape \[4, 2\]"):
            self.check(topk_idx=FakeTensor((4, 3), "int32"))
        with self.assertRaisesRegex(ValueError, "8-byte aligned"):
            self.check(topk_idx=FakeTensor((4, 2), "int64", ptr=0x10004))
        with self.assertRaisesRegex(TypeError, "topk_weights must have dtype torch.float32"):
            self.check(topk_weights=FakeTensor((4, 2), "bfloat16"))
        with self.assertRaisesRegex(ValueError, "topk_weights must have shape"):
            self.check(topk_weights=FakeTensor((3, 2), "float32"))

    def test_fp8(self):
        x8 = FakeTensor((4, 256), "float8_e4m3fn")
        sc = FakeTensor((4, 2), "float32")
        with self.assertRaisesRegex(ValueError, "fp8=True"):
            self.check(x=x8, x_scales=sc)
        with self.assertRaisesRegex(ValueError, "needs x_scales"):
            self.check(x=x8, fp8_enabled=True)
        with self.assertRaisesRegex(ValueError, r"x_scales must have shape \[4, 2\]"):
            self.check(x=x8, x_scales=FakeTensor((4, 1), "float32"), fp8_enabled=True)
        x, s, t, xt, _ = self.check(x=x8, x_scales=sc, fp8_enabled=True)
        self.assertEqual((x, s, xt), (x8, sc, _abi.ncclFloat8e4m3))
        x, s, _, xt, _ = self.check(x=(x8, sc), fp8_enabled=True)  # DeepEP-style tuple
        self.assertEqual((x, s, xt), (x8, sc, _abi.ncclFloat8e4m3))
        with self.assertRaisesRegex(ValueError, "not both"):
            self.check(x=(x8, sc), x_scales=sc, fp8_enabled=True)


class TestCombineChecks(unittest.TestCase):
    def check(self, x, bias=None, w=None, expanded=True, rows=6, t=4):
        return _checks.check_combine_args(x, rows, t, bias, w, hidden=256, topk=2, expanded=expanded,
                                          device="cuda:0")

    def test_valid(self):
        self.assertEqual(self.check(FakeTensor((6, 256), "bfloat16")), (None, None))
        b = FakeTensor((4, 256), "bfloat16")
        self.assertEqual(self.check(FakeTensor((8, 256), "bfloat16"), bias=b), (b, None))
        self.assertEqual(self.check(FakeTensor((6, 256), "bfloat16"), bias=(b, b)), (b, b))
        self.check(FakeTensor((6, 256), "bfloat16"), w=FakeTensor((6,), "float32"))
        self.check(FakeTensor((6, 256), "bfloat16"), w=FakeTensor((6, 2), "float32"), expanded=False)

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, r"rows >= 6"):
            self.check(FakeTensor((5, 256), "bfloat16"))
        with self.assertRaisesRegex(TypeError, "torch.bfloat16"):
            self.check(FakeTensor((6, 256), "float32"))
        with self.assertRaisesRegex(ValueError, r"bias\[1\] must have shape \[4, 256\]"):
            self.check(FakeTensor((6, 256), "bfloat16"), bias=(FakeTensor((4, 256), "bfloat16"),
                                                               FakeTensor((5, 256), "bfloat16")))
        with self.assertRaisesRegex(ValueError, "at most two"):
            self.check(FakeTensor((6, 256), "bfloat16"), bias=[None, None, None])
        with self.assertRaisesRegex(ValueError, r"topk_weights must have shape \[\*\]"):
            self.check(FakeTensor((6, 256), "bfloat16"), w=FakeTensor((6, 2), "float32"))
        with self.assertRaisesRegex(ValueError, "topk_weights has 5 rows"):
            self.check(FakeTensor((6, 256), "bfloat16"), w=FakeTensor((5, 2), "float32"), expanded=False)


class TestLoadBalancerChecks(unittest.TestCase):
    """epx.LoadBalancer's Python-side checks (no torch, no GPU): the plan and every call argument."""

    def test_plan(self):
        from epx.lb import make_plan  # noqa: PLC0415
        p = make_plan(256, 2, [44040192, 10752], [44040192])
        self.assertEqual((p.numExperts, p.numSlots, p.numWeightTensors, p.numGradTensors), (256, 2, 2, 1))
        self.assertEqual(list(p.weightRowBytes[:2]), [44040192, 10752])
        self.assertEqual(p.gradRowElems[0], 44040192)
        with self.assertRaisesRegex(TypeError, "num_slots must be an int"):
            make_plan(256, 2.0, [16], [])
        with self.assertRaisesRegex(ValueError, "weight_row_bytes has 9 entries, at most 8"):
            make_plan(256, 2, [16] * 9, [])
        with self.assertRaisesRegex(TypeError, "grad_row_elems must be a list of ints"):
            make_plan(256, 2, [16], 4)

    def test_mapping(self):
        _checks.check_lb_mapping(FakeTensor((8,), "int32"), 4, 2)
        _checks.check_lb_mapping(FakeTensor((4, 2), "int32"), 4, 2)
        with self.assertRaisesRegex(ValueError, r"mapping must have shape \[8\], got \[7\]"):
            _checks.check_lb_mapping(FakeTensor((7,), "int32"), 4, 2)
        with self.assertRaisesRegex(TypeError, "mapping must have dtype torch.int32"):
            _checks.check_lb_mapping(FakeTensor((8,), "int64"), 4, 2)
        with self.assertRaisesRegex(ValueError, "mapping is required"):
            _checks.check_lb_mapping(None, 4, 2)

    def test_rows(self):
        # 2 local experts: weights of 64 bytes per expert as 2 x 32 FP8 or 2 x 16 FP32; gradients of 8.
        ptrs = _checks.check_lb_rows("weights", [FakeTensor((2, 64), "float8_e4m3fn", ptr=0x1000),
                                                 FakeTensor((2, 16), "float32", ptr=0x2000)], [64, 64], 2, False)
        self.assertEqual(ptrs, [0x1000, 0x2000])
        self.assertEqual(_checks.check_lb_rows("grads", [FakeTensor((2, 8), "float32")], [8], 2, True), [0x10000])
        with self.assertRaisesRegex(ValueError, r"weights\[0\] must hold 128 bytes \(2 local experts x 64\), got 64"):
            _checks.check_lb_rows("weights", [FakeTensor((2, 16), "bfloat16")], [64], 2, False)
        with self.assertRaisesRegex(ValueError, "weights has 1 tensors but the plan has 2"):
            _checks.check_lb_rows("weights", [FakeTensor((2, 64), "uint8")], [64, 16], 2, False)
        with self.assertRaisesRegex(TypeError, r"grads\[0\] must have dtype torch.float32, got bfloat16"):
            _checks.check_lb_rows("grads", [FakeTensor((2, 8), "bfloat16")], [8], 2, True)
        with self.assertRaisesRegex(ValueError, "16-byte aligned"):
            _checks.check_lb_rows("grads", [FakeTensor((2, 8), "float32", ptr=0x1004)], [8], 2, True)
        with self.assertRaisesRegex(ValueError, "must be a CUDA tensor"):
            _checks.check_lb_rows("grads", [FakeTensor((2, 8), "float32", cuda=False)], [8], 2, True)
        with self.assertRaisesRegex(ValueError, "must be contiguous"):
            _checks.check_lb_rows("grads", [FakeTensor((2, 8), "float32", contiguous=False)], [8], 2, True)
        with self.assertRaisesRegex(TypeError, "must be a list of tensors"):
            _checks.check_lb_rows("grads", FakeTensor((2, 8), "float32"), [8], 2, True)

    def test_needs_torch(self):
        r = run_py("import sys; sys.modules['torch'] = None\n"
                   "import epx\n"
                   "try:\n"
                   "    epx.LoadBalancer(None, 16, 1, [16])\n"
                   "except ImportError as e:\n"
                   "    print('MSG', e)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("MSG epx.LoadBalancer needs PyTorch", r.stdout)



# --- prototypes (epx/_lib.py) against the headers ------------------------------------------------
def header_functions(path):
    """{name: [parameter types]} of every `ncclResult_t ncclEp...(...);` declared in the header."""
    with open(path) as f:
        text = strip_comments(f.read())
    out = {}
    for name, params in re.findall(r"ncclResult_t\s+(ncclEp\w+)\s*\(([^)]*)\)\s*;", text):
        types = []
        for p in params.split(","):
            p = " ".join(p.split())
            # Drop the parameter's name: the last identifier, unless the declaration is only a type.
            m = re.match(r"^(.*?[\s*])(\w+)$", p)
            types.append(m.group(1).strip() if m else p)
        out[name] = types
    return out


class _FakeFunction:
    restype = None
    argtypes = None


class _FakeLib:
    """Records what _lib._declare sets on each function."""

    def __init__(self):
        self.functions = {}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.functions.setdefault(name, _FakeFunction())


def _ctypes_kind(t):
    if t in (C.c_void_p, C.c_char_p) or (isinstance(t, type) and issubclass(t, C._Pointer)):
        return "pointer"
    return {C.c_int: "int", C.c_size_t: "size_t"}.get(t, repr(t))


def _c_kind(t):
    if "*" in t or t in ("ncclComm_t", "cudaStream_t", "ncclEpEngram_t", "ncclEpLb_t"):
        return "pointer"
    return {"int": "int", "size_t": "size_t"}.get(t, t)


class TestPrototypes(unittest.TestCase):
    """Every function of engram.h is declared in epx/_lib.py with the header's parameters: their
    number and, per parameter, int, size_t or a pointer (handles included)."""

    def check_header(self, path):
        fake = _FakeLib()
        _lib._declare(fake, "fake")
        funcs = header_functions(path)
        self.assertTrue(funcs, path)
        for name, types in funcs.items():
            self.assertIn(name, fake.functions, "%s of %s is not declared in epx/_lib.py" % (name, path))
            f = fake.functions[name]
            self.assertIs(f.restype, _abi.ncclResult_t, name)
            self.assertEqual(len(f.argtypes), len(types), "%s: %s" % (name, types))
            for i, (py, c) in enumerate(zip(f.argtypes, types)):
                self.assertEqual(_ctypes_kind(py), _c_kind(c), "%s parameter %d (%s)" % (name, i, c))

    def test_engram_h(self):
        funcs = header_functions(ENGRAM_H)
        self.assertEqual(sorted(funcs), sorted(["ncclEpEngramGetBufferSizeHint", "ncclEpEngramCreate",
                                                "ncclEpEngramDestroy", "ncclEpEngramSetTable", "ncclEpEngramFetch",
                                                "ncclEpEngramWaitLayer", "ncclEpEngramGetAsyncError"]))
        self.check_header(ENGRAM_H)


class TestEngramChecks(unittest.TestCase):
    """epx.EngramBuffer's Python-side checks (no torch, no GPU): the plan, the config, the row
    argument, the tables and the fetch's tensors."""

    def test_row_spec_and_plan(self):
        from epx import engram  # noqa: PLC0415
        self.assertEqual(engram.row_spec(1024), (1024, 1024, None))
        self.assertEqual(engram.row_spec((512, "torch.bfloat16")), (1024, 512, "torch.bfloat16"))
        self.assertEqual(engram.row_spec((3, "torch.float32"))[0], 12)  # libepx refuses 12 (not a multiple of 16)
        with self.assertRaisesRegex(ValueError, r"\(row_elems, dtype\)"):
            engram.row_spec((512,))
        with self.assertRaisesRegex(TypeError, "unsupported dtype"):
            engram.row_spec((512, "torch.complex64"))
        with self.assertRaisesRegex(TypeError, "row_bytes must be an int"):
            engram.row_spec(1024.0)
        p = engram.make_plan(4, 1 << 20, 1024, 4096, 16)
        self.assertEqual((p.numLayers, p.numRows, p.rowBytes, p.maxTokens, p.entriesPerToken), (4, 1 << 20, 1024, 4096, 16))
        p = engram.make_plan(1, 2 ** 40, 16, 1, 1)  # int64 rows pass Python (libepx refuses >= 2^31)
        self.assertEqual(p.numRows, 2 ** 40)
        with self.assertRaisesRegex(ValueError, "max_tokens=2147483648 does not fit a C int"):
            engram.make_plan(4, 1024, 1024, 2 ** 31, 16)
        with self.assertRaisesRegex(ValueError, "row_bytes=-16 does not fit a C size_t"):
            engram.make_plan(4, 1024, -16, 8, 16)
        with self.assertRaisesRegex(TypeError, "num_layers must be an int"):
            engram.make_plan(True, 1024, 1024, 8, 16)

    def test_config(self):
        from epx import engram  # noqa: PLC0415
        c = engram.make_config()
        d = _abi.engram_config_initializer()
        self.assertEqual([getattr(c, f) for f, _ in c._fields_], [getattr(d, f) for f, _ in d._fields_])
        self.assertEqual((c.numCtas, c.chunkBytes), (_abi.NCCL_EP_UNDEF_INT, 0))
        c = engram.make_config(num_ctas=16, chunk_bytes=4 << 20, timeout_ms=500)
        self.assertEqual((c.numCtas, c.chunkBytes, c.timeoutMs), (16, 4 << 20, 500))
        self.assertEqual((c.size, c.magic, c.version),
                         (C.sizeof(_abi.ncclEpEngramConfig_t), _abi.NCCL_EP_ENGRAM_CONFIG_MAGIC, _abi.EPX_VERSION_CODE))
        with self.assertRaisesRegex(TypeError, "num_ctas must be an int"):
            engram.make_config(num_ctas=8.0)

    def test_indices(self):
        self.assertEqual(_checks.check_engram_indices(FakeTensor((3, 5, 16), "int32"), 3, 8, 16), 5)
        self.assertEqual(_checks.check_engram_indices(FakeTensor((3, 0, 16), "int32"), 3, 8, 16), 0)
        with self.assertRaisesRegex(ValueError, "indices has 9 tokens but the EngramBuffer was created with max_tokens=8"):
            _checks.check_engram_indices(FakeTensor((3, 9, 16), "int32"), 3, 8, 16)
        with self.assertRaisesRegex(ValueError, r"indices must have shape \[3, \*, 16\], got \[2, 5, 16\]"):
            _checks.check_engram_indices(FakeTensor((2, 5, 16), "int32"), 3, 8, 16)
        with self.assertRaisesRegex(TypeError, "indices must have dtype torch.int32, got int64"):
            _checks.check_engram_indices(FakeTensor((3, 5, 16), "int64"), 3, 8, 16)
        with self.assertRaisesRegex(ValueError, "indices must be a CUDA tensor"):
            _checks.check_engram_indices(FakeTensor((3, 5, 16), "int32", cuda=False), 3, 8, 16)
        with self.assertRaisesRegex(ValueError, "indices is on cuda:0 but the buffer is on cuda:1"):
            _checks.check_engram_indices(FakeTensor((3, 5, 16), "int32"), 3, 8, 16, device="cuda:1")

    def test_tables(self):
        # 8 rows per rank of 64 bytes: 32 bf16, 64 uint8 or 16 float32 per row.
        t = FakeTensor((8, 32), "bfloat16", ptr=0x1000)
        self.assertEqual(_checks.check_engram_table(t, 8, 64, "bfloat16", "cuda:0"), 0x1000)
        self.assertEqual(_checks.check_engram_table(FakeTensor((8, 16), "float32"), 8, 64), 0x10000)  # bytes: any dtype
        pinned = FakeTensor((8, 64), "uint8", ptr=0x2000, cuda=False, pinned=True)
        self.assertEqual(_checks.check_engram_table(pinned, 8, 64, None, "cuda:0"), 0x2000)
        cases = [
            (FakeTensor((8, 32), "bfloat16", cuda=False), ValueError, "pinned CPU tensor"),
            (FakeTensor((8, 32), "float16"), TypeError, "table must have dtype torch.bfloat16"),
            (FakeTensor((4, 32), "bfloat16"), ValueError, r"table must have shape \[8, 32\]"),
            (FakeTensor((8, 16, 2), "bfloat16"), ValueError, "must have shape"),
            (FakeTensor((8, 32), "bfloat16", ptr=0x1008), ValueError, "16-byte aligned"),
            (FakeTensor((8, 32), "bfloat16", contiguous=False), ValueError, "contiguous"),
            (FakeTensor((8, 64), "bfloat16", ptr=0x2008, cuda=False, pinned=True), ValueError, "must have shape"),
            (None, ValueError, "table is required"),
            ("table", TypeError, "must be a torch.Tensor"),
        ]
        for table, exc, text in cases:
            with self.assertRaisesRegex(exc, text, msg=repr(table)):
                _checks.check_engram_table(table, 8, 64, "bfloat16", "cuda:0")
        with self.assertRaisesRegex(ValueError, "16-byte aligned"):
            _checks.check_engram_table(FakeTensor((8, 64), "uint8", ptr=0x2008, cuda=False, pinned=True), 8, 64)
        with self.assertRaisesRegex(ValueError, "table is on cuda:0 but the EngramBuffer is on cuda:1"):
            _checks.check_engram_table(t, 8, 64, "bfloat16", "cuda:1")
        with self.assertRaisesRegex(ValueError, "not a whole number of float32"):
            _checks.check_engram_table(FakeTensor((8, 4), "float32"), 8, 18)

    def test_streams(self):
        from epx import engram  # noqa: PLC0415

        class S:
            cuda_stream = 0x1234

        self.assertEqual(engram._stream_handle(S()).value, 0x1234)
        self.assertEqual(engram._stream_handle(0x99).value, 0x99)
        with self.assertRaisesRegex(TypeError, "torch.cuda.Stream or an int handle"):
            engram._stream_handle("s")

    def test_exported_and_needs_torch(self):
        self.assertIn("EngramBuffer", epx.__all__)
        r = run_py("import sys; sys.modules['torch'] = None\n"
                   "import epx\n"
                   "try:\n"
                   "    epx.EngramBuffer(None, 4, 1024, 1024, 128, 16)\n"
                   "except ImportError as e:\n"
                   "    print('MSG', e)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("MSG epx.EngramBuffer needs PyTorch", r.stdout)


if __name__ == "__main__":
    unittest.main()
