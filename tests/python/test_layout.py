#!/usr/bin/env python3
"""Layout rules of the Python side (tools/ and tests/python/):

  - no file manipulates sys.path (assignment, insert/append/..., `from sys import path`,
    site.addsitedir): code is found through the era_tools and references packages;
  - no script imports another script: every import of a module that lives in tools/ or
    tests/python/ names the era_tools or references package, relative imports are used only
    inside those packages, and era_tools never imports the test references;
  - every tools/*.py is a launcher that only imports `main` from era_tools.<its name>;
  - every [project.scripts] entry point of tools/pyproject.toml names an importable callable, and
    every launcher's module has one;
  - every launcher, and `python3 -m era_tools.<module>` for every entry point, runs `--help` with
    exit status 0 (the launchers without PYTHONPATH, from another folder);
  - the modules of era_tools import each other without a cycle (the static import graph: every
    `import era_tools.x`, `from era_tools import x`, `from . import x`, `from .x import y`,
    including the imports inside functions), and only the family registry
    (era_tools/families/__init__.py) and the family modules import a family module.

    test_layout.py [unittest options]

Needs PYTHONPATH=tools:tests/python (as tests/CMakeLists.txt sets it) for the entry-point check.
"""
import ast
import importlib
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")
PYTESTS = os.path.join(REPO, "tests", "python")
PACKAGES = {"era_tools": os.path.join(TOOLS, "era_tools"),
            "references": os.path.join(PYTESTS, "references")}
SYS_PATH_MUTATORS = {"insert", "append", "extend", "remove", "pop", "clear", "reverse", "sort",
                     "__setitem__", "__delitem__", "__iadd__"}
PATH_LOADERS = {"run_path", "spec_from_file_location", "SourceFileLoader", "load_source"}


def python_files():
    """Every .py under tools/ and tests/python/ (no __pycache__)."""
    out = []
    for root in (TOOLS, PYTESTS):
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            out.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith(".py"))
    return out


def local_module_names():
    """Top-level names that tools/ and tests/python/ put on sys.path: scripts and packages."""
    names = set()
    for root in (TOOLS, PYTESTS):
        for entry in os.listdir(root):
            path = os.path.join(root, entry)
            if entry.endswith(".py"):
                names.add(entry[:-3])
            elif os.path.isfile(os.path.join(path, "__init__.py")):
                names.add(entry)
    return names


def package_of(path):
    """'era_tools' / 'references' for a file inside one of the packages, else None (a script)."""
    for name, folder in PACKAGES.items():
        if os.path.commonpath([os.path.abspath(path), folder]) == folder:
            return name
    return None


def sys_path_edits(source, where="<string>"):
    """Lines of `source` that change sys.path (or import it to change it), as messages."""
    tree = ast.parse(source, where)
    sys_names, path_names, site_names = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "sys":
                    sys_names.add(a.asname or "sys")
                if a.name == "site":
                    site_names.add(a.asname or "site")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            for a in node.names:
                if a.name == "path":
                    path_names.add(a.asname or "path")
    found = []

    def is_sys_path(n):
        return ((isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name)
                 and n.value.id in sys_names)
                or (isinstance(n, ast.Name) and n.id in path_names))

    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and \
                any(a.name == "path" for a in node.names):
            found.append(f"{where}:{line}: `from sys import path`")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                if is_sys_path(t) or (isinstance(t, ast.Subscript) and is_sys_path(t.value)):
                    found.append(f"{where}:{line}: sys.path assigned or deleted")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if is_sys_path(node.func.value) and node.func.attr in SYS_PATH_MUTATORS:
                found.append(f"{where}:{line}: sys.path.{node.func.attr}(...)")
            if (node.func.attr == "addsitedir" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in site_names):
                found.append(f"{where}:{line}: site.addsitedir(...)")
    return found


def bad_imports(source, where, package, local_names):
    """Imports in `source` (a file of `package`, None for a script) that reach a script, use a
    relative import outside a package, load code by file path, or make era_tools depend on the
    test references, as messages."""
    tree = ast.parse(source, where)
    allowed = set(PACKAGES)
    found = []

    def check(name, line, how):
        top = name.split(".")[0]
        if top in local_names and top not in allowed:
            found.append(f"{where}:{line}: {how} `{name}`: a script, not the era_tools or "
                         f"references package")
        if package == "era_tools" and top == "references":
            found.append(f"{where}:{line}: era_tools imports the test references (`{name}`)")

    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for a in node.names:
                check(a.name, line, "import")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None:
                    found.append(f"{where}:{line}: relative import in a script")
            elif node.module:
                check(node.module, line, "from-import")
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if fname in ("import_module", "__import__") and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                check(node.args[0].value, line, f"{fname}()")
            elif fname in PATH_LOADERS:
                found.append(f"{where}:{line}: {fname}(): loads code by file path")
    return found


def package_modules(folder, package):
    """{dotted module name: path} of every .py of a package folder (subpackages included;
    a package's __init__.py is the package itself)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        rel_parts = os.path.relpath(root, folder).split(os.sep)
        prefix = [package] + ([] if rel_parts == ["."] else rel_parts)
        for f in sorted(files):
            if f.endswith(".py"):
                parts = prefix if f == "__init__.py" else prefix + [f[:-3]]
                out[".".join(parts)] = os.path.join(root, f)
    return out


def import_edges(source, module, is_package, modules, where="<string>"):
    """The modules of `modules` (a set of dotted names) that `source`, the text of `module`,
    imports anywhere (functions included): `import a.b`, `from a import b` (b a module or a name
    of a), relative imports resolved against `module`."""
    tree = ast.parse(source, where)
    here = module.split(".") if is_package else module.split(".")[:-1]
    found = set()

    def add(name):
        # the deepest module of `modules` that `name` is or lies in
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            candidate = ".".join(parts[:n])
            if candidate in modules:
                found.add(candidate)
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)] if node.level > 1 else list(here)
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:  # `from pkg import mod` imports the module pkg.mod
                if target + "." + a.name in modules:
                    found.add(target + "." + a.name)
                else:
                    add(target)
    found.discard(module)
    return found


def import_graph(folder, package):
    """{module: set of modules of the package it imports} for the package at `folder`."""
    mods = package_modules(folder, package)
    names = set(mods)
    return {m: import_edges(read(p), m, os.path.basename(p) == "__init__.py", names, rel(p))
            for m, p in mods.items()}


def import_cycles(graph):
    """The cycles of the graph: for every module on one, the shortest cycle through it, each
    cycle once, as lists [a, b, ..., a] starting at its smallest module; [] if none."""
    index, low, stack, on_stack, comps = {}, {}, [], set(), []

    def strongconnect(v):  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    cycles, seen = [], set()
    for comp in sorted(comps):
        members = set(comp)
        for start in comp:  # the shortest cycle through each module of the component
            prev, queue, path = {start: None}, [start], None
            while queue and path is None:
                v = queue.pop(0)
                for w in sorted(graph.get(v, ())):
                    if w == start:
                        path = [v]
                        while prev[path[-1]] is not None:
                            path.append(prev[path[-1]])
                        path = list(reversed(path)) + [start]
                        break
                    if w in members and w not in prev:
                        prev[w] = v
                        queue.append(w)
            i = path.index(min(path[:-1]))  # one spelling per cycle: from its smallest module
            key = tuple(path[i:-1] + path[:i])
            if key not in seen:
                seen.add(key)
                cycles.append(list(key) + [key[0]])
    return cycles


def entry_points(pyproject):
    """[project.scripts] of a pyproject.toml as {command: "module:attr"}."""
    with open(pyproject, "rb") as f:
        data = f.read()
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the section is plain `name = "value"` lines
        scripts, inside = {}, False
        for raw in data.decode("utf-8").splitlines():
            line = raw.split("#", 1)[0].strip()
            if line.startswith("["):
                inside = line == "[project.scripts]"
            elif inside and "=" in line:
                key, value = (s.strip() for s in line.split("=", 1))
                scripts[key.strip("\"'")] = value.strip("\"'")
        return scripts
    return tomllib.loads(data.decode("utf-8")).get("project", {}).get("scripts", {})


def launcher_target(source, where="<string>"):
    """era_tools.<module> a launcher imports main from, or None if it does anything else
    (any other import or statement beyond the docstring and `raise SystemExit(main())`)."""
    body = ast.parse(source, where).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # docstring
    if len(body) != 2:
        return None
    imp, run = body
    if not (isinstance(imp, ast.ImportFrom) and imp.level == 0 and imp.module
            and imp.module.startswith("era_tools.")
            and [(a.name, a.asname) for a in imp.names] == [("main", None)]):
        return None
    if ast.dump(run) != ast.dump(ast.parse("raise SystemExit(main())").body[0]):
        return None
    return imp.module


def launchers():
    return sorted(os.path.join(TOOLS, f) for f in os.listdir(TOOLS) if f.endswith(".py"))


def read(path):
    with open(path, "r", encoding="utf-8") as f:
        return f.read()


def rel(path):
    return os.path.relpath(path, REPO)


class CheckersCatchViolations(unittest.TestCase):
    """The checkers themselves: each rule is seen on a snippet that breaks it."""

    def test_sys_path_edits_found(self):
        for snippet in ("import sys\nsys.path.insert(0, 'x')", "import sys\nsys.path.append('x')",
                        "import sys\nsys.path = ['x']", "import sys\nsys.path[:0] = ['x']",
                        "import sys\nsys.path += ['x']", "import sys as s\ns.path.insert(0, 'x')",
                        "from sys import path\npath.insert(0, 'x')",
                        "import site\nsite.addsitedir('x')"):
            self.assertTrue(sys_path_edits(snippet), snippet)
        for snippet in ("import sys\nprint(sys.path)", "import os\nos.path.join('a', 'b')",
                        "x = 'sys.path.insert(0, here)'"):
            self.assertEqual(sys_path_edits(snippet), [], snippet)

    def test_script_imports_found(self):
        local = {"era_tools", "references", "make_logit_refs", "export_llava"}
        for snippet in ("import make_logit_refs", "from make_logit_refs import save",
                        "import export_llava as e", "import importlib\n"
                        "importlib.import_module('make_logit_refs')", "from . import x",
                        "import runpy\nrunpy.run_path('tools/export_llava.py')"):
            self.assertTrue(bad_imports(snippet, "s.py", None, local), snippet)
        self.assertTrue(bad_imports("from references import pil_reference", "m.py", "era_tools",
                                    local))
        for snippet in ("from era_tools.export_llava import main", "import numpy",
                        "from references.eager_llava import splice_image", "import os.path"):
            self.assertEqual(bad_imports(snippet, "s.py", None, local), [], snippet)
        self.assertEqual(bad_imports("from . import safetensors_io", "m.py", "era_tools", local),
                         [])

    def test_launcher_shape(self):
        good = '"""doc"""\nfrom era_tools.export_llava import main\n\nraise SystemExit(main())\n'
        self.assertEqual(launcher_target(good), "era_tools.export_llava")
        for bad in ("import sys\nfrom era_tools.x import main\nraise SystemExit(main())",
                    "from era_tools.x import main, y\nraise SystemExit(main())",
                    "from x import main\nraise SystemExit(main())",
                    "from era_tools.x import main\nmain()"):
            self.assertIsNone(launcher_target(bad), bad)


    def test_import_cycles_found(self):
        mods = {"p", "p.a", "p.b", "p.c", "p.sub", "p.sub.d"}
        self.assertEqual(import_edges("from . import a\nfrom .b import x\nimport p.c", "p.d", False,
                                      mods), {"p.a", "p.b", "p.c"})
        self.assertEqual(import_edges("def f():\n    from ..a import y\n    from . import d",
                                      "p.sub", True, mods), {"p.a", "p.sub.d"})
        self.assertEqual(import_edges("from ..a import y\nfrom p import sub", "p.sub.d", False,
                                      mods), {"p.a", "p.sub"})
        self.assertEqual(import_edges("import os\nfrom p.b import x as y", "p.a", False, mods),
                         {"p.b"})
        self.assertEqual(import_cycles({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"},
                                        "p.d": {"p.a"}}), [["p.a", "p.b", "p.c", "p.a"]])
        self.assertEqual(import_cycles({"p.a": {"p.b"}, "p.b": set(), "p.c": {"p.a", "p.b"}}), [])


class Layout(unittest.TestCase):
    def test_no_sys_path_edits(self):
        found = []
        for path in python_files():
            found += sys_path_edits(read(path), rel(path))
        self.assertEqual(found, [])

    def test_no_script_imports_a_script(self):
        local = local_module_names()
        self.assertTrue({"era_tools", "references"} <= local, local)
        found = []
        for path in python_files():
            found += bad_imports(read(path), rel(path), package_of(path), local)
        self.assertEqual(found, [])

    def test_era_tools_has_no_import_cycle(self):
        graph = import_graph(PACKAGES["era_tools"], "era_tools")
        self.assertIn("era_tools.export_llava", graph)
        cycles = import_cycles(graph)
        self.assertEqual(cycles, [], "import cycles in era_tools:\n" + "\n".join(
            "  " + " -> ".join(c) for c in cycles))

    def test_only_the_registry_imports_the_families(self):
        graph = import_graph(PACKAGES["era_tools"], "era_tools")
        family_modules = {m for m in graph if m.startswith("era_tools.families.")}
        found = [f"{m} imports {', '.join(sorted(graph[m] & family_modules))}" for m in sorted(graph)
                 if graph[m] & family_modules and not m.startswith("era_tools.families")]
        self.assertEqual(found, [], "shared code must reach a family through the registry "
                                    "(era_tools.families)")

    def test_tools_scripts_are_launchers(self):
        self.assertTrue(launchers())
        for path in launchers():
            stem = os.path.basename(path)[:-3]
            self.assertEqual(launcher_target(read(path), rel(path)), f"era_tools.{stem}",
                             f"{rel(path)}: not a launcher of era_tools.{stem}.main")

    def test_entry_points_are_importable_callables(self):
        scripts = entry_points(os.path.join(TOOLS, "pyproject.toml"))
        self.assertTrue(scripts, "tools/pyproject.toml has no [project.scripts]")
        for command, target in scripts.items():
            with self.subTest(command=command):
                module, _, attr = target.partition(":")
                self.assertTrue(module and attr, f"{command} = {target!r}: not module:attr")
                obj = importlib.import_module(module)
                for part in attr.split("."):
                    obj = getattr(obj, part)
                self.assertTrue(callable(obj), f"{command} = {target!r}: not callable")
        for path in launchers():
            stem = os.path.basename(path)[:-3]
            self.assertIn(f"era_tools.{stem}:main", scripts.values(),
                          f"{rel(path)}: no [project.scripts] entry point for era_tools.{stem}")

    def test_launchers_run_help(self):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        with tempfile.TemporaryDirectory(prefix="era-layout-") as cwd:
            for path in launchers():
                with self.subTest(launcher=rel(path)):
                    r = subprocess.run([sys.executable, path, "--help"], cwd=cwd, env=env,
                                       capture_output=True, text=True, timeout=120)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertIn("usage:", r.stdout)

    def test_modules_run_with_dash_m(self):
        env = dict(os.environ, PYTHONPATH=TOOLS)
        modules = sorted({t.partition(":")[0]
                          for t in entry_points(os.path.join(TOOLS, "pyproject.toml")).values()})
        for module in modules:
            with self.subTest(module=module):
                r = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, env=env,
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("usage:", r.stdout)


if __name__ == "__main__":
    unittest.main()
