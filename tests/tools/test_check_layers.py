#!/usr/bin/env python3
"""Self-test of scripts/check-layers.py (run by `make check-layers`).

Each test writes a small tree of C files, compiles it the way the Makefile
does (objects under build/obj/<source>.o), runs the checker on it and
asserts that a clean tree passes and that each rule fails on the one
thing a tree breaks. Plain unittest, so it runs without pytest (and under
it).
"""
import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "check-layers.py")

# A clean tree: common/ below convert/, convert/b.c calling convert/a.c.
CLEAN = {
    "common/util.h": "int gt__util_add(int a, int b);\n",
    "common/util.c": '#include "common/util.h"\n'
                     "int gt__util_add(int a, int b)\n{\n    return a + b;\n}\n",
    "daemon/convert/a.h": "int gt__a(int x);\n",
    "daemon/convert/a.c": '#include "common/util.h"\n#include "daemon/convert/a.h"\n'
                          "int gt__a(int x)\n{\n    return gt__util_add(x, 1);\n}\n",
    "daemon/convert/b.h": "int gt__b(int x);\n",
    "daemon/convert/b.c": '#include "daemon/convert/a.h"\n#include "daemon/convert/b.h"\n'
                          "int gt__b(int x)\n{\n    return gt__a(x);\n}\n",
}


# With it, a.c calls b.c and b.c calls a.c.
MUTUAL = {
    "daemon/convert/a.c": '#include "daemon/convert/a.h"\n#include "daemon/convert/b.h"\n'
                          "int gt__a(int x)\n{\n    return x ? gt__b(x - 1) : 0;\n}\n",
}


def load_checker():
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class CheckLayers(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gt-layers-")
        self.mod = load_checker()

    def tearDown(self):
        shutil.rmtree(self.root)

    def tree(self, files):
        for rel, text in files.items():
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        for rel in files:
            if rel.endswith(".c"):
                obj = os.path.join(self.root, "build", "obj", rel[:-2] + ".o")
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                subprocess.run(["cc", "-c", "-Wall", "-Werror", "-I", self.root, "-o", obj,
                                os.path.join(self.root, rel)], check=True)

    def check(self, objects=True):
        args = ["--root", self.root] + (["--objects", "build"] if objects else [])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = self.mod.main(args)
        return rc, out.getvalue()

    def assert_fails(self, text):
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn(text, out)
        return out

    def test_clean_tree_passes(self):
        self.tree(CLEAN)
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        self.assertIn("calls, loops, header declarations ok", out)

    def test_mutual_calls_are_a_loop(self):
        self.tree(dict(CLEAN, **MUTUAL))
        out = self.assert_fails("calls: loop between daemon/convert/a.c, daemon/convert/b.c")
        self.assertIn("daemon/convert/a.c -> daemon/convert/b.c (gt__b)", out)

    def test_allowed_edge_breaks_the_loop_and_must_exist(self):
        self.tree(dict(CLEAN, **MUTUAL))
        self.mod.ALLOWED_EDGES = {("daemon/convert/a.c", "daemon/convert/b.c"): "test"}
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        self.mod.ALLOWED_EDGES[("daemon/convert/b.c", "common/util.c")] = "stale"
        self.assert_fails("allowed edge daemon/convert/b.c -> common/util.c no longer exists")

    def test_weak_reference_is_a_call(self):
        # An optional hook reached through a weak declaration still makes
        # its caller depend on it.
        files = dict(CLEAN)
        files["daemon/convert/a.c"] = ('#include "daemon/convert/a.h"\n#include "daemon/convert/b.h"\n'
                                       "__attribute__((weak)) int gt__b(int x);\n"
                                       "int gt__a(int x)\n{\n    return gt__b ? gt__b(x) : x;\n}\n")
        self.tree(files)
        self.assert_fails("daemon/convert/a.c -> daemon/convert/b.c (gt__b)")

    def test_loop_of_three_files(self):
        files = dict(CLEAN)
        files["daemon/convert/c.h"] = "int gt__c(int x);\n"
        files["daemon/convert/c.c"] = ('#include "daemon/convert/b.h"\n#include "daemon/convert/c.h"\n'
                                       "int gt__c(int x)\n{\n    return gt__b(x);\n}\n")
        files["daemon/convert/a.c"] = ('#include "daemon/convert/a.h"\n#include "daemon/convert/c.h"\n'
                                       "int gt__a(int x)\n{\n    return x ? gt__c(x - 1) : 0;\n}\n")
        self.tree(files)
        self.assert_fails("calls: loop between daemon/convert/a.c, daemon/convert/b.c, daemon/convert/c.c")

    def test_call_into_a_higher_room(self):
        files = dict(CLEAN)
        # Declared through a header of its own room, so no include rule
        # sees it (rule 6 flags the header too).
        files["common/util.h"] += "int gt__a(int x);\n"
        files["common/util.c"] = ('#include "common/util.h"\n'
                                  "int gt__util_add(int a, int b)\n{\n    return b ? a + b : gt__a(a);\n}\n")
        self.tree(files)
        self.assert_fails("common/util.c: common calls gt__a of daemon/convert/a.c (convert)")

    def test_only_project_names_count(self):
        # A libc name defined by one file (the agent interposes _exit) and
        # used by another is no edge.
        files = dict(CLEAN)
        files["daemon/convert/b.h"] += "void exit_hook(void);\n"
        files["daemon/convert/b.c"] += "void exit_hook(void)\n{\n}\n"
        files["common/util.h"] += "void exit_hook(void);\nvoid gt__util_quit(void);\n"
        files["common/util.c"] += "void gt__util_quit(void)\n{\n    exit_hook();\n}\n"
        self.tree(files)
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_header_declaring_another_rooms_function(self):
        files = dict(CLEAN)
        files["common/util.h"] += "int gt__b(int x);\n"
        self.tree(files)
        self.assert_fails("common/util.h: (common) declares gt__b, defined in daemon/convert/b.c (convert)")

    def test_agent_base_header_declaring_a_hook(self):
        files = dict(CLEAN)
        files["agent/internal.h"] = "void gt__torch_thing(void);\n"
        files["agent/torch.c"] = ('#include "agent/internal.h"\n'
                                  "void gt__torch_thing(void)\n{\n}\n")
        self.tree(files)
        self.assert_fails("agent/internal.h: (agent.base) declares gt__torch_thing, "
                          "defined in agent/torch.c (agent.hooks)")

    def test_inline_bodies_are_not_declarations(self):
        files = dict(CLEAN)
        files["daemon/convert/a.h"] += ("#include \"common/util.h\"\n/* gt__b(x) would be a loop */\n"
                                        "static inline int gt__a_twice(int x)\n{\n    return gt__util_add(x, x);\n}\n")
        self.tree(files)
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_objects_of_removed_sources_are_ignored(self):
        files = dict(CLEAN)
        files["daemon/convert/gone.c"] = ('#include "daemon/convert/b.h"\n'
                                          "int gt__gone(int x)\n{\n    return gt__b(x);\n}\n")
        files["daemon/convert/b.h"] += "int gt__gone(int x);\n"
        files["daemon/convert/b.c"] = ('#include "daemon/convert/b.h"\n'
                                       "int gt__b(int x)\n{\n    return x ? gt__gone(x) : 0;\n}\n")
        self.tree(files)
        self.assert_fails("loop between daemon/convert/b.c, daemon/convert/gone.c")
        os.remove(os.path.join(self.root, "daemon/convert/gone.c"))
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_long_file(self):
        files = dict(CLEAN)
        files["daemon/convert/long.h"] = "/* x */\n" * 801
        files["scripts/long.py"] = "x = 1\n" * 801
        self.tree(files)
        out = self.assert_fails("daemon/convert/long.h: 801 lines (max 800)")
        self.assertIn("scripts/long.py: 801 lines", out)

    def test_long_function(self):
        files = dict(CLEAN)
        body = "    x++;\n" * 100
        files["daemon/convert/a.h"] += "int gt__long(int x);\n"
        files["daemon/convert/a.c"] += "int gt__long(int x)\n{\n" + body + "    return x;\n}\n"
        self.tree(files)
        self.assert_fails("gt__long() is 104 lines (max 100)")

    def test_include_of_a_higher_room(self):
        files = dict(CLEAN)
        files["daemon/server/s.h"] = "int gt__s(void);\n"
        files["daemon/convert/b.c"] = '#include "daemon/server/s.h"\n' + files["daemon/convert/b.c"]
        self.tree(files)
        self.assert_fails("daemon/convert/b.c:1: convert includes daemon/server/s.h (server)")

    def test_missing_objects_is_an_error_not_a_pass(self):
        self.tree(CLEAN)
        shutil.rmtree(os.path.join(self.root, "build"))
        rc, out = self.check()
        self.assertEqual(rc, 2, out)
        self.assertIn("cannot read objects", out)


if __name__ == "__main__":
    unittest.main(verbosity=0)
