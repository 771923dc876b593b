# ruff: noqa: E501 (the table reads best one case a line)
"""The hostile-input corpus: each case, and the errors gitsync must report for it.

Lines and columns are 1-based, as gitsync prints them. Fragments are parts of the message
that say what is wrong; the test also checks that nothing else is reported, that no MyApp
of a broken document loads, and that the good MyApps beside the corpus still do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tests.corpus.layout import Case, Error, at

LIMIT = 1 << 20  # manifests.Limits: bytes per file and per expanded document
VALUE = 256 << 10  # one value, aliases expanded
DNS = "must be a DNS-1123 label"
INT32 = "must be an integer from 0 to 2147483647"
MYAPP_ONLY = "only apps.example.com/v1 MyApp is accepted, found"


def head(name: str, image: str = "nginx:1.27") -> str:
    """Lines 1-6 of a MyApp: name on line 4, image on line 6 (column 10)."""
    return (
        "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata:\n"
        f"  name: {name}\nspec:\n  image: {image}\n"
    )


def _write(corpus: Path, rel: str, text: str) -> None:
    path = corpus / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _link(corpus: Path, rel: str, target: str) -> None:
    path = corpus / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


# --- generated: huge files and values, alias bombs, deep nesting, floods -----------------


def huge_file(corpus: Path) -> None:
    # one byte over the limit: refused by its size, before any of it is read
    text = head("corpus-huge") + "  env:\n"
    filler = "  - {name: PAD, value: " + "x" * 1000 + "}\n"
    text += filler * ((LIMIT - len(text)) // len(filler) + 1)
    _write(corpus, "huge-file.yaml", text[: LIMIT + 1])


def huge_value(corpus: Path) -> None:
    _write(corpus, "huge-value.yaml", head("corpus-bigvalue", image="x" * (300 << 10)))


def huge_number(corpus: Path) -> None:
    _write(
        corpus, "huge-number.yaml", head("corpus-bignumber") + "  replicas: " + "9" * 5000 + "\n"
    )


def huge_key(corpus: Path) -> None:
    # libyaml allows a plain key of at most 1024 characters on one line
    _write(corpus, "huge-key.yaml", head("corpus-bigkey") + "  " + "k" * 2000 + ": 1\n")


def many_documents(corpus: Path) -> None:
    _write(corpus, "many-documents.yaml", "---\n" * 1001 + head("corpus-many"))


def error_flood(corpus: Path) -> None:
    _write(corpus, "error-flood.yaml", head("corpus-flood") + "  env: [" + "0, " * 499 + "0]\n")


def alias_laughs(corpus: Path) -> None:
    # the billion laughs: 9 levels of 9 aliases each, 9**9 strings once expanded
    lines = ['  lol0: &l0 "lol"']
    lines += [f"  lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    _write(corpus, "alias-laughs.yaml", head("corpus-laughs") + "\n".join(lines) + "\n")


def alias_bytes(corpus: Path) -> None:
    # few aliases, but each one repeats a 200 KiB value: one list of 1.2 MiB
    text = head("corpus-aliasbytes", image="&big " + "x" * (200 << 10))
    _write(corpus, "alias-bytes.yaml", text + "  env: [*big, *big, *big, *big, *big, *big]\n")


def alias_document_bytes(corpus: Path) -> None:
    # every value under the value limit, the document over its own once expanded
    text = head("corpus-aliasdoc", image="&big " + "x" * (200 << 10))
    text += "".join(f"x{i}: *big\n" for i in range(6))
    _write(corpus, "alias-document-bytes.yaml", text)


def alias_merge_bomb(corpus: Path) -> None:
    text = head("corpus-merge") + "  resources: &r {limits: {cpu: 1}}\n"
    text += "  env: [{<<: [" + ", ".join(["*r"] * 101) + "]}]\n"
    _write(corpus, "alias-merge-bomb.yaml", text)


def deep_block(corpus: Path) -> None:
    lines = [f"{'  ' * (i + 1)}n{i}:" for i in range(40)]
    _write(corpus, "deep-block.yaml", head("corpus-deep") + "\n".join(lines) + " x\n")


def deep_flow(corpus: Path) -> None:
    _write(
        corpus,
        "deep-flow.yaml",
        head("corpus-deepflow") + "  env: " + "[" * 5000 + "]" * 5000 + "\n",
    )


# --- symlinks: made here, as a checkout makes them -----------------------------------------


def links(targets: dict[str, str]) -> Callable[[Path], None]:
    """A ``make`` that creates symlinks: path in the corpus -> target."""

    def make(corpus: Path) -> None:
        for rel, target in targets.items():
            path = corpus / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, path)

    return make


def _flood() -> tuple[Error, ...]:
    errors = [
        at(
            "error-flood.yaml",
            7,
            9 + 3 * i,
            f"spec.env[{i}]: must be a mapping with name and value",
        )
        for i in range(20)
    ]
    return (*errors, at("error-flood.yaml", None, None, "… and 480 more errors in this file"))


def one(file: str, line: int | None, column: int | None, fragment: str) -> tuple[Error, ...]:
    return (at(file, line, column, fragment),)


_YAML = "malformed YAML"
_DUPKEY = "duplicate keys"
_BYTES = "empty and binary files, BOMs, NULs, encodings"
_KIND = "wrong kinds and apiVersions"
_SCHEMA = "schema violations"
_HUGE = "huge files and values"
_ALIAS = "alias bombs (count and bytes)"
_DEEP = "deep nesting"
_TRAP = "YAML 1.1 number traps"
_UNICODE = "unicode tricks in names"
_LINK = "symlinks"
_DUP = "duplicate objects"
_NS = "namespace and name escapes"

# fmt: off
CASES: list[Case] = [
    Case("yaml-tab-indent", _YAML, one("yaml-tab-indent.yaml", 7, 1, "invalid YAML: found a tab character that violates indentation")),
    Case("yaml-unclosed-flow", _YAML, one("yaml-unclosed-flow.yaml", 8, 1, "invalid YAML: did not find expected ',' or ']'")),
    Case("yaml-bad-indent", _YAML, one("yaml-bad-indent.yaml", 7, 2, "invalid YAML: did not find expected key")),
    Case("yaml-unterminated-quote", _YAML, one("yaml-unterminated-quote.yaml", 8, 1, "invalid YAML: found unexpected end of stream")),
    Case("yaml-colon-in-plain", _YAML, one("yaml-colon-in-plain.yaml", 6, 15, "invalid YAML: mapping values are not allowed in this context")),
    Case("yaml-undefined-alias", _YAML, one("yaml-undefined-alias.yaml", 7, 13, "undefined alias *count")),
    Case("yaml-python-tag", _YAML, one("yaml-python-tag.yaml", 6, 10, "could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'")),
    Case("yaml-custom-tag", _YAML, one("yaml-custom-tag.yaml", 6, 10, "could not determine a constructor for the tag '!vault'")),
    Case("yaml-bad-directive", _YAML, one("yaml-bad-directive.yaml", 1, 1, "invalid YAML: found incompatible YAML document")),
    # was an AttributeError out of PyYAML (a traceback), before the timestamp constructor
    Case("yaml-bad-timestamp", _YAML, one("yaml-bad-timestamp.yaml", 7, 12, "cannot read '99999-01-01' as a timestamp")),
    Case("yaml-unhashable-key", _YAML, one("yaml-unhashable-key.yaml", 7, 5, "invalid YAML: found unhashable key")),
    # the documents before the broken one are whole, and load; prune still waits
    Case("yaml-broken-second-document", _YAML, one("yaml-broken-second-document.yaml", 15, 1, "invalid YAML: did not find expected node content"), accepted={"corpus-before": {}}),

    Case("dup-key-replicas", _DUPKEY, one("dup-key-replicas.yaml", 8, 3, "duplicate key 'replicas'")),
    Case("dup-key-spec", _DUPKEY, one("dup-key-spec.yaml", 7, 1, "duplicate key 'spec'")),
    Case("dup-key-quoted", _DUPKEY, one("dup-key-quoted.yaml", 7, 3, "duplicate key 'image'")),
    Case("dup-key-env-name", _DUPKEY, one("dup-key-env-name.yaml", 8, 25, "duplicate key 'name'")),

    Case("empty", _BYTES),
    Case("comments-only", _BYTES),
    Case("binary-png", _BYTES, one("binary-png.yaml", 1, 1, "not valid UTF-8 (byte 0)")),
    Case("binary-gzip", _BYTES, one("binary-gzip.yaml", 1, 2, "not valid UTF-8 (byte 1)")),
    Case("invalid-utf8", _BYTES, one("invalid-utf8.yaml", 6, 15, "not valid UTF-8 (byte 94)")),
    Case("utf16", _BYTES, one("utf16.yaml", 1, 1, "the file is UTF-16 (it starts with its byte order mark); write it as UTF-8")),
    Case("bom-start", _BYTES, accepted={"corpus-bom": {}}),
    Case("bom-second-document", _BYTES, one("bom-second-document.yaml", 8, 1, "a byte order mark (U+FEFF) is allowed only at the start of the file")),
    Case("nul-byte", _BYTES, one("nul-byte.yaml", 7, 14, "character U+0000 is not allowed in YAML")),
    Case("escape-character", _BYTES, one("escape-character.yaml", 6, 15, "character U+001B is not allowed in YAML")),
    Case("cr-line-endings", _BYTES, one("cr-line-endings.yaml", 7, 3, "spec.port: must be an integer from 1 to 65535, found string 'x'")),

    Case("kind-deployment", _KIND, one("kind-deployment.yaml", 1, 1, f"apiVersion: {MYAPP_ONLY} apps/v1 Deployment")),
    Case("kind-lowercase", _KIND, one("kind-lowercase.yaml", 2, 1, f"kind: {MYAPP_ONLY} apps.example.com/v1 myapp")),
    Case("kind-v2", _KIND, one("kind-v2.yaml", 1, 1, f"apiVersion: {MYAPP_ONLY} apps.example.com/v2 MyApp")),
    Case("kind-missing", _KIND, one("kind-missing.yaml", 1, 1, f"kind: {MYAPP_ONLY} apps.example.com/v1 (no kind)")),
    Case("kind-list", _KIND, one("kind-list.yaml", 1, 1, f"apiVersion: {MYAPP_ONLY} v1 List")),
    Case("document-is-a-list", _KIND, one("document-is-a-list.yaml", 1, 1, "a document must be a MyApp mapping, found a list")),
    Case("document-is-a-string", _KIND, one("document-is-a-string.yaml", 1, 1, "a document must be a MyApp mapping, found string 'MyApp corpus-str nginx:1.27'")),

    Case("status-from-git", _SCHEMA, one("status-from-git.yaml", 7, 1, "status: status is written by the operator, not by Git")),
    Case("unknown-spec-field", _SCHEMA, one("unknown-spec-field.yaml", 7, 3, "spec.command: unknown field (known: image, replicas,")),
    Case("metadata-owner-references", _SCHEMA, one("metadata-owner-references.yaml", 5, 3, "metadata.ownerReferences: unknown field")),
    Case("replicas-negative", _SCHEMA, one("replicas-negative.yaml", 7, 3, f"spec.replicas: {INT32}, found number -1")),
    Case("port-out-of-range", _SCHEMA, one("port-out-of-range.yaml", 7, 3, "spec.port: must be an integer from 1 to 65535, found number 70000")),
    Case("image-empty", _SCHEMA, one("image-empty.yaml", 6, 3, "spec.image: must be a non-empty image reference, found string ''")),
    # was a TypeError out of the schema (a traceback), before; found by make fuzz
    Case("env-name-list", _SCHEMA, one("env-name-list.yaml", 8, 5, "spec.env[0].name: must be a non-empty string, found a list")),
    Case("env-duplicate-name", _SCHEMA, one("env-duplicate-name.yaml", 10, 5, "spec.env[1].name: duplicate env name 'A' (also env[0])")),
    Case("reserved-label", _SCHEMA, one("reserved-label.yaml", 6, 5, "metadata.labels.gitsync.apps.example.com/source: is set by gitsync; remove it")),
    Case("drift-policy", _SCHEMA, one("drift-policy.yaml", 7, 3, "spec.driftPolicy: must be one of correct, report, found string 'ignore'")),
    Case("quantity-invalid", _SCHEMA, one("quantity-invalid.yaml", 9, 7, "spec.resources.limits.cpu: must be a quantity such as 500m, 2, 128Mi, found string '1.5.5'")),
    Case("quantity-exponent", _SCHEMA, one("quantity-exponent.yaml", 9, 7, "spec.resources.requests.memory: invalid quantity '1e2000': exponent 2000 out of range")),

    Case("huge-file", _HUGE, one("huge-file.yaml", None, None, f"file is {LIMIT + 1} bytes, more than {LIMIT}"), make=huge_file),
    Case("huge-value", _HUGE, one("huge-value.yaml", 6, 10, f"a value is larger than {VALUE} bytes"), make=huge_value),
    Case("huge-number", _HUGE, one("huge-number.yaml", 7, 3, f"spec.replicas: {INT32}, found string '9999"), make=huge_number),
    Case("huge-key", _HUGE, one("huge-key.yaml", 7, 2003, "invalid YAML: could not find expected ':'"), make=huge_key),
    Case("many-documents", _HUGE, one("many-documents.yaml", 1002, 1, "more than 1000 documents in one file"), make=many_documents),
    Case("error-flood", _HUGE, _flood(), make=error_flood),

    Case("alias-laughs", _ALIAS, one("alias-laughs.yaml", 10, 9, "YAML aliases expand more than 100 times"), make=alias_laughs),
    Case("alias-bytes", _ALIAS, one("alias-bytes.yaml", 7, 15, f"a value is larger than {VALUE} bytes once aliases are expanded"), make=alias_bytes),
    Case("alias-document-bytes", _ALIAS, one("alias-document-bytes.yaml", 11, 5, f"the document is larger than {LIMIT} bytes once aliases are expanded"), make=alias_document_bytes),
    Case("alias-merge-bomb", _ALIAS, one("alias-merge-bomb.yaml", 8, 14, "YAML aliases expand more than 100 times"), make=alias_merge_bomb),
    Case("alias-recursive", _ALIAS, one("alias-recursive.yaml", 7, 12, "recursive alias *e")),

    Case("deep-block", _DEEP, one("deep-block.yaml", 38, 65, "nested deeper than 32"), make=deep_block),
    Case("deep-flow", _DEEP, one("deep-flow.yaml", 7, 1006, "invalid YAML: exceeded maximum nesting depth"), make=deep_flow),

    # read as kubectl reads them (go-yaml v2): both are 8, and the API server holds 8
    Case("trap-octal-0o", _TRAP, accepted={"corpus-octal": {"replicas": 8}}),
    Case("trap-leading-zero", _TRAP, accepted={"corpus-zero": {"replicas": 8}}),
    # 08 is no octal number, so go-yaml reads the float 8.0; and 1e1 is the float 10.0: a
    # float without a fraction at an integer field is that integer, as the CRD stores it
    Case("trap-port-08", _TRAP, accepted={"corpus-port08": {"port": 8}}),
    Case("trap-sexagesimal", _TRAP, one("trap-sexagesimal.yaml", 7, 3, "spec.port: must be an integer from 1 to 65535, found string '1:30'")),
    Case("trap-name-no", _TRAP, one("trap-name-no.yaml", 4, 3, f"metadata.name: {DNS} (a-z, 0-9, '-', at most 63), found boolean false")),
    Case("trap-env-value-on", _TRAP, one("trap-env-value-on.yaml", 9, 5, "spec.env[0].value: must be a string, found boolean true; quote it in the YAML")),
    # kubectl reads y as true (go-yaml v2), and so does gitsync: the MyApp is suspended
    Case("trap-suspend-y", _TRAP, accepted={"corpus-y": {"suspend": True}}),
    Case("trap-float-replicas", _TRAP, accepted={"corpus-float": {"replicas": 10}}),
    Case("trap-label-version", _TRAP, one("trap-label-version.yaml", 6, 5, "metadata.labels.version: must be a string, found number 1.1; quote it")),
    # was reported on the line of "spec:" as "spec.None", before keys were resolved
    Case("trap-null-key", _TRAP, one("trap-null-key.yaml", 7, 3, "spec.null: unknown field")),

    Case("unicode-homoglyph-name", _UNICODE, one("unicode-homoglyph-name.yaml", 4, 3, "found string 'corpus-w\u0435b' (character 9 is U+0435, not ASCII)")),
    Case("unicode-zero-width-name", _UNICODE, one("unicode-zero-width-name.yaml", 4, 3, r"found string 'corpus\u200b-zw' (character 7 is U+200B, not ASCII)")),
    Case("unicode-rtl-name", _UNICODE, one("unicode-rtl-name.yaml", 4, 3, r"found string 'corpus-\u202egnp' (character 8 is U+202E, not ASCII)")),
    # was accepted (and left to fail at the image pull), before images were held to ASCII
    Case("unicode-homoglyph-image", _UNICODE, one("unicode-homoglyph-image.yaml", 6, 3, "spec.image: must be a non-empty image reference, found string 'ghcr.\u0456o/org/app:1' (character 6 is U+0456, not ASCII)")),
    Case("unicode-zero-width-namespace", _UNICODE, one("unicode-zero-width-namespace.yaml", 5, 3, r"metadata.namespace: must be a DNS-1123 label (a-z, 0-9, '-', at most 63), found string 'kube\u200b-system' (character 5 is U+200B")),
    Case("unicode-homoglyph-key", _UNICODE, one("unicode-homoglyph-key.yaml", 5, 1, "['sp\u0435c']: unknown field (a MyApp has metadata and spec)") + one("unicode-homoglyph-key.yaml", 1, 1, "spec: must be a mapping with an image, found null")),
    Case("unicode-rtl-label", _UNICODE, one("unicode-rtl-label.yaml", 6, 5, "metadata.labels.team: invalid label value")),

    Case("symlink-absolute", _LINK, one("symlink-absolute.yaml", None, None, "symlink resolves outside the repository"), make=links({"symlink-absolute.yaml": "/etc/passwd"})),
    Case("symlink-escaping", _LINK, one("symlink-escaping.yaml", None, None, "symlink resolves outside the repository"), make=links({"symlink-escaping.yaml": "../../../outside.yaml"})),
    Case("symlink-dir-escaping", _LINK, one("symlink-dir-escaping", None, None, "symlink resolves outside the repository"), make=links({"symlink-dir-escaping": "/etc"})),
    Case("symlink-loop", _LINK, one("symlink-loop.yaml", None, None, "cannot read: Too many levels of symbolic links"), make=links({"symlink-loop.yaml": "symlink-loop.yaml"})),
    Case("symlink-loop-pair", _LINK, one("symlink-loop-pair/a.yaml", None, None, "cannot read: Too many levels of symbolic links") + one("symlink-loop-pair/b.yaml", None, None, "cannot read: Too many levels of symbolic links"), make=links({"symlink-loop-pair/a.yaml": "b.yaml", "symlink-loop-pair/b.yaml": "a.yaml"})),
    Case("symlink-dangling", _LINK, one("symlink-dangling.yaml", None, None, "cannot open: No such file or directory"), make=links({"symlink-dangling.yaml": "nowhere.yaml"})),
    # was read (the walk skips hidden entries, a link to one was followed), before the fix
    Case("symlink-into-git", _LINK, one("symlink-into-git.yaml", None, None, "symlink resolves to a hidden entry of the repository (such as .git)"), make=links({"symlink-into-git.yaml": "../../.git/config"})),
    # a link back up is walked once: the MyApp beside it loads once, no duplicate
    Case("symlink-dir-loop", _LINK, accepted={"corpus-dirloop": {}}, make=links({"symlink-dir-loop/up": ".."})),
    Case("symlink-twin", _LINK, accepted={"corpus-twin": {}}, make=links({"symlink-twin/alias.yaml": "real.yaml"})),

    Case("dup-across-files", _DUP, one("dup-across-files/b.yaml", 1, 1, "metadata.name: MyApp {namespace}/corpus-dup is also defined at apps/corpus/dup-across-files/a.yaml:1 (document 0)")),
    Case("dup-within-file", _DUP, one("dup-within-file.yaml", 8, 1, "metadata.name: MyApp {namespace}/corpus-dup2 is also defined at apps/corpus/dup-within-file.yaml:1 (document 0)")),
    # a second definition of a live MyApp: neither applies, the live one stays as it is
    Case("dup-of-victim", _DUP, one("../good/victim.yaml", 1, 1, "metadata.name: MyApp {namespace}/victim is also defined at apps/corpus/dup-of-victim.yaml:1 (document 0)"), conflicts=("victim",)),

    Case("ns-kube-system", _NS, one("ns-kube-system.yaml", 5, 3, "metadata.namespace: 'kube-system' is not allowed")),
    Case("ns-default", _NS, one("ns-default.yaml", 5, 3, "metadata.namespace: 'default' is not allowed")),
    Case("ns-path", _NS, one("ns-path.yaml", 5, 3, f"metadata.namespace: {DNS} (a-z, 0-9, '-', at most 63), found string '../kube-system'")),
    Case("ns-uppercase", _NS, one("ns-uppercase.yaml", 5, 3, f"metadata.namespace: {DNS} (a-z, 0-9, '-', at most 63), found string 'KUBE-SYSTEM'")),
    Case("ns-empty", _NS, one("ns-empty.yaml", 5, 3, f"metadata.namespace: {DNS} (a-z, 0-9, '-', at most 63), found string ''")),
    Case("ns-null", _NS, one("ns-null.yaml", 5, 3, f"metadata.namespace: {DNS} (a-z, 0-9, '-', at most 63), found null")),
    Case("name-path", _NS, one("name-path.yaml", 4, 3, f"metadata.name: {DNS} (a-z, 0-9, '-', at most 63), found string '../../etc'")),
    Case("name-too-long", _NS, one("name-too-long.yaml", 4, 3, f"metadata.name: {DNS}")),
]
# fmt: on
