"""The symbols a source file defines, for the code index (`loom code index`, `code.symbol`), and
how a checkout's remote names its repository (`code.repos`).

Python is read with the standard library's `ast`; JavaScript, TypeScript, Go, Rust, Java and
C/C++ with tree-sitter and each language's published grammar. A Markdown page "defines" each
backticked name it writes (kind `page`, at its first line), so a name only pages document can
be told apart from one code defines (spec 003, Extract decisions from a document, Files).

Kinds: `class` (a class, struct, interface, enum, trait or type alias), `function`, `method`
(a function inside a class or impl, or defined as `Class::name`), `constant` (an UPPER_CASE
module- or class-level value), `page`.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath
from typing import Any, TypedDict, TypeVar

import tree_sitter

KINDS = ("class", "function", "method", "constant", "page")
# A file past this many bytes is not parsed (generated code, vendored bundles).
MAX_FILE_BYTES = 1_000_000
_CONSTANT = re.compile(r"^_*[A-Z][A-Z0-9_]*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A backticked identifier, dotted name or `::` path in a Markdown page.
_BACKTICK_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*)(?:\(\))?`")
MARKDOWN_SUFFIXES = (".md", ".markdown")


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str  # the bare name: `load`
    qualname: str  # within the file: `MergeTreeData.load`
    kind: str
    line: int


class DefinedSymbol(TypedDict):
    """A symbol as `loom code index` sends it: `fqname` is the module and qualified name."""

    name: str
    qualname: str
    fqname: str
    kind: str
    line: int


class IndexedFile(TypedDict):
    """A tracked file and the symbols it defines (none for a file that is not read)."""

    path: str
    symbols: list[DefinedSymbol]


class SymbolRow(TypedDict):
    """A symbol (or a file, kind `file`) as a lookup answers it."""

    path: str
    line: int
    name: str
    qualname: str
    kind: str


def module_of(path: str) -> str:
    """A file's dotted module name, as a qualified name in a document writes it: `pkg/mod.py` ->
    `pkg.mod` (a package's `__init__` is the package)."""
    p = PurePosixPath(path)
    parts = [*p.parent.parts, p.stem]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def symbols_of(path: str, text: str) -> list[Symbol]:
    """The symbols `text` (the file at `path`) defines; a file it cannot parse defines none."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix == ".py":
        return _python(text)
    if suffix in MARKDOWN_SUFFIXES:
        return _markdown(text)
    lang = _LANGUAGE_OF.get(suffix)
    if lang is None:
        return []
    parser = tree_sitter.Parser(_language(lang))
    tree = parser.parse(text.encode("utf-8", errors="replace"))
    return list(dict.fromkeys(_walk(tree.root_node, lang, ())))


def is_markdown(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in MARKDOWN_SUFFIXES


def indexable(path: str) -> bool:
    suffix = PurePosixPath(path).suffix.lower()
    return suffix == ".py" or suffix in MARKDOWN_SUFFIXES or suffix in _LANGUAGE_OF


# --- Python


def _python(text: str) -> list[Symbol]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out: list[Symbol] = []

    def visit(body: list[ast.stmt], scope: tuple[str, ...], in_class: bool) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                out.append(Symbol(node.name, ".".join((*scope, node.name)), "class", node.lineno))
                visit(node.body, (*scope, node.name), True)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append(Symbol(node.name, ".".join((*scope, node.name)), "method" if in_class else "function", node.lineno))
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and _CONSTANT.match(t.id):
                        out.append(Symbol(t.id, ".".join((*scope, t.id)), "constant", node.lineno))

    visit(tree.body, (), False)
    return out


# --- Markdown


def _markdown(text: str) -> list[Symbol]:
    seen: dict[str, int] = {}
    fence = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence:
            continue
        for m in _BACKTICK_NAME.finditer(line):
            seen.setdefault(m.group(1).replace("::", "."), lineno)
    return [Symbol(name.rsplit(".", 1)[-1], name, "page", line) for name, line in seen.items()]


# --- tree-sitter languages


# Each language's grammar package and the function in it that returns the grammar, imported
# only when a file of that language is first parsed.
_GRAMMARS = {
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
}


def _grammar(lang: str) -> Any:
    package, function = _GRAMMARS[lang]
    return getattr(importlib.import_module(package), function)()


@cache
def _language(lang: str) -> tree_sitter.Language:
    return tree_sitter.Language(_grammar(lang))


_LANGUAGE_OF = {
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "cpp",
    ".h": "cpp",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
}

# Node types that open a type scope, per language (their `name` field names them).
_CLASS_NODES = {
    "javascript": {"class_declaration", "class"},
    "typescript": {
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "enum_declaration",
        "type_alias_declaration",
    },
    "go": set(),  # type_spec, below
    "rust": {"struct_item", "enum_item", "trait_item", "type_item", "union_item"},
    "java": {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration", "annotation_type_declaration"},
    "cpp": {"class_specifier", "struct_specifier", "union_specifier", "enum_specifier"},
}
_CLASS_NODES["tsx"] = _CLASS_NODES["typescript"]
_FUNCTION_NODES = {
    "javascript": {"function_declaration", "generator_function_declaration", "method_definition"},
    "typescript": {"function_declaration", "generator_function_declaration", "method_definition", "function_signature"},
    "go": {"function_declaration", "method_declaration"},
    "rust": {"function_item"},
    "java": {"method_declaration", "constructor_declaration"},
    "cpp": {"function_definition"},
}
_FUNCTION_NODES["tsx"] = _FUNCTION_NODES["typescript"]


def _text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", errors="replace") if node is not None and node.text is not None else ""


def _line(node: tree_sitter.Node) -> int:
    return node.start_point[0] + 1


def _walk(node: tree_sitter.Node, lang: str, scope: tuple[str, ...]) -> Iterator[Symbol]:
    for child in node.named_children:
        yield from _visit(child, lang, scope)


def _visit(node: tree_sitter.Node, lang: str, scope: tuple[str, ...]) -> Iterator[Symbol]:
    t = node.type
    if t in _CLASS_NODES[lang] or (lang == "go" and t == "type_spec"):
        name = _text(node.child_by_field_name("name"))
        body = node.child_by_field_name("body")
        # A C++ forward declaration (`class X;`) or a use of a type (`struct X x;`) defines nothing.
        if name and (lang != "cpp" or body is not None):
            yield Symbol(name, ".".join((*scope, name)), "class", _line(node))
            yield from _walk(node, lang, (*scope, name))
        return
    if lang == "rust" and t == "impl_item":
        yield from _walk(node, lang, (*scope, _type_name(_text(node.child_by_field_name("type")))))
        return
    if lang == "cpp" and t == "namespace_definition":
        name = _text(node.child_by_field_name("name"))
        yield from _walk(node, lang, (*scope, *[p for p in name.split("::") if p]))
        return
    if t in _FUNCTION_NODES[lang]:
        yield from _function(node, lang, scope)
        return
    constant = _CONSTANT_FINDERS.get(lang)
    if constant is not None:
        found = list(constant(node))
        if found:
            for name, line in found:
                yield Symbol(name, ".".join((*scope, name)), "constant", line)
            return
    if lang in ("javascript", "typescript", "tsx") and t in ("lexical_declaration", "variable_declaration") and not _in_function(node):
        for decl in node.named_children:
            value = decl.child_by_field_name("value")
            name = _text(decl.child_by_field_name("name"))
            if value is not None and value.type in ("arrow_function", "function_expression", "function") and _IDENT.match(name):
                yield Symbol(name, ".".join((*scope, name)), "method" if scope else "function", _line(decl))
    if t in ("function_body", "compound_statement", "block", "statement_block"):
        return  # definitions inside a function body are local to it
    yield from _walk(node, lang, scope)


def _in_function(node: tree_sitter.Node) -> bool:
    p = node.parent
    while p is not None:
        if p.type in ("statement_block", "function_body", "arrow_function", "function_declaration", "method_definition"):
            return True
        p = p.parent
    return False


def _type_name(text: str) -> str:
    """`Foo<T>` -> `Foo`, `&'a mut Foo` -> `Foo`."""
    base = text.split("<", 1)[0].strip()
    return re.split(r"[\s&*]+", base)[-1] if base else base


def _function(node: tree_sitter.Node, lang: str, scope: tuple[str, ...]) -> Iterator[Symbol]:
    line = _line(node)
    if lang == "cpp":
        name, owner = _cpp_declarator(node.child_by_field_name("declarator"))
        if not name:
            return
        qual = (*scope, *owner, name)
        yield Symbol(name, ".".join(qual), "method" if owner or _in_cpp_class(node) else "function", line)
        return
    name = _text(node.child_by_field_name("name"))
    if not name:
        return
    if lang == "go" and node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        types = [_type_name(_text(p.child_by_field_name("type"))) for p in (receiver.named_children if receiver else [])]
        recv = types[0] if types else ""
        yield Symbol(name, ".".join((*scope, *([recv] if recv else []), name)), "method", line)
        return
    kind = "method" if scope or node.type in ("method_definition", "method_declaration", "constructor_declaration") else "function"
    yield Symbol(name, ".".join((*scope, name)), kind, line)


def _in_cpp_class(node: tree_sitter.Node) -> bool:
    return node.parent is not None and node.parent.type == "field_declaration_list"


def _cpp_declarator(node: tree_sitter.Node | None) -> tuple[str, tuple[str, ...]]:
    """A C++ function definition's name and the class or namespace path it is defined under."""
    while node is not None and node.type in ("function_declarator", "pointer_declarator", "reference_declarator"):
        node = node.child_by_field_name("declarator")
    if node is None:
        return "", ()
    if node.type == "qualified_identifier":
        parts = [p for p in _text(node).replace(" ", "").split("::") if p]
        parts = [_type_name(p) for p in parts]
        return (parts[-1], tuple(parts[:-1])) if parts else ("", ())
    if node.type in ("identifier", "field_identifier", "destructor_name", "operator_name"):
        return _text(node), ()
    return "", ()


def _upper_names(nodes: list[tree_sitter.Node]) -> list[tuple[str, int]]:
    return [(_text(n), _line(n)) for n in nodes if _CONSTANT.match(_text(n))]


def _go_constants(node: tree_sitter.Node) -> list[tuple[str, int]]:
    if node.type != "const_declaration":
        return []
    names = [c.child_by_field_name("name") for c in node.named_children if c.type == "const_spec"]
    return [(_text(n), _line(n)) for n in names if n is not None and _text(n)]


def _rust_constants(node: tree_sitter.Node) -> list[tuple[str, int]]:
    if node.type not in ("const_item", "static_item"):
        return []
    name = node.child_by_field_name("name")
    return [(_text(name), _line(node))] if name is not None else []


def _java_constants(node: tree_sitter.Node) -> list[tuple[str, int]]:
    if node.type != "field_declaration":
        return []
    names = [d.child_by_field_name("name") for d in node.children_by_field_name("declarator")]
    return _upper_names([n for n in names if n is not None])


def _js_constants(node: tree_sitter.Node) -> list[tuple[str, int]]:
    if node.type != "lexical_declaration" or _in_function(node):
        return []
    names = [d.child_by_field_name("name") for d in node.named_children if d.type == "variable_declarator"]
    return _upper_names([n for n in names if n is not None and n.type == "identifier"])


def _cpp_constants(node: tree_sitter.Node) -> list[tuple[str, int]]:
    if node.type not in ("declaration", "field_declaration"):
        return []
    found = []
    for d in node.children_by_field_name("declarator"):
        if d.type == "init_declarator":
            d = d.child_by_field_name("declarator") or d
        if d.type in ("identifier", "field_identifier"):
            found.append(d)
    return _upper_names(found)


_CONSTANT_FINDERS: dict[str, Callable[[tree_sitter.Node], list[tuple[str, int]]]] = {
    "go": _go_constants,
    "rust": _rust_constants,
    "java": _java_constants,
    "javascript": _js_constants,
    "typescript": _js_constants,
    "tsx": _js_constants,
    "cpp": _cpp_constants,
}


# --- repositories


_SCP_REMOTE = re.compile(r"^(?:[\w.-]+@)?([\w.-]+):(?!//)(.+)$")


def remote_slug(remote: str) -> tuple[str, str] | None:
    """(host, `owner/name`) of a git remote in any of its forms: https://host/owner/name(.git),
    ssh://git@host(:port)/owner/name, git@host:owner/name.git; lower-cased, as hosts match
    names case-insensitively. None when it names no owner/name."""
    r = remote.strip()
    if not r:
        return None
    m = re.match(r"^[a-z][a-z0-9+.-]*://(?:[^@/]+@)?([^/:]+)(?::\d+)?/(.+)$", r, re.IGNORECASE)
    if m is None:
        m = _SCP_REMOTE.match(r)
    if m is None:
        return None
    host, path = m.group(1).lower(), m.group(2).strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2:
        return None
    return host, "/".join(parts[-2:]).lower()


def repo_slug(value: str) -> str | None:
    """`OWNER/NAME` or a remote URL -> lower-cased `owner/name`; None for anything else."""
    v = value.strip()
    if re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", v):
        return v.removesuffix(".git").lower()
    found = remote_slug(v)
    return found[1] if found else None


def trunk_namespace(slug: str) -> str:
    """The default trunk code namespace of `owner/name`: `code-owner-name`, cut to a namespace name's 63 characters."""
    return ("code-" + re.sub(r"[^a-z0-9_-]+", "-", slug.lower()).strip("-"))[:63].rstrip("-")


def branch_namespace(trunk: str, branch: str) -> str:
    """A branch's code namespace: the trunk's name, `--`, the branch (cut to 63 characters)."""
    b = re.sub(r"[^a-z0-9_-]+", "-", branch.lower()).strip("-")
    return f"{trunk}--{b}"[:63].rstrip("-")


# --- code.symbol's name forms and preferences

_PATH_LIKE = re.compile(r"^[\w.\-/]+\.[A-Za-z0-9]{1,8}$")


@dataclass(frozen=True, slots=True)
class Lookup:
    """A code.symbol query: a path (`src/a/b.py`), or a bare `name` with the `qualified` form it
    was written in (empty for a bare name)."""

    path: str = ""
    name: str = ""
    qualified: str = ""


def parse_lookup(raw: str) -> Lookup | None:
    """A bare name, a qualified `a.b.C` (or `A::b`), or a path, backticked or not, with a call's
    `()` aside; None when it is none of these."""
    q = raw.strip().strip("`").strip()
    if q.endswith("()"):
        q = q[:-2]
    if "/" in q:
        return Lookup(path=q.lstrip("./")) if _PATH_LIKE.match(q) else None
    q = q.replace("::", ".")
    parts = q.split(".")
    if not all(_IDENT.match(p) for p in parts):
        return None
    if len(parts) > 1 and parts[-1] in _SOURCE_SUFFIXES:
        return Lookup(path=q)  # `decision_extract.py`: a file's name
    return Lookup(name=parts[-1], qualified=q if len(parts) > 1 else "")


_SOURCE_SUFFIXES = {s.lstrip(".") for s in (*_LANGUAGE_OF, ".py", *MARKDOWN_SUFFIXES)}


R = TypeVar("R", bound=SymbolRow)


def prefer_classes(rows: list[R]) -> list[R]:
    """A class is preferred over its constructor: a method named as the class it is defined in
    (`Foo::Foo`, Java's `Foo()`) is left out when the class itself is among the rows."""
    classes = {r["qualname"] for r in rows if r["kind"] == "class"}
    return [r for r in rows if not (r["kind"] == "method" and r["qualname"].rsplit(".", 1)[0] in classes)]
