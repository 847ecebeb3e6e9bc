#!/usr/bin/env python3
"""Derive the option table of vLLM's OpenAI API server parser (``vllm serve``) for every supported line.

vLLM cannot be imported here (it needs torch and a device), so this script reads each release's source
and *interprets* it: it parses the modules with ``ast`` and runs a small abstract interpreter over the
code path that builds the parser (``ServeSubcommand.subparser_init`` → ``make_arg_parser`` →
``FrontendArgs.add_cli_args`` → ``AsyncEngineArgs.add_cli_args`` → ``get_kwargs(SomeConfig)`` …).
vLLM's own functions, including its ``get_kwargs``/``_compute_kwargs`` type-hint logic, are interpreted
as written in that release; only the outside world is modelled natively:

* ``argparse``: a model of ``ArgumentParser``/``_ArgumentGroup``/``Action`` (option strings, ``dest``,
  the action registry, ``BooleanOptionalAction``'s ``--no-`` negatives, Python 3.13 ``deprecated=``);
* ``typing``/``types``: the real modules; vLLM classes inside annotations become stand-in classes;
* ``dataclasses``/``pydantic``: ``fields()``, ``field()``, ``Field()``/``FieldInfo`` modelled from the
  class bodies;
* ``sys.argv`` is ``["vllm", "serve"]``, ``sys.version_info`` is 3.13, no ``VLLM_*`` environment
  variable is set, ``current_platform`` is a stub of the chosen platform (``--platform``, CUDA by default);
* no plugins are installed; classes that register themselves with a decorator
  (``@ReasoningParserManager.register_module("…")``) are registered when their package imports them;
* sets are iterated in a fixed order and then in the reverse order; options that differ are marked
  ``varies_between_runs`` (real vLLM iterates sets in an order that changes with ``PYTHONHASHSEED``);
* everything else (torch, transformers, …) is an opaque unknown value.

Nothing from vLLM is executed by Python itself and nothing of it is copied into the output beyond
flag names, value types, choices, literal defaults and deprecation.

Usage::

    python hack/vllm/extract_flags.py                      # every line 0.8 … 0.33
    python hack/vllm/extract_flags.py --versions 0.32 0.33
    python hack/vllm/extract_flags.py --check-fixture /work/shared/fixtures/vllm-0.32.0-cli-args.json
"""

from __future__ import annotations

import argparse
import ast
import builtins
import collections
import collections.abc
import copy
import dataclasses
import difflib
import enum
import functools
import hashlib
import itertools
import json
import math
import os
import re
import ssl
import sys
import tarfile
import textwrap
import types
import typing
import urllib.request
import zipfile
from pathlib import Path

try:
    import typing_extensions
except ImportError:  # pragma: no cover - typing_extensions ships with pydantic
    typing_extensions = None  # type: ignore[assignment]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "operator" / "kvpilot" / "data" / "vllm_flags"
CACHE_DIR = Path(os.environ.get("KVPILOT_VLLM_SDIST_CACHE", Path.home() / ".cache" / "kvpilot" / "vllm-sdists"))
SIMPLE_INDEX = "https://pypi.org/simple/vllm/"
OLDEST_LINE, NEWEST_LINE = (0, 8), (0, 33)

# ----------------------------------------------------------------------------------------------
# PyPI: pick the newest final release of a line, download, cache, verify
# ----------------------------------------------------------------------------------------------

_RELEASE_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.post(\d+))?$")


def _release_key(version: str) -> tuple[int, ...] | None:
    """Sort key of a final release (``0.8.5.post1``); ``None`` for pre-releases and dev builds."""
    m = _RELEASE_RE.match(version)
    if not m:
        return None
    return tuple(int(g) if g else (0 if i < 4 else -1) for i, g in enumerate(m.groups()))


def fetch_index() -> dict:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cached = CACHE_DIR / "simple-index.json"
    req = urllib.request.Request(SIMPLE_INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            data = resp.read()
        cached.write_bytes(data)
    except OSError as exc:
        if not cached.exists():
            raise SystemExit(f"cannot reach {SIMPLE_INDEX}: {exc}") from exc
        print(f"  (PyPI unreachable: {exc}; using cached index {cached})")
        data = cached.read_bytes()
    return json.loads(data)


def pick_release(index: dict, line: tuple[int, int], filename: str | None = None) -> tuple[str, dict]:
    """Newest final release of ``line``; its sdist, or a wheel when that release has no sdist.

    With ``filename``, that distribution file of the line instead (to rebuild a table from its recorded source).
    """
    by_version: dict[str, list[dict]] = collections.defaultdict(list)
    for f in index["files"]:
        if f.get("yanked"):
            continue
        name = f["filename"]
        if name.endswith(".tar.gz"):
            version = name[len("vllm-") : -len(".tar.gz")]
        elif name.endswith(".whl"):
            version = name.split("-")[1]
        else:
            continue
        by_version[version].append(f)
    candidates = [(key, v) for v in by_version if (key := _release_key(v)) is not None and tuple(key[:2]) == line]
    if not candidates:
        raise SystemExit(f"no release of vLLM {line[0]}.{line[1]} on PyPI")
    if filename is not None:
        named = [(v, f) for _, v in candidates for f in by_version[v] if f["filename"] == filename]
        if not named:
            raise SystemExit(f"{filename} is not a file of vLLM {line[0]}.{line[1]} on PyPI")
        return named[0]
    _, version = max(candidates)
    files = by_version[version]
    sdists = [f for f in files if f["filename"].endswith(".tar.gz")]
    if sdists:
        return version, sdists[0]
    wheels = sorted(
        (f for f in files if f["filename"].endswith(".whl")),
        key=lambda f: (("x86_64" not in f["filename"]) and ("none-any" not in f["filename"]), f["filename"]),
    )
    if not wheels:
        raise SystemExit(f"vLLM {version} has neither an sdist nor a wheel")
    return version, wheels[0]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(entry: dict) -> Path:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = CACHE_DIR / entry["filename"]
    want = entry["hashes"]["sha256"]
    if path.exists():
        if _sha256(path) == want:
            return path
        print(f"  cached {path.name} fails its sha256; downloading again")
        path.unlink()
    part = path.with_name(path.name + ".part")
    print(f"  downloading {entry['filename']} ({entry.get('size', 0) / 1e6:.0f} MB)")
    with urllib.request.urlopen(entry["url"], timeout=600) as resp, part.open("wb") as out:
        while chunk := resp.read(1 << 20):
            out.write(chunk)
    got = _sha256(part)
    if got != want:
        part.unlink()
        raise SystemExit(f"sha256 mismatch for {entry['filename']}: got {got}, PyPI says {want}")
    part.rename(path)
    return path


def read_sources(archive: Path) -> dict[str, str]:
    """``{"vllm/engine/arg_utils.py": text, …}`` for every Python file of the ``vllm`` package."""
    sources: dict[str, str] = {}
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.startswith("vllm/") and name.endswith(".py"):
                    sources[name] = zf.read(name).decode("utf-8", "replace")
        return sources
    with tarfile.open(archive, "r:gz") as tf:
        for member in tf:
            parts = member.name.split("/", 1)
            if len(parts) == 2 and parts[1].startswith("vllm/") and parts[1].endswith(".py") and member.isfile():
                fh = tf.extractfile(member)
                if fh is not None:
                    sources[parts[1]] = fh.read().decode("utf-8", "replace")
    return sources


# ----------------------------------------------------------------------------------------------
# Interpreter values
# ----------------------------------------------------------------------------------------------


class InterpError(Exception):
    """Something the interpreter could not evaluate."""


class Raised(Exception):
    """An exception raised by interpreted code."""

    def __init__(self, value):
        super().__init__(repr(value))
        self.value = value


# What evaluating one binding of vLLM's source may raise: the binding becomes Unknown (with a warning)
# instead of the whole extraction failing.
EVALUATION_FAILURES = (
    InterpError,
    Raised,
    AttributeError,
    TypeError,
    KeyError,
    ValueError,
    IndexError,
    RecursionError,
)


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class UnknownTruth(InterpError):
    pass


class Unknown:
    """A value the interpreter cannot know (torch, environment, I/O, …); absorbs every operation."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why

    def __repr__(self) -> str:
        return f"<unknown {self.why}>"

    def __call__(self, *args, **kwargs):
        return Unknown(f"{self.why}()")


def is_unknown(v) -> bool:
    return isinstance(v, Unknown)


_UNKNOWN_STUBS: dict[str, type] = {}


def unknown_stub(why: str) -> type:
    """A stand-in class for an unknown name used inside a type annotation."""
    name = re.sub(r"\W", "_", why)[-60:] or "Unknown"
    if name not in _UNKNOWN_STUBS:
        _UNKNOWN_STUBS[name] = type(name, (), {"__module__": "kvpilot_unknown"})
    return _UNKNOWN_STUBS[name]


MISSING = dataclasses.MISSING


class _PydanticUndefinedType:
    def __repr__(self) -> str:
        return "PydanticUndefined"


PYDANTIC_UNDEFINED = _PydanticUndefinedType()


class FieldInfoStub:
    """What ``pydantic.Field(...)`` returns, as far as vLLM's argparse code looks at it."""

    def __init__(self, default=PYDANTIC_UNDEFINED, *args, **kwargs):
        self.default = default
        self.default_factory = kwargs.get("default_factory")
        self.init = kwargs.get("init")
        self.kw_only = kwargs.get("kw_only")
        self.metadata = []
        self.deprecated = kwargs.get("deprecated")
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"FieldInfo(default={self.default!r})"


class DCFieldSpec:
    """What ``dataclasses.field(...)`` returns."""

    def __init__(self, default=MISSING, default_factory=MISSING, init=True, **kwargs):
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.kwargs = kwargs


class NField:
    """An entry of ``dataclasses.fields(cls)``; its ``type`` is evaluated lazily."""

    def __init__(self, interp, classref, name, annotation, value_node, value_scope_cls):
        self._interp = interp
        self._classref = classref
        self._annotation = annotation
        self.name = name
        self.init = True
        self.kw_only = False
        self.metadata = types.MappingProxyType({})
        self.repr = True
        self.compare = True
        self.hash = None
        self.default = MISSING
        self.default_factory = MISSING
        if value_node is not None:
            value = interp.class_attr_raw(value_scope_cls, name)
            if isinstance(value, DCFieldSpec):
                self.default = value.default
                self.default_factory = value.default_factory
                self.init = value.init
            else:
                self.default = value
        self._type = None

    @property
    def type(self):
        if self._type is None:
            self._type = self._interp.eval_annotation(self._annotation, self._classref.module)
        return self._type


class Module:
    def __init__(self, interp: Interp, name: str, path: str, source: str):
        self.interp = interp
        self.name = name
        self.path = path
        self.is_package = path.endswith("__init__.py")
        self.source = source
        self.tree = ast.parse(source, filename=path)
        self.index: dict[str, ast.AST] = {}
        self.values: dict[str, object] = {}
        self.evaluating: set[str] = set()
        self.star_imports: list[ast.ImportFrom] = []
        _index_body(self.tree.body, self.index, lambda test: interp.static_test(test, self), self.star_imports)

    def __repr__(self) -> str:
        return f"<module {self.name}>"

    def has(self, name: str) -> bool:
        return name in self.values or name in self.index

    def get(self, name: str):
        if name in self.values:
            return self.values[name]
        if name == "__name__":
            return self.name
        if name == "__file__":
            return self.path
        if name == "__doc__":
            return ast.get_docstring(self.tree)
        if name in self.index:
            if name in self.evaluating:
                return Unknown(f"{self.name}.{name} (circular)")
            self.evaluating.add(name)
            try:
                value = self.interp.eval_binding(self, name, self.index[name])
            finally:
                self.evaluating.discard(name)
            self.values[name] = value
            return value
        if self.is_package:
            sub = self.interp.load_module(f"{self.name}.{name}", quiet=True)
            if sub is not None:
                self.values[name] = sub
                return sub
        for stmt in self.star_imports:
            base = self.interp.resolve_relative(self, stmt.level, stmt.module)
            other = self.interp.load_module(base, quiet=True)
            if isinstance(other, Module) and other is not self and not name.startswith("_") and other.has(name):
                value = other.get(name)
                self.values[name] = value
                return value
        if "__getattr__" in self.index and name not in ("__getattr__", "__path__"):
            fn = self.get("__getattr__")
            try:
                return self.interp.call(fn, [name], {})
            except (InterpError, Raised):
                pass
        raise AttributeError(f"module {self.name!r} has no attribute {name!r}")


class ShimModule(types.SimpleNamespace):
    """A stand-in for a module outside vLLM."""

    def __init__(self, shim_name: str, /, **attrs):
        super().__init__(**attrs)
        self.__name__ = shim_name

    def __repr__(self) -> str:
        return f"<shim {self.__name__}>"


class UnknownModule:
    def __init__(self, name: str):
        self.__name__ = name

    def __repr__(self) -> str:
        return f"<unknown module {self.__name__}>"


class ClassRef:
    """A class defined in vLLM's source."""

    def __init__(self, interp: Interp, module: Module, node: ast.ClassDef, scope=None):
        self.interp = interp
        self.module = module
        self.node = node
        self.name = node.name
        self.scope = scope
        self.index: dict[str, ast.AST] = {}
        self.values: dict[str, object] = {}
        self.evaluating: set[str] = set()
        self.decorators = [ast.unparse(d) for d in node.decorator_list]
        self._bases = None
        self._mro = None
        self._stub = None
        self._members = None
        self._fields = None
        _index_body(node.body, self.index, lambda test: interp.static_test(test, module))

    def __repr__(self) -> str:
        return f"<class {self.module.name}.{self.name}>"

    def __call__(self, *args, **kwargs):
        return self.interp.call(self, list(args), kwargs)

    @property
    def bases(self) -> list:
        if self._bases is None:
            self._bases = []
            scope = self.scope or ModuleScope(self.module)
            for b in self.node.bases:
                try:
                    value = self.interp.eval(b, scope)
                except (InterpError, Raised, AttributeError):
                    value = Unknown(ast.unparse(b))
                origin = typing.get_origin(value) if not isinstance(value, (ClassRef, Unknown)) else None
                if origin is not None and isinstance(origin, type):
                    value = origin  # Generic[T], dict[str, X] …
                if isinstance(value, (ClassRef, type)):
                    self._bases.append(value)
        return self._bases

    @property
    def mro(self) -> list:
        if self._mro is None:
            self._mro = _c3_mro(self)
        return self._mro

    def is_dataclass_decorated(self) -> bool:
        for d in self.decorators:
            head = d.split("(")[0].split(".")[-1]
            if head in ("dataclass", "config", "pydantic_dataclass", "dataclasses.dataclass"):
                return True
        return False

    def is_dataclass(self) -> bool:
        return any(isinstance(c, ClassRef) and c.is_dataclass_decorated() for c in self.mro)

    def is_enum(self) -> bool:
        return any(isinstance(c, type) and issubclass(c, enum.Enum) for c in self.mro)

    def native_base(self):
        for c in self.mro:
            if (
                isinstance(c, type)
                and c is not object
                and not issubclass(c, enum.Enum)
                and any(issubclass(c, n) for n in NATIVE_CLASSES)
            ):
                return c
        return None

    def stub(self) -> type:
        if self._stub is None:
            real_bases = tuple(
                b for b in self.mro[1:] if isinstance(b, type) and b in (dict, list, str, int, float, set, tuple)
            )
            if any(ast.unparse(b).endswith("TypedDict") for b in self.node.bases):
                real_bases = ()
            ns = {
                "__module__": self.module.name,
                "__qualname__": self.name,
                "__doc__": ast.get_docstring(self.node),
                "_kvpilot_classref": self,
            }
            if self.is_dataclass():
                ns["__dataclass_fields__"] = {}
            try:
                self._stub = type(self.name, real_bases[:1] or (), ns)
            except TypeError:
                self._stub = type(self.name, (), ns)
        return self._stub

    def enum_members(self) -> list:
        if self._members is None:
            self._members = []
            counter = 0
            is_str_enum = any(c is str or (isinstance(c, type) and c.__name__ == "StrEnum") for c in self.mro)
            for stmt in self.node.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    name = stmt.targets[0].id
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                    name = stmt.target.id
                else:
                    continue
                if name.startswith("_"):
                    continue
                try:
                    value = self.interp.eval(stmt.value, ClassScope(self))
                except (InterpError, Raised, AttributeError):
                    value = Unknown(f"{self.name}.{name}")
                if isinstance(value, enum.auto):
                    counter += 1
                    value = name.lower() if is_str_enum else counter
                elif isinstance(value, (FuncRef, ClassRef)):
                    continue
                elif isinstance(value, int):
                    counter = value
                existing = next((m for m in self._members if m.value == value and not is_unknown(value)), None)
                member = EnumMember(self, name, value, alias_of=existing)
                self._members.append(member)
                self.values[name] = member
        return [m for m in self._members if m.alias_of is None]


class EnumMember:
    def __init__(self, cls: ClassRef, name: str, value, alias_of=None):
        self.cls = cls
        self.name = name
        self.value = value
        self._name_ = name
        self._value_ = value
        self.alias_of = alias_of

    def __repr__(self) -> str:
        return f"<{self.cls.name}.{self.name}: {self.value!r}>"

    def __eq__(self, other):
        if isinstance(other, EnumMember):
            return self is other or (self.cls is other.cls and self.value == other.value)
        return isinstance(other, (str, int)) and not isinstance(other, bool) and self.value == other

    def __hash__(self):
        return hash(self.value) if isinstance(self.value, (str, int)) else id(self)

    def __lt__(self, other):
        ov = other.value if isinstance(other, EnumMember) else other
        return self.value < ov

    def __str__(self):
        return str(self.value) if isinstance(self.value, str) else f"{self.cls.name}.{self.name}"


class FuncRef:
    """A function (or lambda) defined in vLLM's source, with its closure."""

    def __init__(self, interp: Interp, module: Module, node, scope=None, owner: ClassRef | None = None):
        self.interp = interp
        self.module = module
        self.node = node
        self.scope = scope
        self.owner = owner
        self.name = getattr(node, "name", "<lambda>")
        self.decorators = [ast.unparse(d) for d in getattr(node, "decorator_list", [])]
        self.is_generator = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _walk_function_body(node)
        )
        self.defaults_cache = None
        self.memo: dict | None = {} if any(_deco_head(d) in ("cache", "lru_cache") for d in self.decorators) else None
        self.__name__ = self.name
        self.__qualname__ = f"{owner.name}.{self.name}" if owner else self.name
        self.__doc__ = ast.get_docstring(node) if not isinstance(node, ast.Lambda) else None
        self.__module__ = module.name

    def kind(self) -> str:
        heads = {_deco_head(d) for d in self.decorators}
        if "staticmethod" in heads:
            return "static"
        if "classmethod" in heads:
            return "class"
        if "property" in heads or "cached_property" in heads:
            return "property"
        return "function"

    def __repr__(self) -> str:
        return f"<function {self.module.name}.{self.__qualname__}>"

    def __call__(self, *args, **kwargs):
        return self.interp.call(self, list(args), kwargs)


class BoundMethod:
    def __init__(self, func, self_obj):
        self.func = func
        self.self_obj = self_obj
        self.__name__ = getattr(func, "__name__", "?")

    def __repr__(self) -> str:
        return f"<bound {self.func!r}>"

    def __call__(self, *args, **kwargs):
        return self.func.interp.call(self, list(args), kwargs)


class Instance:
    """An instance of a vLLM class; ``native`` backs it when the class derives from a modelled one."""

    def __init__(self, cls: ClassRef, native=None):
        self.cls = cls
        self.native = native
        self.attrs = native.__dict__ if native is not None else {}

    def __repr__(self) -> str:
        return f"<{self.cls.name} instance>"


class SuperProxy:
    def __init__(self, start: ClassRef, obj):
        self.start = start
        self.obj = obj


def _deco_head(text: str) -> str:
    return text.split("(")[0].split(".")[-1]


def _walk_function_body(node):
    """The nodes of a function body, not descending into nested functions, lambdas or classes."""
    stack = list(node.body)
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(n))


def _index_body(body, index: dict, static_test, star_imports: list | None = None) -> None:
    """Record in ``index`` the statement that binds each name a block binds.

    An ``if`` whose test ``static_test`` decides contributes only the branch taken; an undecided one both,
    the body last so that it wins. A module's body (``star_imports`` given) also binds through imports,
    augmented assignments and the blocks of ``try`` and ``with``; a class body binds only through
    definitions and assignments.
    """
    module_level = star_imports is not None

    def nested(block) -> None:
        _index_body(block, index, static_test, star_imports)

    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            index[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for name in _target_names(target):
                    index[name] = stmt
        elif isinstance(stmt, ast.AnnAssign) or (module_level and isinstance(stmt, ast.AugAssign)):
            if isinstance(stmt.target, ast.Name) and stmt.value is not None:
                index[stmt.target.id] = stmt
        elif module_level and isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name == "*":
                    star_imports.append(stmt)  # type: ignore[union-attr]
                    continue
                bound = alias.asname or (alias.name.split(".")[0] if isinstance(stmt, ast.Import) else alias.name)
                index[bound] = stmt
        elif isinstance(stmt, ast.If):
            verdict = static_test(stmt.test)
            if verdict is not True:
                nested(stmt.orelse)
            if verdict is not False:
                nested(stmt.body)
        elif module_level and isinstance(stmt, ast.Try):
            for handler in stmt.handlers:
                nested(handler.body)
            nested(stmt.body)
            nested(stmt.orelse)
        elif module_level and isinstance(stmt, ast.With):
            nested(stmt.body)


def _target_names(target) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _c3_mro(cls) -> list:
    def bases_of(c):
        if isinstance(c, ClassRef):
            return c.bases
        return [b for b in c.__bases__] if isinstance(c, type) else []

    def mro_of(c):
        if isinstance(c, ClassRef):
            return c.mro
        return list(c.__mro__) if isinstance(c, type) else [c]

    seqs = [mro_of(b) for b in bases_of(cls)] + [list(bases_of(cls))]
    result = [cls]
    seqs = [list(s) for s in seqs if s]
    while seqs:
        for seq in seqs:
            head = seq[0]
            if not any(head in s[1:] for s in seqs):
                break
        else:  # inconsistent hierarchy: fall back to depth-first order
            head = seqs[0][0]
        result.append(head)
        seqs = [[x for x in s if x is not head] for s in seqs]
        seqs = [s for s in seqs if s]
    return result


# ----------------------------------------------------------------------------------------------
# argparse model
# ----------------------------------------------------------------------------------------------

SUPPRESS = argparse.SUPPRESS


class NAction:
    """Model of ``argparse.Action`` (Python 3.13 signature, ``deprecated`` included)."""

    kind = "store"

    def __init__(
        self,
        option_strings,
        dest,
        nargs=None,
        const=None,
        default=None,
        type=None,
        choices=None,
        required=False,
        help=None,
        metavar=None,
        deprecated=False,
        **extra,
    ):
        self.option_strings = list(option_strings)
        self.dest = dest
        self.nargs = nargs
        self.const = const
        self.default = default
        self.type = type
        self.choices = choices
        self.required = required
        self.help = help
        self.metavar = metavar
        self.deprecated = deprecated
        self._kv_extra = extra
        self._kv_given_option_strings = list(option_strings)

    def __call__(self, *args, **kwargs):
        return None


class N_StoreAction(NAction):
    kind = "_StoreAction"


class N_StoreConstAction(NAction):
    kind = "_StoreConstAction"

    def __init__(
        self, option_strings, dest, const=None, default=None, required=False, help=None, metavar=None, deprecated=False
    ):
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            const=const,
            default=default,
            required=required,
            help=help,
            metavar=metavar,
            deprecated=deprecated,
        )


class N_StoreTrueAction(N_StoreConstAction):
    kind = "_StoreTrueAction"

    def __init__(self, option_strings, dest, default=False, required=False, help=None, deprecated=False):
        super().__init__(
            option_strings, dest, const=True, default=default, required=required, help=help, deprecated=deprecated
        )


class N_StoreFalseAction(N_StoreConstAction):
    kind = "_StoreFalseAction"

    def __init__(self, option_strings, dest, default=True, required=False, help=None, deprecated=False):
        super().__init__(
            option_strings, dest, const=False, default=default, required=required, help=help, deprecated=deprecated
        )


class N_AppendAction(NAction):
    kind = "_AppendAction"


class N_AppendConstAction(N_StoreConstAction):
    """Takes no value, like store_const; only what it does with the constant differs."""

    kind = "_AppendConstAction"


class N_ExtendAction(NAction):
    kind = "_ExtendAction"


class N_CountAction(NAction):
    kind = "_CountAction"

    def __init__(self, option_strings, dest, default=None, required=False, help=None, deprecated=False):
        super().__init__(
            option_strings, dest, nargs=0, default=default, required=required, help=help, deprecated=deprecated
        )


class N_HelpAction(NAction):
    kind = "_HelpAction"

    def __init__(self, option_strings, dest=SUPPRESS, default=SUPPRESS, help=None, deprecated=False):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help, deprecated=deprecated)


class N_VersionAction(NAction):
    kind = "_VersionAction"

    def __init__(self, option_strings, version=None, dest=SUPPRESS, default=SUPPRESS, help=None, deprecated=False):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help, deprecated=deprecated)


class NBooleanOptionalAction(NAction):
    kind = "BooleanOptionalAction"

    def __init__(
        self,
        option_strings,
        dest,
        default=None,
        type=None,
        choices=None,
        required=False,
        help=None,
        metavar=None,
        deprecated=False,
    ):
        given = list(option_strings)
        _option_strings = []
        for option_string in given:
            _option_strings.append(option_string)
            if option_string.startswith("--"):
                _option_strings.append("--no-" + option_string[2:])
        super().__init__(
            _option_strings,
            dest,
            nargs=0,
            default=default,
            type=type,
            choices=choices,
            required=required,
            help=help,
            metavar=metavar,
            deprecated=deprecated,
        )
        self._kv_given_option_strings = given


class N_SubParsersAction(NAction):
    kind = "_SubParsersAction"


class NSubParsers:
    """What ``parser.add_subparsers()`` returns: ``add_parser`` builds a parser of the parent's class."""

    def __init__(self, parser_class):
        self.parser_class = parser_class
        self.parsers: dict[str, object] = {}

    def add_parser(self, name, **kwargs):
        kwargs.pop("help", None)
        kwargs.pop("aliases", None)
        kwargs.setdefault("prog", f"vllm {name}")
        parser = CURRENT_INTERP.call(self.parser_class, [], kwargs)
        self.parsers[name] = parser
        return parser


_ACTION_REGISTRY = {
    None: N_StoreAction,
    "store": N_StoreAction,
    "store_const": N_StoreConstAction,
    "store_true": N_StoreTrueAction,
    "store_false": N_StoreFalseAction,
    "append": N_AppendAction,
    "append_const": N_AppendConstAction,
    "extend": N_ExtendAction,
    "count": N_CountAction,
    "help": N_HelpAction,
    "version": N_VersionAction,
    "parsers": N_SubParsersAction,
}


def nat(obj):
    return obj.native if isinstance(obj, Instance) and obj.native is not None else obj


class NContainer:
    def _kv_init_container(self, prefix_chars="-", argument_default=None, conflict_handler="error"):
        self.prefix_chars = prefix_chars
        self.argument_default = argument_default
        self.conflict_handler = conflict_handler
        self._registries = {"action": list(_ACTION_REGISTRY.items()), "type": [(None, lambda x: x)]}
        self._actions = []
        self._option_string_actions = {}
        self._action_groups = []
        self._mutually_exclusive_groups = []
        self._defaults = {}
        self._has_negative_number_optionals = []
        self._kv_conflicts = []

    def register(self, registry_name, value, object):
        self._registries.setdefault(registry_name, []).insert(0, (value, object))

    def _registry_get(self, registry_name, value, default=None):
        for key, obj in self._registries.get(registry_name, []):
            if key is value or (isinstance(key, str) and key == value) or (key is None and value is None):
                return obj
        return default

    def set_defaults(self, **kwargs):
        self._defaults.update(kwargs)
        for action in self._actions:
            a = nat(action)
            if a.dest in kwargs:
                a.default = kwargs[a.dest]

    def get_default(self, dest):
        for action in self._actions:
            a = nat(action)
            if a.dest == dest and a.default is not None:
                return a.default
        return self._defaults.get(dest, None)

    def add_argument(self, *args, **kwargs):
        interp = CURRENT_INTERP
        unknown_kwargs = kwargs.pop("__kvpilot_unknown_kwargs__", None)
        chars = self.prefix_chars
        args = [a for a in args]
        if any(not isinstance(a, str) for a in args):
            interp.warn(f"add_argument with non-literal option strings {args!r}")
            args = [a for a in args if isinstance(a, str)]
            if not args:
                return Unknown("add_argument")
        if not args or (len(args) == 1 and args[0][:1] not in chars):
            if args and "dest" in kwargs:
                raise InterpError("dest supplied twice for positional argument")
            kwargs = dict(kwargs, dest=args[0] if args else kwargs.get("dest"))
            option_strings = []
        else:
            option_strings = list(args)
            dest = kwargs.pop("dest", None)
            if dest is None:
                long_opts = [o for o in option_strings if len(o) > 1 and o[1] in chars]
                first = long_opts[0] if long_opts else option_strings[0]
                dest = first.lstrip(chars).replace("-", "_")
            kwargs = dict(kwargs, dest=dest, option_strings=option_strings)
        if "default" not in kwargs:
            dest = kwargs["dest"]
            if dest in self._defaults:
                kwargs["default"] = self._defaults[dest]
            elif self.argument_default is not None:
                kwargs["default"] = self.argument_default
        action_key = kwargs.pop("action", None)
        action_class = self._registry_get("action", action_key, action_key)
        if is_unknown(action_class):
            interp.warn(f"unknown action for {option_strings}")
            action_class = N_StoreAction
        if isinstance(action_class, str):
            raise InterpError(f"unknown action {action_class!r}")
        positional = not option_strings
        if positional:
            kwargs["option_strings"] = []
        action = interp.call(action_class, [], kwargs)
        a = nat(action)
        if unknown_kwargs:
            a._kv_unknown_kwargs = unknown_kwargs
        a._kv_positional = positional
        a._kv_site = interp.site()
        return self._add_action(action)

    def _add_action(self, action):
        a = nat(action)
        for option_string in a.option_strings:
            if option_string in self._option_string_actions:
                self._kv_conflicts.append(option_string)
                CURRENT_INTERP.warn(f"conflicting option string {option_string}")
        self._actions.append(action)
        for option_string in a.option_strings:
            self._option_string_actions[option_string] = action
        return action

    def _remove_action(self, action):
        self._actions.remove(action)

    def add_argument_group(self, *args, **kwargs):
        group = NGroup(self, *args, **kwargs)
        self._action_groups.append(group)
        return group

    def add_mutually_exclusive_group(self, **kwargs):
        group = NGroup(self, title=None)
        self._mutually_exclusive_groups.append(group)
        return group


class NParser(NContainer):
    """Model of ``argparse.ArgumentParser``."""

    def __init__(
        self,
        prog=None,
        usage=None,
        description=None,
        epilog=None,
        parents=(),
        formatter_class=None,
        prefix_chars="-",
        fromfile_prefix_chars=None,
        argument_default=None,
        conflict_handler="error",
        add_help=True,
        allow_abbrev=True,
        exit_on_error=True,
        **extra,
    ):
        self._kv_init_container(prefix_chars, argument_default, conflict_handler)
        self.prog = prog or "vllm serve"
        self.description = description
        self.formatter_class = formatter_class
        self.add_help = add_help
        self.allow_abbrev = allow_abbrev
        self._subparsers = None
        self._positionals = self.add_argument_group("positional arguments")
        self._optionals = self.add_argument_group("options")
        if add_help:
            self.add_argument("-h", "--help", action="help", default=SUPPRESS, help="show this help message and exit")
        for parent in parents:
            for action in nat(parent)._actions:
                self._add_action(action)

    def add_subparsers(self, **kwargs):
        return Unknown("add_subparsers")

    def error(self, message):
        raise InterpError(f"parser.error: {message}")

    def _get_formatter(self):
        return Unknown("formatter")


class NGroup(NContainer):
    """Model of ``argparse._ArgumentGroup``: shares the container's actions and option strings."""

    def __init__(self, container, title=None, description=None, **kwargs):
        c = nat(container)
        self._kv_init_container(c.prefix_chars, c.argument_default, c.conflict_handler)
        self.title = title
        self.description = description
        self._container = container
        self._registries = c._registries
        self._actions = c._actions
        self._option_string_actions = c._option_string_actions
        self._defaults = c._defaults
        self._group_actions = []

    def _add_action(self, action):
        action = super()._add_action(action)
        self._group_actions.append(action)
        return action


class NModuleType:
    """Model of ``types.ModuleType`` (vLLM's ``LazyLoader`` derives from it)."""

    def __init__(self, name, doc=None):
        self.__name__ = name
        self.__doc__ = doc


NATIVE_CLASSES = (NAction, NParser, NGroup, NContainer, NModuleType, BaseException)


# ----------------------------------------------------------------------------------------------
# Shims for modules outside vLLM
# ----------------------------------------------------------------------------------------------


class _PlatformStub:
    """``vllm.platforms.current_platform`` for a CUDA or CPU build."""

    def __init__(self, device: str):
        self.device_type = device
        self.device_name = device
        self.dispatch_key = device.upper()
        self.ray_device_key = "GPU" if device == "cuda" else ""
        self.simple_compile_backend = "inductor"
        self._enum = Unknown("PlatformEnum")

    def __getattr__(self, name):
        if name.startswith("is_"):
            what = name[3:]
            return lambda *a, **k: what == self.device_type or (what == "cuda_alike" and self.device_type == "cuda")
        return Unknown(f"current_platform.{name}")

    def pre_register_and_update(self, parser=None):
        return None

    def __repr__(self) -> str:
        return f"<{self.device_type} platform stub>"


def _fields(obj):
    interp = CURRENT_INTERP
    cr = classref_of(obj)
    if cr is None:
        if isinstance(obj, Instance):
            cr = obj.cls
        else:
            raise Raised(TypeError("fields() argument must be a dataclass"))
    if not cr.is_dataclass():
        raise Raised(TypeError("fields() argument must be a dataclass"))
    return list(interp.dataclass_fields(cr))


def _is_dataclass(obj) -> bool:
    cr = classref_of(obj)
    if cr is None and isinstance(obj, Instance):
        cr = obj.cls
    return bool(cr is not None and cr.is_dataclass())


def _field(*args, **kwargs):
    return DCFieldSpec(**kwargs)


def _passthrough_decorator(*args, **kwargs):
    if len(args) == 1 and not kwargs and callable(args[0]):
        return args[0]
    return lambda f: f


def _deepcopy(obj, memo=None):
    if memo is None:
        memo = {}
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, dict):
        out = {}
        memo[id(obj)] = out
        for k, v in obj.items():
            out[_deepcopy(k, memo)] = _deepcopy(v, memo)
        return out
    if isinstance(obj, list):
        out_l: list = []
        memo[id(obj)] = out_l
        out_l.extend(_deepcopy(v, memo) for v in obj)
        return out_l
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(_deepcopy(v, memo) for v in obj)
    if isinstance(obj, set):
        return {_deepcopy(v, memo) for v in obj}
    return obj


class _SkipValidation:
    def __class_getitem__(cls, item):
        return typing.Annotated[to_typeish(item), cls]


def _getenv(key, default=None):
    return default


def _getsource(obj) -> str:
    """``inspect.getsource`` of a vLLM class or function, read from the release's source."""
    if isinstance(obj, BoundMethod):
        obj = obj.func
    target = classref_of(obj) or obj
    if not isinstance(target, (ClassRef, FuncRef)):
        raise TypeError(f"cannot get the source of {obj!r}")
    node = target.node
    lines = target.module.source.splitlines(keepends=True)
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "".join(lines[first - 1 : node.end_lineno])


def _getdoc(obj):
    target = classref_of(obj) or obj
    if isinstance(target, (ClassRef, FuncRef)) and not isinstance(target.node, ast.Lambda):
        return ast.get_docstring(target.node)
    return None


def build_shims(interp: Interp) -> dict[str, object]:
    dataclasses_shim = ShimModule(
        "dataclasses",
        dataclass=_passthrough_decorator,
        field=_field,
        fields=_fields,
        is_dataclass=_is_dataclass,
        MISSING=MISSING,
        Field=NField,
        InitVar=dataclasses.InitVar,
        KW_ONLY=dataclasses.KW_ONLY,
        asdict=lambda *a, **k: Unknown("asdict"),
        replace=lambda *a, **k: Unknown("replace"),
        make_dataclass=lambda *a, **k: Unknown("make_dataclass"),
    )
    typing_shim = ShimModule("typing", **{k: getattr(typing, k) for k in dir(typing) if not k.startswith("__")})
    typing_shim.TYPE_CHECKING = False
    typing_shim.cast = lambda t, v: v
    typing_shim.overload = _passthrough_decorator
    typing_shim.final = _passthrough_decorator
    typing_shim.runtime_checkable = _passthrough_decorator
    typing_shim.get_type_hints = lambda *a, **k: Unknown("typing.get_type_hints")
    typing_shim.dataclass_transform = _passthrough_decorator
    te_attrs = {}
    if typing_extensions is not None:
        te_attrs = {k: getattr(typing_extensions, k) for k in dir(typing_extensions) if not k.startswith("__")}
    te_shim = ShimModule("typing_extensions", **te_attrs)
    for k in ("TYPE_CHECKING", "cast", "overload", "final", "runtime_checkable", "dataclass_transform"):
        setattr(te_shim, k, getattr(typing_shim, k))
    te_shim.deprecated = _passthrough_decorator
    te_shim.override = _passthrough_decorator
    argparse_shim = ShimModule(
        "argparse",
        ArgumentParser=NParser,
        _ArgumentGroup=NGroup,
        _ActionsContainer=NContainer,
        Action=NAction,
        BooleanOptionalAction=NBooleanOptionalAction,
        _StoreAction=N_StoreAction,
        _StoreTrueAction=N_StoreTrueAction,
        _StoreFalseAction=N_StoreFalseAction,
        _StoreConstAction=N_StoreConstAction,
        _AppendAction=N_AppendAction,
        _HelpAction=N_HelpAction,
        _SubParsersAction=N_SubParsersAction,
        SUPPRESS=SUPPRESS,
        OPTIONAL=argparse.OPTIONAL,
        ZERO_OR_MORE=argparse.ZERO_OR_MORE,
        ONE_OR_MORE=argparse.ONE_OR_MORE,
        REMAINDER=argparse.REMAINDER,
        ArgumentTypeError=argparse.ArgumentTypeError,
        ArgumentError=argparse.ArgumentError,
        Namespace=argparse.Namespace,
        HelpFormatter=argparse.HelpFormatter,
        ArgumentDefaultsHelpFormatter=argparse.ArgumentDefaultsHelpFormatter,
        RawDescriptionHelpFormatter=argparse.RawDescriptionHelpFormatter,
        RawTextHelpFormatter=argparse.RawTextHelpFormatter,
        MetavarTypeHelpFormatter=argparse.MetavarTypeHelpFormatter,
    )
    version_info = collections.namedtuple("version_info", "major minor micro releaselevel serial")(3, 13, 0, "final", 0)
    sys_shim = ShimModule(
        "sys",
        argv=["vllm", "serve"],
        version_info=version_info,
        modules={},
        platform="linux",
        maxsize=sys.maxsize,
        byteorder="little",
        stdout=Unknown("stdout"),
        stderr=Unknown("stderr"),
        float_info=sys.float_info,
        executable="python3",
        exit=lambda *a: Unknown("exit"),
    )
    os_shim = ShimModule(
        "os",
        environ={},
        getenv=_getenv,
        path=os.path,
        sep="/",
        pathsep=":",
        name="posix",
        cpu_count=lambda: Unknown("os.cpu_count"),
        getcwd=lambda: "/",
        getpid=lambda: Unknown("pid"),
        PathLike=os.PathLike,
        devnull=os.devnull,
        linesep="\n",
    )
    functools_shim = ShimModule(
        "functools",
        cache=_passthrough_decorator,
        lru_cache=_passthrough_decorator,
        wraps=_passthrough_decorator,
        cached_property=property,
        partial=functools.partial,
        reduce=functools.reduce,
        total_ordering=_passthrough_decorator,
        singledispatch=_passthrough_decorator,
    )
    pydantic_shim = ShimModule(
        "pydantic",
        Field=FieldInfoStub,
        FieldInfo=FieldInfoStub,
        ConfigDict=dict,
        SkipValidation=_SkipValidation,
        TypeAdapter=lambda *a, **k: Unknown("TypeAdapter"),
        ValidationError=type("ValidationError", (Exception,), {}),
        dataclass=_passthrough_decorator,
        model_validator=_passthrough_decorator,
        field_validator=_passthrough_decorator,
        BaseModel=type("BaseModel", (), {}),
        PrivateAttr=_field,
        AfterValidator=lambda *a, **k: Unknown("AfterValidator"),
        PydanticUndefined=PYDANTIC_UNDEFINED,
        NonNegativeInt=int,
        PositiveInt=int,
        PositiveFloat=float,
        NonNegativeFloat=float,
        ValidationInfo=Unknown("ValidationInfo"),
        ByteSize=int,
        Discriminator=lambda *a, **k: Unknown("Discriminator"),
        Tag=lambda *a, **k: Unknown("Tag"),
        computed_field=_passthrough_decorator,
        field_serializer=_passthrough_decorator,
        model_serializer=_passthrough_decorator,
    )
    return {
        "typing": typing_shim,
        "typing_extensions": te_shim,
        "dataclasses": dataclasses_shim,
        "argparse": argparse_shim,
        "sys": sys_shim,
        "os": os_shim,
        "os.path": os.path,
        "functools": functools_shim,
        "copy": ShimModule("copy", deepcopy=_deepcopy, copy=copy.copy),
        "json": ShimModule("json", loads=json.loads, dumps=json.dumps, JSONDecodeError=json.JSONDecodeError),
        "ssl": ssl,
        "enum": ShimModule("enum", **{k: getattr(enum, k) for k in dir(enum) if not k.startswith("__")}),
        "types": ShimModule(
            "types",
            **dict({k: getattr(types, k) for k in dir(types) if not k.startswith("__")}, ModuleType=NModuleType),
        ),
        "collections": collections,
        "collections.abc": collections.abc,
        "math": math,
        "itertools": itertools,
        "textwrap": textwrap,
        "re": re,
        "regex": re,
        "string": __import__("string"),
        "abc": __import__("abc"),
        "numbers": __import__("numbers"),
        "warnings": ShimModule(
            "warnings",
            warn=lambda *a, **k: None,
            catch_warnings=lambda *a, **k: Unknown("cw"),
            simplefilter=lambda *a, **k: None,
            filterwarnings=lambda *a, **k: None,
        ),
        "contextlib": ShimModule(
            "contextlib",
            contextmanager=_passthrough_decorator,
            suppress=lambda *a, **k: Unknown("suppress"),
            nullcontext=lambda *a, **k: Unknown("nullcontext"),
        ),
        "ast": ast,
        "inspect": ShimModule(
            "inspect",
            getsource=_getsource,
            getdoc=_getdoc,
            cleandoc=__import__("inspect").cleandoc,
            isclass=lambda o: isinstance(o, (ClassRef, type)),
            isfunction=lambda o: isinstance(o, FuncRef),
            signature=lambda *a, **k: Unknown("inspect.signature"),
        ),
        "importlib": ShimModule("importlib", import_module=lambda name, package=None: interp.load_module(name)),
        "importlib.metadata": ShimModule(
            "importlib.metadata",
            entry_points=lambda **kw: [],
            version=lambda name: Unknown(f"version({name})"),
            PackageNotFoundError=type("PackageNotFoundError", (Exception,), {}),
        ),
        "importlib.util": ShimModule("importlib.util", find_spec=lambda *a, **k: None),
        "pydantic": pydantic_shim,
        "pydantic.dataclasses": ShimModule("pydantic.dataclasses", dataclass=_passthrough_decorator),
        "pydantic.fields": ShimModule("pydantic.fields", Field=FieldInfoStub, FieldInfo=FieldInfoStub),
        "pydantic_core": ShimModule(
            "pydantic_core", PydanticUndefined=PYDANTIC_UNDEFINED, core_schema=Unknown("core_schema")
        ),
        "pydantic.functional_validators": ShimModule(
            "pydantic.functional_validators",
            SkipValidation=_SkipValidation,
            AfterValidator=lambda *a, **k: Unknown("AfterValidator"),
            model_validator=_passthrough_decorator,
            field_validator=_passthrough_decorator,
        ),
    }


def classref_of(obj):
    if isinstance(obj, ClassRef):
        return obj
    if isinstance(obj, type):
        return obj.__dict__.get("_kvpilot_classref")
    return None


def to_typeish(v):
    """Make ``v`` usable inside a real ``typing`` construct."""
    if isinstance(v, ClassRef):
        return v.stub()
    if isinstance(v, Unknown):
        return unknown_stub(v.why)
    if isinstance(v, (FuncRef, BoundMethod, Instance, Module, UnknownModule, ShimModule)):
        return unknown_stub(repr(v))
    if isinstance(v, tuple):
        return tuple(to_typeish(x) for x in v)
    if isinstance(v, list):
        return [to_typeish(x) for x in v]
    return v


def is_typeish(v) -> bool:
    if isinstance(v, (type, ClassRef)):
        return True
    mod = type(v).__module__
    return mod in ("typing", "types", "typing_extensions") or isinstance(v, (types.GenericAlias, types.UnionType))


# ----------------------------------------------------------------------------------------------
# Scopes
# ----------------------------------------------------------------------------------------------


class ModuleScope:
    def __init__(self, module: Module):
        self.module = module
        self.vars: dict = {}
        self.parent = None
        self.func = None
        self.self_obj = None
        self.annotation_mode = False

    def lookup(self, name):
        if name in self.vars:
            return self.vars[name]
        return self.module.interp.lookup_global(self.module, name)


class ClassScope(ModuleScope):
    """Scope of a class body: earlier class attributes, then the enclosing scope."""

    def __init__(self, cls: ClassRef):
        super().__init__(cls.module)
        self.cls = cls
        self.parent = cls.scope

    def lookup(self, name):
        if name in self.cls.index:
            return self.cls.interp.class_attr_raw(self.cls, name)
        if self.parent is not None:
            return self.parent.lookup(name)
        return super().lookup(name)


class FuncScope(ModuleScope):
    def __init__(self, module: Module, parent, func=None, self_obj=None):
        super().__init__(module)
        self.parent = parent
        self.func = func
        self.self_obj = self_obj

    def lookup(self, name):
        scope = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
            if isinstance(scope, ClassScope):  # class bodies are not visible from methods
                scope = scope.parent
        return self.module.interp.lookup_global(self.module, name)


_NOT_FOUND = object()


# ----------------------------------------------------------------------------------------------
# The interpreter
# ----------------------------------------------------------------------------------------------

CURRENT_INTERP: Interp = None  # type: ignore[assignment]


class Interp:
    def __init__(self, sources: dict[str, str], platform: str = "cuda", set_order: str = "canonical"):
        global CURRENT_INTERP
        CURRENT_INTERP = self
        self.sources = sources
        self.set_order = set_order
        self.modules: dict[str, object] = {}
        self.platform = _PlatformStub(platform)
        self.warnings: list[str] = []
        self.site_stack: list[tuple[Module, int]] = []
        self.depth = 0
        self.getattr_hooks: set = set()
        self.registrations_done: set = set()
        self.shims = build_shims(self)
        self.builtins = self._make_builtins()

    # -- diagnostics -------------------------------------------------------------------------
    def site(self) -> str:
        if not self.site_stack:
            return "?"
        module, line = self.site_stack[-1]
        return f"{module.path}:{line}"

    def warn(self, message: str) -> None:
        entry = f"{self.site()}: {message}"
        if entry not in self.warnings:
            self.warnings.append(entry)

    # -- modules -----------------------------------------------------------------------------
    def load_module(self, name: str, quiet: bool = False):
        if name in self.modules:
            return self.modules[name]
        root = name.split(".")[0]
        if root != "vllm":
            mod = self.shims.get(name)
            if mod is None:
                mod = UnknownModule(name)
            self.modules[name] = mod
            return mod
        path = name.replace(".", "/")
        for candidate in (f"{path}.py", f"{path}/__init__.py"):
            if candidate in self.sources:
                try:
                    mod = Module(self, name, candidate, self.sources[candidate])
                except SyntaxError as exc:
                    self.warn(f"cannot parse {candidate}: {exc}")
                    mod = UnknownModule(name)
                self.modules[name] = mod
                if name == "vllm.platforms" and isinstance(mod, Module):
                    mod.values["current_platform"] = self.platform
                return mod
        if quiet:
            return None
        mod = UnknownModule(name)
        self.modules[name] = mod
        return mod

    def resolve_relative(self, module: Module, level: int, name: str | None) -> str:
        if level == 0:
            return name or ""
        parts = module.name.split(".")
        if not module.is_package:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        base = ".".join(parts)
        return f"{base}.{name}" if name else base

    def module_attr(self, mod, name):
        if isinstance(mod, Module):
            return mod.get(name)
        if isinstance(mod, UnknownModule):
            sub = self.modules.get(f"{mod.__name__}.{name}")
            return sub if sub is not None else Unknown(f"{mod.__name__}.{name}")
        if isinstance(mod, ShimModule):
            if hasattr(mod, name):
                return getattr(mod, name)
            sub = self.shims.get(f"{mod.__name__}.{name}")
            return sub if sub is not None else Unknown(f"{mod.__name__}.{name}")
        return getattr(mod, name)

    def lookup_global(self, module: Module, name: str):
        if module.has(name) or (name == "__name__"):
            return module.get(name)
        if name in self.builtins:
            return self.builtins[name]
        try:
            return module.get(name)
        except AttributeError:
            raise InterpError(f"name {name!r} is not defined in {module.name}") from None

    def eval_binding(self, module: Module, name: str, node):
        self.site_stack.append((module, getattr(node, "lineno", 0)))
        try:
            scope = ModuleScope(module)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return FuncRef(self, module, node, None)
            if isinstance(node, ast.ClassDef):
                return ClassRef(self, module, node)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    if bound != name:
                        continue
                    if alias.asname:
                        return self.import_path(alias.name)
                    self.import_path(alias.name)
                    return self.load_module(alias.name.split(".")[0])
            if isinstance(node, ast.ImportFrom):
                base = self.resolve_relative(module, node.level, node.module)
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return self.import_from(base, alias.name)
            if isinstance(node, ast.Assign):
                value = self.eval(node.value, scope)
                for target in node.targets:
                    found = self._bind_lookup(target, value, name)
                    if found is not _NOT_FOUND:
                        return found
            if isinstance(node, ast.AnnAssign):
                return self.eval(node.value, scope)
            if isinstance(node, ast.AugAssign):
                return Unknown(f"{module.name}.{name} (augmented)")
            raise InterpError(f"cannot evaluate binding of {name}")
        except EVALUATION_FAILURES as exc:
            self.warn(f"{module.name}.{name}: {type(exc).__name__}: {exc}"[:300])
            return Unknown(f"{module.name}.{name}")
        finally:
            self.site_stack.pop()

    def _bind_lookup(self, target, value, name):
        if isinstance(target, ast.Name):
            return value if target.id == name else _NOT_FOUND
        if isinstance(target, (ast.Tuple, ast.List)):
            if is_unknown(value):
                return Unknown(name) if name in _target_names(target) else _NOT_FOUND
            values = list(self.iterate(value))
            for i, elt in enumerate(target.elts):
                if i < len(values):
                    found = self._bind_lookup(elt, values[i], name)
                    if found is not _NOT_FOUND:
                        return found
        return _NOT_FOUND

    def import_path(self, dotted: str):
        parts = dotted.split(".")
        mod = None
        for i in range(1, len(parts) + 1):
            mod = self.load_module(".".join(parts[:i]))
            if isinstance(mod, Module) and i < len(parts):
                mod.values.setdefault(parts[i], self.load_module(".".join(parts[: i + 1])))
        return mod

    def import_from(self, base: str, name: str):
        mod = self.load_module(base)
        if isinstance(mod, Module):
            try:
                return mod.get(name)
            except AttributeError:
                sub = self.load_module(f"{base}.{name}", quiet=True)
                if sub is not None:
                    return sub
                raise InterpError(f"cannot import {name} from {base}") from None
        sub_name = f"{base}.{name}"
        if sub_name in self.shims:
            return self.load_module(sub_name)
        return self.module_attr(mod, name)

    def static_test(self, test, module: Module):
        """Evaluate a module-level ``if`` test while indexing; ``None`` when unknown."""
        text = ast.unparse(test)
        if text in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            return False
        if "version_info" in text:
            try:
                return bool(self.eval(test, ModuleScope(module)))
            except Exception:
                return None
        return None

    # -- classes and dataclasses -----------------------------------------------------------
    def class_attr_raw(self, cls: ClassRef, name: str):
        if name in cls.values:
            return cls.values[name]
        node = cls.index[name]
        if name in cls.evaluating:
            return Unknown(f"{cls.name}.{name} (circular)")
        cls.evaluating.add(name)
        self.site_stack.append((cls.module, getattr(node, "lineno", 0)))
        try:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                value = FuncRef(self, cls.module, node, cls.scope, owner=cls)
            elif isinstance(node, ast.ClassDef):
                value = ClassRef(self, cls.module, node, scope=ClassScope(cls))
            elif isinstance(node, ast.Assign):
                raw = self.eval(node.value, ClassScope(cls))
                value = _NOT_FOUND
                for target in node.targets:
                    found = self._bind_lookup(target, raw, name)
                    if found is not _NOT_FOUND:
                        value = found
                        break
                if value is _NOT_FOUND:
                    value = Unknown(f"{cls.name}.{name}")
            else:
                value = self.eval(node.value, ClassScope(cls))
        except EVALUATION_FAILURES as exc:
            self.warn(f"{cls.name}.{name}: {type(exc).__name__}: {exc}"[:300])
            value = Unknown(f"{cls.name}.{name}")
        finally:
            cls.evaluating.discard(name)
            self.site_stack.pop()
        cls.values[name] = value
        return value

    def dataclass_fields(self, cls: ClassRef) -> list[NField]:
        if cls._fields is not None:
            return cls._fields
        ordered: dict[str, NField] = {}
        for c in reversed(cls.mro):
            if not isinstance(c, ClassRef) or not c.is_dataclass_decorated():
                continue
            for stmt in c.node.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                ann = ast.unparse(stmt.annotation)
                if re.match(r"^(typing\.)?(ClassVar|InitVar|KW_ONLY)\b", ann) or ann.startswith("dataclasses.InitVar"):
                    continue
                if ann in ("KW_ONLY", "dataclasses.KW_ONLY"):
                    continue
                name = stmt.target.id
                ordered[name] = NField(self, c, name, stmt.annotation, stmt.value, c)
        cls._fields = list(ordered.values())
        return cls._fields

    def eval_annotation(self, node, module: Module):
        scope = ModuleScope(module)
        scope.annotation_mode = True
        try:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                node = ast.parse(node.value, mode="eval").body
            return to_typeish(self.eval(node, scope))
        except (InterpError, Raised, AttributeError, TypeError, KeyError, ValueError) as exc:
            self.warn(f"annotation {ast.unparse(node)}: {exc}"[:300])
            return unknown_stub(ast.unparse(node))

    def apply_registrations(self, cls: ClassRef) -> None:
        """Run the class decorators that register into ``cls`` (``@Registry.register_module("name")``).

        Python runs them when the decorated module is imported; a package usually imports its modules from
        ``__init__``. Registries read while the parser is built (``choices=list(Registry.parsers)``) need them.
        Only modules that the registry's own module or their package's ``__init__`` import are used, in that
        import order.
        """
        if cls in self.registrations_done:
            return
        self.registrations_done.add(cls)
        marker = f"@{cls.name}."
        files = [path for path, text in self.sources.items() if marker in text]
        if not files:
            return
        ordered: list[tuple[int, str]] = []
        for path in files:
            name = path[:-3].replace("/", ".").removesuffix(".__init__")
            rank = self.import_rank(name) if name != cls.module.name else -1
            if rank is not None:
                ordered.append((rank, name))
        for _, name in sorted(ordered):
            module = self.load_module(name, quiet=True)
            if not isinstance(module, Module):
                continue
            for stmt in module.tree.body:
                if not isinstance(stmt, (ast.ClassDef, ast.FunctionDef)):
                    continue
                for deco in stmt.decorator_list:
                    if not ast.unparse(deco).startswith(marker[1:]):
                        continue
                    self.site_stack.append((module, deco.lineno))
                    try:
                        decorator = self.eval(deco, ModuleScope(module))
                        self.call(decorator, [module.get(stmt.name)], {})
                    except (InterpError, Raised, AttributeError, TypeError, KeyError, ValueError) as exc:
                        self.warn(f"registration {ast.unparse(deco)} failed: {exc}"[:300])
                    finally:
                        self.site_stack.pop()

    def import_rank(self, name: str) -> int | None:
        """Position of ``name`` among the top-level imports of its package's ``__init__``; None if not imported."""
        package_name = name.rsplit(".", 1)[0]
        package = self.load_module(package_name, quiet=True)
        if not isinstance(package, Module) or not package.is_package:
            return None
        short = name.rsplit(".", 1)[1]
        for pos, stmt in enumerate(package.tree.body):
            if isinstance(stmt, ast.ImportFrom):
                base = self.resolve_relative(package, stmt.level, stmt.module)
                if base == name or (base == package_name and any(a.name == short for a in stmt.names)):
                    return pos
            elif isinstance(stmt, ast.Import) and any(a.name == name for a in stmt.names):
                return pos
        return None

    def instantiate(self, cls: ClassRef, args, kwargs):
        if cls.is_enum():
            if args:
                for m in cls.enum_members():
                    if m.value == args[0] or m is args[0]:
                        return m
            return Unknown(f"{cls.name}(...)")
        container = next((c for c in cls.mro if c in (dict, list, set)), None)
        if container is not None:
            own_init = self.find_in_mro(cls, "__init__")
            if own_init is None or not isinstance(own_init[1], FuncRef):
                # a dict/list/set subclass without an __init__ of its own (MultiModalDummyOptions): a plain container
                return container(*args, **kwargs) if container is dict else container(*args)
        native_base = cls.native_base()
        native = None
        if native_base is not None:
            native = native_base.__new__(native_base)
        inst = Instance(cls, native)
        init = self.find_in_mro(cls, "__init__", start_after=None)
        if init is not None and init[0] is not _NOT_FOUND:
            owner, fn = init
            if isinstance(fn, FuncRef):
                self.call_function(fn, [inst, *args], kwargs)
            elif native is not None and isinstance(owner, type) and owner is not object:
                fn(native, *args, **kwargs)
            # a real base class that is not modelled (types.ModuleType, …) is not initialised
        elif native is not None:
            native_base.__init__(native, *args, **kwargs)
        return inst

    def find_in_mro(self, cls, name, start_after=None):
        """(owner, raw attribute) of ``name`` along ``cls``'s MRO, optionally after ``start_after``."""
        mro = cls.mro if isinstance(cls, ClassRef) else list(cls.__mro__)
        if start_after is not None:
            idx = next((i for i, c in enumerate(mro) if c is start_after), -1)
            mro = mro[idx + 1 :]
        for c in mro:
            if isinstance(c, ClassRef):
                if name in c.index:
                    return c, self.class_attr_raw(c, name)
                if c.is_enum() and name in {m.name for m in c.enum_members()}:
                    return c, c.values[name]
            elif isinstance(c, type) and name in c.__dict__:
                if c is object and name == "__init__":
                    return None
                return c, c.__dict__[name]
        return None

    # -- attribute access ------------------------------------------------------------------
    def getattr(self, obj, name):
        if isinstance(obj, Unknown):
            return Unknown(f"{obj.why}.{name}")
        if isinstance(obj, Module) and name == "__dict__":
            return dict(obj.values)
        if isinstance(obj, (Module, ShimModule, UnknownModule)):
            return self.module_attr(obj, name)
        if isinstance(obj, ClassRef):
            if name == "__name__":
                return obj.name
            if name == "__qualname__":
                return obj.name
            if name == "__doc__":
                return ast.get_docstring(obj.node)
            if name == "__module__":
                return obj.module.name
            if name == "__mro__":
                return tuple(obj.mro)
            if name == "__members__" and obj.is_enum():
                return {m.name: m for m in obj.enum_members()}
            if obj.is_enum():
                obj.enum_members()
            found = self.find_in_mro(obj, name)
            if found is None:
                raise InterpError(f"class {obj.name} has no attribute {name}")
            owner, raw = found
            if isinstance(raw, (dict, list, set)) and isinstance(owner, ClassRef):
                self.apply_registrations(owner)
            return self._bind_class_attr(raw, obj, owner)
        if isinstance(obj, Instance):
            if name in obj.attrs:
                return obj.attrs[name]
            if name == "__class__":
                return obj.cls
            if name == "__dict__":
                return obj.attrs
            found = self.find_in_mro(obj.cls, name)
            if found is None:
                if obj.native is not None and hasattr(obj.native, name):
                    return getattr(obj.native, name)
                hook = self.find_in_mro(obj.cls, "__getattr__")
                key = (id(obj), name)
                if hook is not None and isinstance(hook[1], FuncRef) and key not in self.getattr_hooks:
                    self.getattr_hooks.add(key)
                    try:
                        return self.call_function(hook[1], [obj, name], {})
                    finally:
                        self.getattr_hooks.discard(key)
                raise InterpError(f"{obj.cls.name} instance has no attribute {name}")
            owner, raw = found
            return self._bind_instance_attr(raw, obj, owner)
        if isinstance(obj, SuperProxy):
            target_cls = obj.obj if isinstance(obj.obj, ClassRef) else obj.obj.cls
            found = self.find_in_mro(target_cls, name, start_after=obj.start)
            if found is None:
                if name in ("__init__", "__init_subclass__", "__post_init__"):
                    return lambda *a, **k: None  # object.__init__
                raise InterpError(f"super() has no attribute {name}")
            owner, raw = found
            if isinstance(obj.obj, ClassRef):
                return self._bind_class_attr(raw, obj.obj, owner)
            return self._bind_instance_attr(raw, obj.obj, owner)
        if isinstance(obj, FuncRef):
            if name in ("__name__", "__qualname__", "__doc__", "__module__"):
                return getattr(obj, name)
            return Unknown(f"{obj.name}.{name}")
        if isinstance(obj, EnumMember):
            if name in ("name", "_name_"):
                return obj.name
            if name in ("value", "_value_"):
                return obj.value
            if isinstance(obj.value, str) and hasattr(str, name):
                return getattr(obj.value, name)
            found = self.find_in_mro(obj.cls, name)
            if found is None:
                raise InterpError(f"enum member has no attribute {name}")
            owner, raw = found
            if isinstance(raw, FuncRef):
                return BoundMethod(raw, obj)
            return raw
        try:
            return getattr(obj, name)
        except AttributeError as exc:
            raise InterpError(str(exc)) from None

    def _bind_class_attr(self, raw, cls, owner):
        if isinstance(raw, FuncRef):
            kind = raw.kind()
            if kind == "class":
                return BoundMethod(raw, cls)
            return raw
        if isinstance(raw, (staticmethod, classmethod)):
            return raw.__func__ if isinstance(raw, staticmethod) else functools.partial(raw.__func__, cls)
        if isinstance(raw, FieldInfoStub):
            if raw.default is not PYDANTIC_UNDEFINED:
                return raw.default
            return Unknown(f"{getattr(cls, 'name', cls)} field default factory")
        if isinstance(raw, DCFieldSpec):
            if raw.default is not MISSING:
                return raw.default
            return Unknown(f"{getattr(cls, 'name', cls)} field default factory")
        if isinstance(owner, type) and callable(raw) and not isinstance(raw, type):
            return raw
        return raw

    def _bind_instance_attr(self, raw, inst, owner):
        if isinstance(raw, FuncRef):
            kind = raw.kind()
            if kind == "static":
                return raw
            if kind == "class":
                return BoundMethod(raw, inst.cls)
            if kind == "property":
                return self.call_function(raw, [inst], {})
            return BoundMethod(raw, inst)
        if isinstance(owner, type):
            if inst.native is None and owner is not object and not isinstance(raw, property):
                # a real base class that is not modelled (types.ModuleType, …): its methods do nothing
                return (lambda *a, **k: None) if name_is_dunder(raw) else Unknown(f"{owner.__name__} method")
            if isinstance(raw, (types.FunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
                target = inst.native if inst.native is not None else inst
                return (
                    types.MethodType(raw, target)
                    if isinstance(raw, types.FunctionType)
                    else functools.partial(raw, target)
                )
            if isinstance(raw, property):
                return raw.fget(inst.native if inst.native is not None else inst)
        if isinstance(raw, (FieldInfoStub, DCFieldSpec)):
            return self._bind_class_attr(raw, inst.cls, owner)
        return raw

    def setattr(self, obj, name, value):
        if isinstance(obj, Instance):
            obj.attrs[name] = value
        elif isinstance(obj, (ClassRef, Module)):
            obj.values[name] = value
        elif isinstance(obj, Unknown):
            pass
        elif isinstance(obj, (NAction, NContainer, NModuleType, FieldInfoStub, DCFieldSpec, _PlatformStub)):
            setattr(obj, name, value)
        else:  # never let interpreted code mutate real modules or the interpreter's own objects
            raise InterpError(f"refused to set attribute {name!r} on {type(obj).__name__}")

    # -- iteration, truth ------------------------------------------------------------------
    def iterate(self, obj):
        if isinstance(obj, Unknown):
            raise InterpError(f"cannot iterate over {obj!r}")
        if isinstance(obj, ClassRef):
            if obj.is_enum():
                return list(obj.enum_members())
            raise InterpError(f"cannot iterate over class {obj.name}")
        if isinstance(obj, Instance):
            raise InterpError(f"cannot iterate over {obj!r}")
        if isinstance(obj, (set, frozenset)):
            # Real set order depends on PYTHONHASHSEED; use a fixed order (or its reverse, see extract()).
            items = sorted(obj, key=_canonical_key)
            return items[::-1] if self.set_order == "reversed" else items
        try:
            return list(obj)
        except TypeError as exc:
            raise InterpError(str(exc)) from None

    def truth(self, value) -> bool:
        if isinstance(value, Unknown):
            raise UnknownTruth(repr(value))
        if isinstance(value, (ClassRef, FuncRef, BoundMethod, Module, ShimModule, EnumMember, Instance)):
            return True
        return bool(value)

    # -- calls -----------------------------------------------------------------------------
    def call(self, fn, args, kwargs):
        if isinstance(fn, Unknown):
            return Unknown(f"{fn.why}()")
        if isinstance(fn, FuncRef):
            return self.call_function(fn, args, kwargs)
        if isinstance(fn, BoundMethod):
            return (
                self.call_function(fn.func, [fn.self_obj, *args], kwargs)
                if isinstance(fn.func, FuncRef)
                else self.call(fn.func, [fn.self_obj, *args], kwargs)
            )
        if isinstance(fn, ClassRef):
            return self.instantiate(fn, args, kwargs)
        if isinstance(fn, UnknownModule):
            return Unknown(f"{fn.__name__}()")
        if fn is NField:
            raise InterpError("cannot construct dataclasses.Field")
        if isinstance(fn, type) and issubclass(fn, NAction):
            return fn(*args, **kwargs)
        if isinstance(fn, type) and fn in self.call_overrides:
            return self.call_overrides[fn](*args, **kwargs)
        if callable(fn):
            try:
                return fn(*args, **kwargs)
            except (InterpError, Raised, _Return):
                raise
            except Exception as exc:
                raise Raised(exc) from None
        raise InterpError(f"{fn!r} is not callable")

    def call_function(self, fn: FuncRef, args, kwargs):
        memo_key = None
        if fn.memo is not None:
            try:
                memo_key = (tuple(id(a) for a in args), tuple(sorted((k, id(v)) for k, v in kwargs.items())))
                if memo_key in fn.memo:
                    return fn.memo[memo_key][0]
            except TypeError:
                memo_key = None
        if self.depth > 120:
            raise InterpError("call depth exceeded")
        scope = FuncScope(fn.module, fn.scope, func=fn)
        if fn.is_generator:  # run eagerly, collecting what it yields (no send(); capped)
            scope.yields = []
        self.bind_arguments(fn, scope, args, kwargs)
        if args and fn.owner is not None:
            scope.self_obj = args[0]
        self.depth += 1
        try:
            if isinstance(fn.node, ast.Lambda):
                result = self.eval(fn.node.body, scope)
            else:
                try:
                    self.exec_block(fn.node.body, scope)
                    result = None
                except _Return as ret:
                    result = ret.value
        finally:
            self.depth -= 1
        if fn.is_generator:
            result = iter(scope.yields)
        if memo_key is not None:
            fn.memo[memo_key] = (result, args, kwargs)
        return result

    def bind_arguments(self, fn: FuncRef, scope: FuncScope, args, kwargs):
        a = fn.node.args
        if fn.defaults_cache is None:
            defscope = fn.scope or ModuleScope(fn.module)
            fn.defaults_cache = (
                [self.eval(d, defscope) for d in a.defaults],
                [self.eval(d, defscope) if d is not None else _NOT_FOUND for d in a.kw_defaults],
            )
        defaults, kw_defaults = fn.defaults_cache
        positional = [*a.posonlyargs, *a.args]
        kwargs = dict(kwargs)
        args = list(args)
        for i, param in enumerate(positional):
            if i < len(args):
                scope.vars[param.arg] = args[i]
            elif param.arg in kwargs:
                scope.vars[param.arg] = kwargs.pop(param.arg)
            else:
                di = i - (len(positional) - len(defaults))
                if di >= 0:
                    scope.vars[param.arg] = defaults[di]
                else:
                    raise InterpError(f"{fn.name}() missing argument {param.arg!r}")
        extra = args[len(positional) :]
        if a.vararg:
            scope.vars[a.vararg.arg] = tuple(extra)
        elif extra:
            raise InterpError(f"{fn.name}() got too many positional arguments")
        for param, default in zip(a.kwonlyargs, kw_defaults, strict=True):
            if param.arg in kwargs:
                scope.vars[param.arg] = kwargs.pop(param.arg)
            elif default is not _NOT_FOUND:
                scope.vars[param.arg] = default
            else:
                raise InterpError(f"{fn.name}() missing keyword argument {param.arg!r}")
        if a.kwarg:
            scope.vars[a.kwarg.arg] = kwargs
        elif kwargs:
            raise InterpError(f"{fn.name}() got unexpected keyword arguments {sorted(kwargs)}")

    # -- statements ------------------------------------------------------------------------
    def exec_block(self, stmts, scope):
        for stmt in stmts:
            self.exec_stmt(stmt, scope)

    def exec_stmt(self, stmt, scope):
        module = scope.module
        self.site_stack.append((module, getattr(stmt, "lineno", 0)))
        try:
            self._exec_stmt(stmt, scope)
        except (_Return, _Break, _Continue, Raised):
            raise
        except UnknownTruth as exc:
            self.warn(f"condition depends on an unknown value: {exc}")
        except InterpError as exc:
            self.warn(f"{type(exc).__name__}: {exc}"[:300])
        except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
            self.warn(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            self.site_stack.pop()

    def _exec_stmt(self, stmt, scope):
        if isinstance(stmt, ast.Expr):
            self.eval(stmt.value, scope)
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value, scope)
            for target in stmt.targets:
                self.assign(target, value, scope)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value, scope), scope)
        elif isinstance(stmt, ast.AugAssign):
            current = self.eval(_load(stmt.target), scope)
            value = self.binop(stmt.op, current, self.eval(stmt.value, scope))
            if isinstance(current, list) and isinstance(stmt.op, ast.Add):
                current.extend(value[len(current) :]) if value[: len(current)] == current else None
                value = current
            elif isinstance(current, (dict, set)) and isinstance(stmt.op, ast.BitOr):
                current.update(value)
                value = current
            self.assign(stmt.target, value, scope)
        elif isinstance(stmt, ast.Return):
            raise _Return(self.eval(stmt.value, scope) if stmt.value is not None else None)
        elif isinstance(stmt, ast.If):
            try:
                test = self.truth(self.eval(stmt.test, scope))
            except UnknownTruth as exc:
                self.warn(f"unknown condition `{ast.unparse(stmt.test)}` ({exc}); took the if-branch")
                test = True
            self.exec_block(stmt.body if test else stmt.orelse, scope)
        elif isinstance(stmt, ast.For):
            try:
                items = self.iterate(self.eval(stmt.iter, scope))
            except InterpError as exc:
                self.warn(f"skipped loop over `{ast.unparse(stmt.iter)}`: {exc}")
                return
            broke = False
            for item in items:
                self.assign(stmt.target, item, scope)
                try:
                    self.exec_block(stmt.body, scope)
                except _Break:
                    broke = True
                    break
                except _Continue:
                    continue
            if not broke:
                self.exec_block(stmt.orelse, scope)
        elif isinstance(stmt, ast.While):
            for _ in range(1000):
                try:
                    if not self.truth(self.eval(stmt.test, scope)):
                        break
                except UnknownTruth:
                    self.warn(f"skipped while loop on unknown `{ast.unparse(stmt.test)}`")
                    break
                try:
                    self.exec_block(stmt.body, scope)
                except _Break:
                    break
                except _Continue:
                    continue
        elif isinstance(stmt, ast.Break):
            raise _Break()
        elif isinstance(stmt, ast.Continue):
            raise _Continue()
        elif isinstance(stmt, ast.Pass):
            pass
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = FuncRef(self, module_of(scope), stmt, scope)
            scope.vars[stmt.name] = fn
        elif isinstance(stmt, ast.ClassDef):
            scope.vars[stmt.name] = ClassRef(self, module_of(scope), stmt, scope=scope)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    scope.vars[alias.asname] = self.import_path(alias.name)
                else:
                    self.import_path(alias.name)
                    scope.vars[alias.name.split(".")[0]] = self.load_module(alias.name.split(".")[0])
        elif isinstance(stmt, ast.ImportFrom):
            base = self.resolve_relative(module_of(scope), stmt.level, stmt.module)
            for alias in stmt.names:
                if alias.name == "*":
                    continue
                try:
                    scope.vars[alias.asname or alias.name] = self.import_from(base, alias.name)
                except InterpError as exc:
                    self.warn(str(exc))
                    scope.vars[alias.asname or alias.name] = Unknown(alias.name)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript):
                    container = self.eval(target.value, scope)
                    key = self.eval(target.slice, scope)
                    if not is_unknown(container):
                        del container[key]
                elif isinstance(target, ast.Name):
                    scope.vars.pop(target.id, None)
                elif isinstance(target, ast.Attribute):
                    obj = self.eval(target.value, scope)
                    if isinstance(obj, Instance):
                        obj.attrs.pop(target.attr, None)
        elif isinstance(stmt, ast.Try):
            try:
                self.exec_block(stmt.body, scope)
            except Raised:
                if stmt.handlers:
                    self.exec_block(stmt.handlers[0].body, scope)
                else:
                    raise
            else:
                self.exec_block(stmt.orelse, scope)
            finally:
                self.exec_block(stmt.finalbody, scope)
        elif isinstance(stmt, ast.With):
            for item in stmt.items:
                try:
                    ctx = self.eval(item.context_expr, scope)
                except (InterpError, Raised):
                    ctx = Unknown("context")
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, Unknown("with-target") if not is_unknown(ctx) else ctx, scope)
            self.exec_block(stmt.body, scope)
        elif isinstance(stmt, ast.Raise):
            exc = self.eval(stmt.exc, scope) if stmt.exc is not None else Unknown("re-raise")
            raise Raised(exc)
        elif isinstance(stmt, (ast.Assert, ast.Global, ast.Nonlocal)):
            pass
        elif isinstance(stmt, ast.Match):
            self.warn("match statement not interpreted")
        else:
            raise InterpError(f"unsupported statement {type(stmt).__name__}")

    def assign(self, target, value, scope):
        if isinstance(target, ast.Name):
            scope.vars[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if is_unknown(value):
                for name in _target_names(target):
                    scope.vars[name] = Unknown(name)
                return
            values = list(self.iterate(value))
            star = next((i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)), None)
            if star is None:
                if len(values) != len(target.elts):
                    raise InterpError("unpacking length mismatch")
                for elt, v in zip(target.elts, values, strict=True):
                    self.assign(elt, v, scope)
            else:
                after = len(target.elts) - star - 1
                for elt, v in zip(target.elts[:star], values[:star], strict=False):
                    self.assign(elt, v, scope)
                self.assign(target.elts[star].value, values[star : len(values) - after], scope)
                for elt, v in zip(target.elts[star + 1 :], values[len(values) - after :], strict=False):
                    self.assign(elt, v, scope)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, scope)
            key = self.eval(target.slice, scope)
            if is_unknown(container):
                self.warn(f"assignment into unknown `{ast.unparse(target.value)}`")
                return
            container[key] = value
        elif isinstance(target, ast.Attribute):
            self.setattr(self.eval(target.value, scope), target.attr, value)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value, scope)
        else:
            raise InterpError(f"unsupported assignment target {type(target).__name__}")

    # -- expressions -----------------------------------------------------------------------
    def eval(self, node, scope):
        method = getattr(self, f"_eval_{type(node).__name__}", None)
        if method is None:
            raise InterpError(f"unsupported expression {type(node).__name__}")
        return method(node, scope)

    def _eval_Constant(self, node, scope):
        return node.value

    def _eval_Name(self, node, scope):
        try:
            return scope.lookup(node.id)
        except InterpError:
            if getattr(scope, "annotation_mode", False):
                return Unknown(node.id)
            raise

    def _eval_Attribute(self, node, scope):
        obj = self.eval(node.value, scope)
        return self.getattr(obj, node.attr)

    def _eval_Subscript(self, node, scope):
        obj = self.eval(node.value, scope)
        key = self.eval(node.slice, scope)
        if isinstance(obj, Unknown):
            return Unknown(f"{obj.why}[...]")
        if isinstance(obj, ClassRef):
            if obj.is_enum() and isinstance(key, str):
                obj.enum_members()
                return obj.values[key]
            return obj.stub()
        if obj is typing.Literal or obj is getattr(typing_extensions, "Literal", None):
            return obj[key]
        if is_typeish(obj) or obj is _SkipValidation:
            try:
                return obj[to_typeish(key)]
            except TypeError as exc:
                raise InterpError(f"typing subscript failed: {exc}") from None
        if isinstance(key, Unknown):
            return Unknown(f"[{key.why}]")
        try:
            return obj[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise InterpError(f"subscript {ast.unparse(node)}: {type(exc).__name__}: {exc}") from None

    def _eval_Slice(self, node, scope):
        return slice(
            self.eval(node.lower, scope) if node.lower else None,
            self.eval(node.upper, scope) if node.upper else None,
            self.eval(node.step, scope) if node.step else None,
        )

    def _eval_Tuple(self, node, scope):
        return tuple(self._eval_elts(node.elts, scope))

    def _eval_List(self, node, scope):
        return list(self._eval_elts(node.elts, scope))

    def _eval_Set(self, node, scope):
        return set(self._eval_elts(node.elts, scope))

    def _eval_elts(self, elts, scope):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self.iterate(self.eval(e.value, scope)))
            else:
                out.append(self.eval(e, scope))
        return out

    def _eval_Dict(self, node, scope):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                other = self.eval(v, scope)
                if is_unknown(other):
                    raise InterpError(f"cannot unpack unknown mapping `{ast.unparse(v)}`")
                out.update(other)
            else:
                out[self.eval(k, scope)] = self.eval(v, scope)
        return out

    def _eval_JoinedStr(self, node, scope):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(v.value)
            else:
                val = self.eval(v.value, scope)
                if is_unknown(val):
                    return Unknown("f-string")
                if v.conversion == ord("r"):
                    val = repr(val)
                elif v.conversion == ord("a"):
                    val = ascii(val)
                spec = self.eval(v.format_spec, scope) if v.format_spec is not None else ""
                parts.append(format(val, spec) if not isinstance(val, (FuncRef, ClassRef)) else repr(val))
        return "".join(parts)

    def _eval_FormattedValue(self, node, scope):
        return self._eval_JoinedStr(ast.JoinedStr(values=[node]), scope)

    def _eval_BoolOp(self, node, scope):
        if isinstance(node.op, ast.And):
            value = True
            for v in node.values:
                value = self.eval(v, scope)
                if not self.truth(value):
                    return value
            return value
        value = False
        for v in node.values:
            value = self.eval(v, scope)
            if self.truth(value):
                return value
        return value

    def _eval_UnaryOp(self, node, scope):
        v = self.eval(node.operand, scope)
        if isinstance(node.op, ast.Not):
            return not self.truth(v)
        if is_unknown(v):
            return Unknown("unary")
        return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(node.op)](v)

    def _eval_BinOp(self, node, scope):
        return self.binop(node.op, self.eval(node.left, scope), self.eval(node.right, scope))

    def binop(self, op, a, b):
        if (
            isinstance(op, ast.BitOr)
            and (
                is_typeish(a)
                or is_typeish(b)
                or (a is None and is_unknown(b))
                or (b is None and is_unknown(a))
                or (is_unknown(a) and is_unknown(b))
            )
            and not (isinstance(a, (set, dict, int)) or isinstance(b, (set, dict, int)))
        ):
            ta, tb = to_typeish(a), to_typeish(b)
            try:
                return ta | tb
            except TypeError:
                try:
                    return typing.Union[ta, tb]  # noqa: UP007
                except TypeError as exc:
                    raise InterpError(f"type union failed: {exc}") from None
        if is_unknown(a) or is_unknown(b):
            return Unknown("binop")
        ops = {
            ast.Add: lambda x, y: x + y,
            ast.Sub: lambda x, y: x - y,
            ast.Mult: lambda x, y: x * y,
            ast.Div: lambda x, y: x / y,
            ast.FloorDiv: lambda x, y: x // y,
            ast.Mod: lambda x, y: x % y,
            ast.Pow: lambda x, y: x**y,
            ast.BitOr: lambda x, y: x | y,
            ast.BitAnd: lambda x, y: x & y,
            ast.BitXor: lambda x, y: x ^ y,
            ast.LShift: lambda x, y: x << y,
            ast.RShift: lambda x, y: x >> y,
        }
        if isinstance(op, ast.Mod) and isinstance(a, str):
            try:
                return a % b
            except (TypeError, ValueError):
                return Unknown("format")
        try:
            return ops[type(op)](a, b)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            raise InterpError(f"binop failed: {exc}") from None

    def _eval_Compare(self, node, scope):
        left = self.eval(node.left, scope)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comp, scope)
            result = self.compare(op, left, right)
            if is_unknown(result):
                return result
            if not result:
                return False
            left = right
        return True

    def compare(self, op, a, b):
        if isinstance(op, (ast.Is, ast.IsNot)):
            ca, cb = classref_of(a) or a, classref_of(b) or b
            if is_unknown(ca) or is_unknown(cb):
                return Unknown("is")
            same = ca is cb
            return same if isinstance(op, ast.Is) else not same
        if isinstance(op, (ast.In, ast.NotIn)):
            if is_unknown(b) or (is_unknown(a) and not isinstance(b, (dict, list, tuple, set))):
                return Unknown("in")
            if isinstance(b, ClassRef):
                members = b.enum_members() if b.is_enum() else []
                inside = any(a is m or a == m for m in members)
            elif isinstance(b, (Module, ShimModule)):
                inside = False
            else:
                try:
                    inside = a in b
                except TypeError as exc:
                    raise InterpError(str(exc)) from None
            return inside if isinstance(op, ast.In) else not inside
        if is_unknown(a) or is_unknown(b):
            return Unknown("compare")
        ops = {
            ast.Eq: lambda x, y: x == y,
            ast.NotEq: lambda x, y: x != y,
            ast.Lt: lambda x, y: x < y,
            ast.LtE: lambda x, y: x <= y,
            ast.Gt: lambda x, y: x > y,
            ast.GtE: lambda x, y: x >= y,
        }
        try:
            return ops[type(op)](a, b)
        except TypeError as exc:
            raise InterpError(f"comparison failed: {exc}") from None

    def _eval_IfExp(self, node, scope):
        return self.eval(node.body if self.truth(self.eval(node.test, scope)) else node.orelse, scope)

    def _eval_NamedExpr(self, node, scope):
        value = self.eval(node.value, scope)
        target_scope = scope
        while getattr(target_scope, "comprehension", False):  # PEP 572: binds in the enclosing scope
            target_scope = target_scope.parent
        self.assign(node.target, value, target_scope)
        return value

    def _yield_target(self, scope) -> list:
        s = scope
        while s is not None and getattr(s, "yields", None) is None:
            s = s.parent
        if s is None:
            raise InterpError("yield outside a generator")
        if len(s.yields) > 100_000:
            raise InterpError("generator yields too much")
        return s.yields

    def _eval_Yield(self, node, scope):
        self._yield_target(scope).append(self.eval(node.value, scope) if node.value is not None else None)
        return None

    def _eval_YieldFrom(self, node, scope):
        self._yield_target(scope).extend(self.iterate(self.eval(node.value, scope)))
        return None

    def _eval_Lambda(self, node, scope):
        return FuncRef(self, module_of(scope), node, scope)

    def _eval_Starred(self, node, scope):
        return self.eval(node.value, scope)

    def _comprehension(self, generators, scope, emit):
        inner = FuncScope(module_of(scope), scope)
        inner.comprehension = True

        def rec(i):
            if i == len(generators):
                emit(inner)
                return
            gen = generators[i]
            for item in self.iterate(self.eval(gen.iter, inner if i else scope)):
                self.assign(gen.target, item, inner)
                if all(self.truth(self.eval(cond, inner)) for cond in gen.ifs):
                    rec(i + 1)

        rec(0)

    def _eval_ListComp(self, node, scope):
        out = []
        self._comprehension(node.generators, scope, lambda s: out.append(self.eval(node.elt, s)))
        return out

    def _eval_GeneratorExp(self, node, scope):
        return iter(self._eval_ListComp(node, scope))

    def _eval_SetComp(self, node, scope):
        out = set()
        self._comprehension(node.generators, scope, lambda s: out.add(self.eval(node.elt, s)))
        return out

    def _eval_DictComp(self, node, scope):
        out = {}

        def emit(s):
            out[self.eval(node.key, s)] = self.eval(node.value, s)

        self._comprehension(node.generators, scope, emit)
        return out

    def _eval_Call(self, node, scope):
        if isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args:
            return self._zero_arg_super(scope)
        fn = self.eval(node.func, scope)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                value = self.eval(a.value, scope)
                if is_unknown(value):
                    self.warn(f"unknown *args `{ast.unparse(a.value)}`")
                    continue
                args.extend(self.iterate(value))
            else:
                args.append(self.eval(a, scope))
        kwargs = {}
        for kw in node.keywords:
            value = self.eval(kw.value, scope)
            if kw.arg is None:
                if is_unknown(value):
                    self.warn(f"unknown **kwargs `{ast.unparse(kw.value)}` in call to `{ast.unparse(node.func)}`")
                    kwargs["__kvpilot_unknown_kwargs__"] = ast.unparse(kw.value)
                    continue
                if not isinstance(value, dict):
                    raise InterpError(f"**{ast.unparse(kw.value)} is not a mapping")
                kwargs.update(value)
            else:
                kwargs[kw.arg] = value
        if "__kvpilot_unknown_kwargs__" in kwargs and not _accepts_unknown_kwargs(fn):
            kwargs.pop("__kvpilot_unknown_kwargs__")
        return self.call(fn, args, kwargs)

    def _zero_arg_super(self, scope):
        s = scope
        while s is not None and not (isinstance(s, FuncScope) and s.func is not None and s.func.owner is not None):
            s = s.parent
        if s is None:
            raise InterpError("super() outside a method")
        first = s.func.node.args.args[0].arg if s.func.node.args.args else None
        obj = s.vars.get(first) if first else None
        if obj is None:
            raise InterpError("super() without self")
        return SuperProxy(s.func.owner, obj)

    # -- builtins --------------------------------------------------------------------------
    def _make_builtins(self):
        interp = self
        b = {k: getattr(builtins, k) for k in dir(builtins) if not k.startswith("__")}
        for banned in (
            "open",
            "exec",
            "eval",
            "compile",
            "input",
            "__import__",
            "breakpoint",
            "exit",
            "quit",
            "help",
            "copyright",
            "credits",
            "license",
        ):
            b.pop(banned, None)

        def _isinstance(obj, classes):
            if not isinstance(classes, tuple):
                classes = (classes,)
            for c in classes:
                if isinstance(c, Unknown):
                    continue
                cr = classref_of(c)
                if cr is not None:
                    if isinstance(obj, Instance) and cr in obj.cls.mro:
                        return True
                    if isinstance(obj, EnumMember) and cr in obj.cls.mro:
                        return True
                    continue
                if isinstance(obj, Instance):
                    if c in obj.cls.mro or (obj.native is not None and isinstance(obj.native, c)):
                        return True
                    continue
                if isinstance(obj, ClassRef) and c is type:
                    return True
                if isinstance(obj, (FuncRef, BoundMethod)) and c in (types.FunctionType, types.MethodType):
                    return True
                try:
                    if isinstance(obj, c):
                        return True
                except TypeError:
                    continue
            return False

        def _issubclass(cls, classes):
            if not isinstance(classes, tuple):
                classes = (classes,)
            cr = classref_of(cls)
            for c in classes:
                target = classref_of(c) or c
                if cr is not None:
                    if target in cr.mro:
                        return True
                    stub = cr.stub()
                    if isinstance(target, type) and issubclass(stub, target):
                        return True
                elif isinstance(cls, type) and isinstance(target, type) and issubclass(cls, target):
                    return True
            return False

        def _getattr(obj, name, *default):
            try:
                return interp.getattr(obj, name)
            except (InterpError, AttributeError):
                if default:
                    return default[0]
                raise

        def _hasattr(obj, name):
            try:
                value = interp.getattr(obj, name)
            except (InterpError, AttributeError):
                return False
            return not (isinstance(obj, Unknown) and is_unknown(value)) or True

        def _type(obj, *rest):
            if rest:
                return Unknown("type(...)")
            if isinstance(obj, Instance):
                return obj.cls
            if isinstance(obj, EnumMember):
                return obj.cls
            if isinstance(obj, ClassRef):
                return type
            if isinstance(obj, Unknown):
                return Unknown(f"type({obj.why})")
            return type(obj)

        def _setattr(obj, name, value):
            interp.setattr(obj, name, value)

        def _len(obj):
            if is_unknown(obj):
                return Unknown("len")
            return len(interp.iterate(obj)) if isinstance(obj, ClassRef) else len(obj)

        def _iter_fn(kind):
            def f(*args):
                if not args:
                    return kind()
                if is_unknown(args[0]):
                    return Unknown(f"{kind.__name__}(...)")
                if kind is dict and len(args) == 1 and isinstance(args[0], dict):
                    return dict(args[0])
                if kind in (dict,):
                    return dict(*args)
                return kind(interp.iterate(args[0]))

            return f

        def _dict(*args, **kwargs):
            out = _iter_fn(dict)(*args) if args else {}
            if isinstance(out, dict):
                out.update(kwargs)
            return out

        def _sorted(iterable, key=None, reverse=False):
            return sorted(interp.iterate(iterable), key=key, reverse=reverse)

        def _vars(obj=None):
            if isinstance(obj, Instance):
                return obj.attrs
            return Unknown("vars")

        def _print(*args, **kwargs):
            return None

        def _repr(obj):
            return repr(obj)

        def _callable(obj):
            return isinstance(obj, (FuncRef, BoundMethod, ClassRef, Unknown)) or callable(obj)

        def _super(*args):
            if len(args) == 2:
                return SuperProxy(classref_of(args[0]) or args[0], args[1])
            raise InterpError("super() form not supported")

        def _iter(obj, *sentinel):
            if sentinel:
                return Unknown("iter(callable, sentinel)")
            return iter(interp.iterate(obj)) if isinstance(obj, (set, frozenset, ClassRef)) else iter(obj)

        def _globals():
            module = interp.site_stack[-1][0] if interp.site_stack else None
            return module.values if isinstance(module, Module) else {}

        b.update(
            globals=_globals,
            locals=lambda: {},
            iter=_iter,
            isinstance=_isinstance,
            issubclass=_issubclass,
            getattr=_getattr,
            hasattr=_hasattr,
            setattr=_setattr,
            len=_len,
            sorted=_sorted,
            vars=_vars,
            print=_print,
            repr=_repr,
            callable=_callable,
            super=_super,
            NotImplemented=NotImplemented,
            Ellipsis=Ellipsis,
        )
        # Real types stay real (so ``list[str]`` and ``isinstance(x, list)`` work); calling them is redirected.
        self.call_overrides = {
            list: _iter_fn(list),
            tuple: _iter_fn(tuple),
            set: _iter_fn(set),
            frozenset: _iter_fn(frozenset),
            dict: _dict,
            type: _type,
        }
        return b


def name_is_dunder(raw) -> bool:
    name = getattr(raw, "__name__", "")
    return name.startswith("__") and name.endswith("__")


def _canonical_key(value) -> tuple[str, str]:
    return type(value).__name__, repr(value)


def module_of(scope) -> Module:
    return scope.module


def _load(target):
    """The load-context twin of an assignment target (for ``x += y``)."""
    return ast.parse(ast.unparse(target), mode="eval").body


def _accepts_unknown_kwargs(fn) -> bool:
    if isinstance(fn, BoundMethod):
        fn = fn.func
    if isinstance(fn, FuncRef) and fn.name == "add_argument":
        return True
    return getattr(fn, "__name__", "") == "add_argument" or (isinstance(fn, FuncRef) and fn.node.args.kwarg is not None)


# ----------------------------------------------------------------------------------------------
# Extraction
# ----------------------------------------------------------------------------------------------

ENTRY_MODULES = (
    "vllm.entrypoints.common.cli_args",
    "vllm.entrypoints.launchers.cli_args",
    "vllm.entrypoints.openai.cli_args",
)

# vLLM helper callables used as argparse ``type=`` (matched by function name), with their kind.
TYPE_FUNCTIONS = {
    "parse_dataclass": "json",
    "union_dict_and_str": "json_or_str",
    "human_readable_int": "human_readable_int",
    "human_readable_int_or_auto": "human_readable_int_or_auto",
    "loads": "json",
    "nullable_str": "str",
    "nullable_kvs": "json_or_str",
    "check_port": "int",
    "from_cli": "json",
    "from_json": "json",
}


def find_entry(sources: dict[str, str]) -> str:
    for name in ENTRY_MODULES:
        path = name.replace(".", "/") + ".py"
        if path in sources and re.search(r"^def make_arg_parser\(", sources[path], re.M):
            return name
    for path in sorted(sources):
        if (
            path.startswith("vllm/entrypoints/")
            and "run_batch" not in path
            and re.search(r"^def make_arg_parser\(", sources[path], re.M)
        ):
            return path[:-3].replace("/", ".")
    raise SystemExit("no make_arg_parser in this release")


def classify_type(t, depth: int = 0):
    if t is None:
        return None
    if t in (int, float, str, bool):
        return t.__name__
    if t is json.loads:
        return "json"
    if isinstance(t, BoundMethod):
        t = t.func
    if isinstance(t, FuncRef):
        name = t.name
        if name in ("_optional_type", "_parse_type", "optional_type", "parse_type") and t.scope is not None:
            inner = t.scope.vars.get("return_type", _NOT_FOUND)
            if inner is not _NOT_FOUND and depth < 5:
                return classify_type(inner, depth + 1)
        if name in TYPE_FUNCTIONS:
            return TYPE_FUNCTIONS[name]
        if name == "<lambda>":  # e.g. ``lambda s: s.lower().replace("-", "_")``: probe it with a word
            try:
                probe = t.interp.call(t, ["auto"], {})
            except (InterpError, Raised, AttributeError, TypeError, ValueError):
                probe = None
            return "str" if isinstance(probe, str) else None
        returns = getattr(t.node, "returns", None)
        if returns is not None and ast.unparse(returns) in ("int", "float", "str", "bool"):
            return ast.unparse(returns)
        return None
    if isinstance(t, ClassRef):
        return "str" if t.is_enum() else None
    if callable(t) and getattr(t, "__name__", "") in TYPE_FUNCTIONS:
        return TYPE_FUNCTIONS[t.__name__]
    return None


def type_function_name(t) -> str | None:
    if isinstance(t, BoundMethod):
        t = t.func
    if isinstance(t, FuncRef):
        return t.name
    return getattr(t, "__name__", None) if t is not None else None


def literal(value, _depth: int = 0):
    """JSON form of a default or choice when it is a plain literal; ``_NOT_FOUND`` otherwise."""
    if _depth > 6:
        return _NOT_FOUND
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _NOT_FOUND
    if isinstance(value, EnumMember):
        return literal(value.value, _depth + 1)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [literal(v, _depth + 1) for v in value]
        if any(i is _NOT_FOUND for i in items):
            return _NOT_FOUND
        if isinstance(value, (set, frozenset)):
            items = sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
        return items
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            lv = literal(v, _depth + 1)
            if not isinstance(k, str) or lv is _NOT_FOUND:
                return _NOT_FOUND
            out[k] = lv
        return out
    return _NOT_FOUND


def action_kind(action) -> str:
    if isinstance(action, Instance):
        return action.cls.name
    return type(action).kind


def is_boolean_optional(action) -> bool:
    if isinstance(action, Instance):
        return isinstance(action.native, NBooleanOptionalAction)
    return isinstance(action, NBooleanOptionalAction)


def describe_actions(parser) -> list[dict]:
    p = nat(parser)
    registered: dict[int, list[str]] = collections.defaultdict(list)
    for option_string, action in p._option_string_actions.items():
        registered[id(action)].append(option_string)
    options = []
    for action in p._actions:
        a = nat(action)
        if getattr(a, "_kv_positional", False) or not a.option_strings:
            continue
        visible = list(a.option_strings)
        hidden = [s for s in registered[id(action)] if s not in visible]
        kind = action_kind(action)
        boolean = (
            is_boolean_optional(action)
            or kind in ("_StoreTrueAction", "_StoreFalseAction")
            or (kind == "_StoreConstAction" and isinstance(a.const, bool))
        )
        negative = None
        if is_boolean_optional(action):
            given = set(getattr(a, "_kv_given_option_strings", []))
            negatives = [s for s in visible if s not in given and s.startswith("--")]
            negatives += [s for s in hidden if s.startswith("--")]
            negative = negatives[0] if negatives else None
        if boolean:
            vtype = "bool"
        elif kind in ("_HelpAction", "_VersionAction"):
            vtype = None
        elif kind == "_CountAction":
            vtype = "int"
        elif a.type is None:
            vtype = "str"
        else:
            vtype = classify_type(a.type)
        choices = None
        if a.choices is not None and not is_unknown(a.choices):
            try:
                raw = list(a.choices)
            except TypeError:
                raw = None
            if raw is not None:
                lit = literal(raw)
                choices = lit if lit is not _NOT_FOUND else [str(c) for c in raw]
        default = literal(a.default)
        entry = {
            "flags": visible + hidden,
            "dest": a.dest,
            "action": kind,
            "type": vtype,
            "nargs": a.nargs if isinstance(a.nargs, (int, str)) or a.nargs is None else None,
            "choices": choices,
            "default": None if default is _NOT_FOUND else default,
            "boolean_negative": negative,
            "deprecated": bool(a.deprecated) if not is_unknown(a.deprecated) else False,
        }
        if hidden:
            entry["hidden_flags"] = hidden
        if default is _NOT_FOUND:
            entry["default_is_literal"] = False
        if vtype is None and a.type is not None and kind not in ("_HelpAction",):
            entry["type_function"] = type_function_name(a.type)
        if getattr(a, "_kv_unknown_kwargs", None):
            entry["unresolved_kwargs"] = True
        if type_function_name(a.type) in ("_optional_type", "optional_type"):
            entry["nullable"] = True
        entry["_type_callable"] = type_function_name(a.type)
        options.append(entry)
    options.sort(key=lambda o: (o["flags"][0].lstrip("-"), o["flags"][0]))
    return options


SERVE_MODULE = "vllm.entrypoints.cli.serve"


def extract(sources: dict[str, str], platform: str = "cuda", entry: str = "serve") -> tuple[list[dict], list[str], str]:
    """Options of ``vllm serve`` (``entry="serve"``) or of ``make_arg_parser`` alone (``entry="api_server"``).

    ``vllm serve`` builds its parser with ``ServeSubcommand.subparser_init``, which calls ``make_arg_parser``;
    up to 0.9 it added a few options of its own (``--config``, ``--headless``, ``--api-server-count``, …).

    The parser is built twice, iterating sets in a fixed order and in its reverse. Real vLLM iterates sets in
    an order that changes with ``PYTHONHASHSEED``; where that changes an option (0.8/0.9 pick one of two
    ``Literal`` types of ``--guided-decoding-backend`` from a set), the option is marked
    ``"varies_between_runs": true`` and both results are kept.
    """
    options, warnings, where = _extract_once(sources, platform, entry, "canonical")
    alt_options, _, _ = _extract_once(sources, platform, entry, "reversed")
    alt = {o["flags"][0]: o for o in alt_options}
    for o in options:
        other = alt.get(o["flags"][0])
        if other is None:
            o["varies_between_runs"] = True
            continue
        keys = [k for k in ("choices", "default", "type", "nargs", "deprecated") if o.get(k) != other.get(k)]
        if keys or o["flags"] != other["flags"]:
            o["varies_between_runs"] = True
            for k in keys:
                o[f"{k}_alternatives"] = [o[k], other[k]]
    extra = sorted(set(alt) - {o["flags"][0] for o in options})
    if extra:
        warnings = [*warnings, f"options present only with the other set order: {extra}"]
    return options, warnings, where


def _extract_once(sources, platform, entry, set_order):
    interp = Interp(sources, platform=platform, set_order=set_order)
    parser_cls = None
    for candidate in ("vllm.utils.argparse_utils", "vllm.utils"):
        mod = interp.load_module(candidate, quiet=True)
        if isinstance(mod, Module) and mod.has("FlexibleArgumentParser"):
            parser_cls = mod.get("FlexibleArgumentParser")
            break
    if parser_cls is None:
        interp.warn("FlexibleArgumentParser not found; using a plain ArgumentParser")
        parser_cls = NParser
    serve = interp.load_module(SERVE_MODULE, quiet=True) if entry == "serve" else None
    if isinstance(serve, Module) and serve.has("ServeSubcommand"):
        command = interp.call(serve.get("ServeSubcommand"), [], {})
        subparsers = NSubParsers(parser_cls)
        init = interp.getattr(command, "subparser_init")
        interp.site_stack.append((serve, init.func.node.lineno if isinstance(init, BoundMethod) else 0))
        parser = interp.call(init, [subparsers], {})
        interp.site_stack.pop()
        if is_unknown(parser) or parser is None:
            parser = subparsers.parsers.get("serve")
        where = f"vllm serve ({SERVE_MODULE}.ServeSubcommand.subparser_init -> make_arg_parser)"
        return describe_actions(parser), interp.warnings, where
    module_name = find_entry(sources)
    module = interp.load_module(module_name)
    make_arg_parser = module.get("make_arg_parser")
    parser = interp.call(parser_cls, [], {"description": "vLLM OpenAI-Compatible RESTful API server."})
    interp.site_stack.append((module, make_arg_parser.node.lineno))
    result = interp.call(make_arg_parser, [parser], {})
    interp.site_stack.pop()
    if result is not None and not is_unknown(result):
        parser = result
    return describe_actions(parser), interp.warnings, f"{module_name}.make_arg_parser"


# ----------------------------------------------------------------------------------------------
# Fixture comparison
# ----------------------------------------------------------------------------------------------

FIXTURE_TYPES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "loads": "json",
    "parse_dataclass": "json",
    "union_dict_and_str": "json_or_str",
    "human_readable_int": "human_readable_int",
    "human_readable_int_or_auto": "human_readable_int_or_auto",
}


def fixture_type(action: dict):
    """Value type of a fixture action in this script's vocabulary; ``_NOT_FOUND`` when the dump cannot tell."""
    kind = action["action"]
    if kind in ("BooleanOptionalAction", "_StoreTrueAction", "_StoreFalseAction") or kind.endswith(
        "EnableDisableAction"
    ):
        return "bool"
    if kind == "_HelpAction":
        return None
    t = action["type"]
    if t is None:
        return "str" if kind in ("_StoreAction", "_AppendAction", "_ExtendAction") else _NOT_FOUND
    return FIXTURE_TYPES.get(t, _NOT_FOUND)


def compare_with_fixture(options: list[dict], fixture: dict) -> tuple[list[str], dict]:
    lines: list[str] = []
    ours = {f: o for o in options for f in o["flags"]}
    theirs = {f: a for a in fixture["actions"] for f in a["flags"]}
    missing = sorted(set(theirs) - set(ours))
    extra = sorted(set(ours) - set(theirs))
    matched = sorted(set(ours) & set(theirs))
    stats = {
        "fixture_options": len(fixture["actions"]),
        "fixture_option_strings": len(theirs),
        "our_options": len(options),
        "our_option_strings": len(ours),
        "matching_option_strings": len(matched),
        "missing_option_strings": missing,
        "extra_option_strings": extra,
    }
    grouping = []
    for a in fixture["actions"]:
        group = {id(ours[f]) for f in a["flags"] if f in ours}
        if len(group) > 1 or (group and set(ours[a["flags"][0]]["flags"]) != set(a["flags"])):
            grouping.append(a["flags"])
    stats["grouping_mismatches"] = grouping
    pairs = []
    seen = set()
    for a in fixture["actions"]:
        o = ours.get(a["flags"][0])
        if o is not None and id(o) not in seen:
            seen.add(id(o))
            pairs.append((a, o))
    choice_mm, type_mm, dep_mm, dest_mm, default_mm, action_mm, callable_mm = [], [], [], [], [], [], []
    order_mm: list[str] = []
    nargs_mm: list[str] = []
    type_compared = type_uncomparable = 0
    default_compared = 0
    for a, o in pairs:
        flag = a["flags"][0]
        fc = a["choices"]
        if (fc is None) != (o["choices"] is None) or (fc is not None and list(fc) != list(o["choices"])):
            choice_mm.append(f"{flag}: fixture {fc} vs extracted {o['choices']}")
        ft = fixture_type(a)
        if ft is _NOT_FOUND or (o["type"] is None and ft is not None):
            type_uncomparable += 1
        else:
            type_compared += 1
            if ft != o["type"]:
                type_mm.append(f"{flag}: fixture {a['type']!r} ({ft}) vs extracted {o['type']!r}")
        if a["type"] != o["_type_callable"]:
            callable_mm.append(f"{flag}: fixture {a['type']!r} vs extracted {o['_type_callable']!r}")
        if bool(a.get("deprecated")) != o["deprecated"]:
            dep_mm.append(f"{flag}: fixture {a.get('deprecated')} vs extracted {o['deprecated']}")
        if a["dest"] != o["dest"]:
            dest_mm.append(f"{flag}: fixture {a['dest']} vs extracted {o['dest']}")
        if a["action"] != o["action"]:
            action_mm.append(f"{flag}: fixture {a['action']} vs extracted {o['action']}")
        if a["flags"] != o["flags"]:
            order_mm.append(f"{flag}: fixture {a['flags']} vs extracted {o['flags']}")
        if a["nargs"] != o["nargs"]:
            nargs_mm.append(f"{flag}: fixture {a['nargs']!r} vs extracted {o['nargs']!r}")
        if o.get("default_is_literal", True):  # only literal defaults are in the table
            default_compared += 1
            if not _same_default(a["default"], o["default"]):
                default_mm.append(f"{flag}: fixture {a['default']!r} vs extracted {o['default']!r}")
    stats.update(
        compared_options=len(pairs),
        choice_mismatches=choice_mm,
        type_compared=type_compared,
        type_uncomparable=type_uncomparable,
        type_mismatches=type_mm,
        type_callable_mismatches=callable_mm,
        flag_order_mismatches=order_mm,
        nargs_mismatches=nargs_mm,
        deprecation_mismatches=dep_mm,
        dest_mismatches=dest_mm,
        action_mismatches=action_mm,
        default_compared=default_compared,
        default_mismatches=default_mm,
    )
    lines.append(
        f"option strings: fixture {len(theirs)} in {len(fixture['actions'])} options; extracted {len(ours)} in "
        f"{len(options)} options"
    )
    lines.append(f"  matching {len(matched)}, missing {len(missing)}, extra {len(extra)}")
    for f in missing:
        lines.append(f"  missing: {f}")
    for f in extra:
        lines.append(f"  extra:   {f}")
    for g in grouping:
        lines.append(f"  grouped differently: {g}")
    lines.append(f"options compared: {len(pairs)}")
    lines.append(f"  option strings in a different order within an option: {len(order_mm)}")
    lines.extend(f"    {m}" for m in order_mm)
    lines.append(f"  dest mismatches: {len(dest_mm)}")
    lines.extend(f"    {m}" for m in dest_mm)
    lines.append(f"  nargs mismatches: {len(nargs_mm)}")
    lines.extend(f"    {m}" for m in nargs_mm)
    lines.append(f"  action class mismatches: {len(action_mm)}")
    lines.extend(f"    {m}" for m in action_mm)
    lines.append(f"  choices mismatches: {len(choice_mm)}")
    lines.extend(f"    {m}" for m in choice_mm)
    uncomparable = collections.Counter(
        str(a["type"] or a["action"])
        for a, o in pairs
        if fixture_type(a) is _NOT_FOUND or (o["type"] is None and fixture_type(a))
    )
    lines.append(
        f"  type: compared {type_compared}, mismatches {len(type_mm)}, not comparable {type_uncomparable} "
        f"(the dump only names the wrapper: {', '.join(f'{n} {k}' for k, n in uncomparable.most_common())})"
    )
    lines.extend(f"    {m}" for m in type_mm)
    lines.append(
        f"  type callable (the function argparse calls, by name): mismatches {len(callable_mm)} of {len(pairs)}"
    )
    lines.extend(f"    {m}" for m in callable_mm)
    lines.append(f"  deprecation mismatches: {len(dep_mm)}")
    lines.extend(f"    {m}" for m in dep_mm)
    lines.append(f"  defaults (literal on both sides): compared {default_compared}, mismatches {len(default_mm)}")
    lines.extend(f"    {m}" for m in default_mm)
    return lines, stats


def _same_default(fixture_default, ours) -> bool:
    """The dump writes sets, dicts and enum members as their repr; compare through that."""
    if fixture_default == ours:
        return True
    if not isinstance(fixture_default, str):
        return False
    if fixture_default == repr(ours):
        return True
    if isinstance(ours, list) and fixture_default == (repr(set(ours)) if ours else "set()"):
        return True
    m = re.match(r"^<\w+\.\w+: (.*)>$", fixture_default)  # <Enum.MEMBER: 'value'>
    return bool(m and m.group(1) == repr(ours))


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------


def parse_line(text: str) -> tuple[int, int]:
    m = re.match(r"^v?(\d+)\.(\d+)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a release line: {text!r} (expected e.g. 0.32)")
    return int(m.group(1)), int(m.group(2))


def all_lines() -> list[tuple[int, int]]:
    return [(0, m) for m in range(OLDEST_LINE[1], NEWEST_LINE[1] + 1)]


class Release:
    """One release line's chosen distribution file and its Python sources."""

    def __init__(self, index: dict, line: tuple[int, int], filename: str | None = None):
        self.line = line
        self.version, self.entry = pick_release(index, line, filename)
        self.archive = download(self.entry)
        self.sources = read_sources(self.archive)

    @property
    def kind(self) -> str:
        return "sdist" if self.entry["filename"].endswith(".tar.gz") else "wheel (this release has no sdist)"


def build_table(release: Release, platform: str, entry: str = "serve") -> tuple[dict, list[str]]:
    options, warnings, where = extract(release.sources, platform=platform, entry=entry)
    f = release.entry
    table = {
        "vllm_version": release.version,
        "line": f"{release.line[0]}.{release.line[1]}",
        "method": (
            f"hack/vllm/extract_flags.py: PyPI {release.kind} {f['filename']} (sha256 {f['hashes']['sha256']}, "
            f"verified), read without importing vLLM: its source parsed with ast and the parser of {where} "
            "built by an abstract interpreter (vLLM code interpreted as written, argparse/typing/dataclasses/"
            f"pydantic modelled; sys.argv ['vllm', 'serve']; no VLLM_* variables set; current_platform = {platform})."
        ),
        "source_file": f["filename"],
        "source_sha256": f["hashes"]["sha256"],
        "entry_point": where,
        "platform": platform,
        "option_count": len(options),
        "option_string_count": sum(len(o["flags"]) for o in options),
        "options": options,
    }
    if warnings:
        table["extraction_warnings"] = warnings
    return table, warnings


def dump_table(table: dict) -> str:
    public = dict(table, options=[{k: v for k, v in o.items() if not k.startswith("_")} for o in table["options"]])
    return json.dumps(public, indent=1, ensure_ascii=False) + "\n"


def _option_diff(a: list[dict], b: list[dict]) -> list[str]:
    """Human-readable differences between two option lists (keyed by first flag)."""
    da = {o["flags"][0]: {k: v for k, v in o.items() if not k.startswith("_")} for o in a}
    db = {o["flags"][0]: {k: v for k, v in o.items() if not k.startswith("_")} for o in b}
    out = [f"only in the first: {k}" for k in sorted(set(da) - set(db))]
    out += [f"only in the second: {k}" for k in sorted(set(db) - set(da))]
    for k in sorted(set(da) & set(db)):
        if da[k] != db[k]:
            fields = [f for f in sorted(set(da[k]) | set(db[k])) if da[k].get(f) != db[k].get(f)]
            out.append(f"{k}: " + "; ".join(f"{f} {da[k].get(f)!r} / {db[k].get(f)!r}" for f in fields))
    return out


def reproduce(index: dict, lines: list[tuple[int, int]], tables: Path) -> int:
    """Rebuild each shipped table from the very file it records and compare the two texts; 1 on any difference."""
    differing = []
    for line in lines:
        name = f"{line[0]}.{line[1]}"
        shipped_text = (tables / f"{name}.json").read_text()
        shipped = json.loads(shipped_text)
        release = Release(index, line, filename=shipped["source_file"])
        if release.entry["hashes"]["sha256"] != shipped["source_sha256"]:
            print(f"[{name}] {shipped['source_file']}: PyPI's sha256 is not the one the table records")
            differing.append(name)
            continue
        table, _ = build_table(release, shipped["platform"])
        rebuilt_text = dump_table(table)
        if rebuilt_text == shipped_text:
            print(f"[{name}] reproduced from {shipped['source_file']}: {table['option_count']} options, identical")
            continue
        differing.append(name)
        diff = difflib.unified_diff(
            shipped_text.splitlines(), rebuilt_text.splitlines(), "shipped", "rebuilt", lineterm="", n=1
        )
        print(f"[{name}] DIFFERS from what {shipped['source_file']} gives now:")
        print("\n".join(list(diff)[:40]))
    print("RESULT: every table reproduced" if not differing else f"RESULT: {', '.join(differing)} differ")
    return 1 if differing else 0


def check_fixture(index: dict, path: Path, platform_arg: str | None, show_warnings: bool) -> int:
    fixture = json.loads(path.read_text())
    line = parse_line(fixture["vllm_version"])
    platform = platform_arg or ("cpu" if "cpu" in str(fixture.get("source", "")).lower() else "cuda")
    release = Release(index, line)
    print(
        f"fixture: {path} ({fixture.get('source')}, vLLM {fixture['vllm_version']}, {len(fixture['actions'])} options)"
    )
    print(f"extracting {release.entry['filename']} with current_platform = {platform}")
    if release.version != fixture["vllm_version"]:
        print(f"  note: newest release of the line is {release.version}, the fixture is {fixture['vllm_version']}")
    # The fixture is a dump of make_arg_parser, so compare that parser first.
    table, warnings = build_table(release, platform, entry="api_server")
    lines, stats = compare_with_fixture(table["options"], fixture)
    print("\n".join(lines))
    serve_table, _ = build_table(release, platform, entry="serve")
    serve_diff = _option_diff(table["options"], serve_table["options"])
    print(f"`vllm serve` parser (the shipped table) vs make_arg_parser: {len(serve_diff)} differences")
    print("\n".join(f"  {d}" for d in serve_diff))
    other = "cuda" if platform == "cpu" else "cpu"
    other_table, _ = build_table(release, other, entry="serve")
    platform_diff = _option_diff(serve_table["options"], other_table["options"])
    print(f"platform-dependent options ({platform} / {other}): {len(platform_diff)}")
    print("\n".join(f"  {d}" for d in platform_diff))
    print(f"interpreter warnings: {len(warnings)}")
    for w in warnings if show_warnings else warnings[:20]:
        print(f"  {w}")
    ok = not stats["missing_option_strings"] and not stats["extra_option_strings"]
    print("RESULT: option strings match exactly" if ok else "RESULT: option strings differ")
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--versions",
        nargs="+",
        type=parse_line,
        metavar="LINE",
        help="release lines to extract, e.g. 0.8 0.32 (default: every line 0.8 … 0.33)",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    ap.add_argument(
        "--platform",
        choices=["cuda", "cpu"],
        default=None,
        help="what current_platform stands for (default: cuda; with --check-fixture: the fixture's)",
    )
    ap.add_argument(
        "--check-fixture",
        type=Path,
        metavar="PATH",
        help="compare the table of the fixture's release with a real dump of its parser, then exit "
        "(non-zero when option strings differ)",
    )
    ap.add_argument(
        "--reproduce",
        action="store_true",
        help="rebuild the tables in --out (default: the shipped ones) from the source files they record and "
        "compare, writing nothing (non-zero when any differs)",
    )
    ap.add_argument("--show-warnings", action="store_true", help="print every interpreter warning")
    args = ap.parse_args(argv)

    index = fetch_index()
    if args.check_fixture:
        return check_fixture(index, args.check_fixture, args.platform, args.show_warnings)
    if args.reproduce:
        return reproduce(index, args.versions or all_lines(), args.out)

    platform = args.platform or "cuda"
    args.out.mkdir(parents=True, exist_ok=True)
    for line in args.versions or all_lines():
        name = f"{line[0]}.{line[1]}"
        print(f"[{name}] picking the newest release of the line", flush=True)
        release = Release(index, line)
        print(f"[{name}] {release.entry['filename']}: sha256 verified, {len(release.sources)} Python files", flush=True)
        table, warnings = build_table(release, platform)
        path = args.out / f"{name}.json"
        path.write_text(dump_table(table))
        print(
            f"[{name}] vLLM {table['vllm_version']}: {table['option_count']} options, "
            f"{table['option_string_count']} option strings, {len(warnings)} interpreter warnings -> {path}",
            flush=True,
        )
        for w in warnings if args.show_warnings else warnings[:5]:
            print(f"    warning: {w}")
    return 0


def run_main() -> int:
    """Run ``main`` on a thread with a deep stack: interpreted calls nest Python frames deeply."""
    import threading

    sys.setrecursionlimit(20000)
    threading.stack_size(512 * 1024 * 1024)
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["rc"] = main()
        except BaseException as exc:  # re-raised on the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="extract_flags")
    worker.start()
    worker.join()
    if isinstance(outcome.get("error"), BrokenPipeError):
        return 1
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return int(outcome.get("rc", 1))  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(run_main())
