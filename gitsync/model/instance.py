"""The identity of one gitsync instance (design §13: one instance, one identity).

An instance is one source: a repository, a path in it and a ref. Its name is the
value of the source label on every MyApp it applies (prune only ever touches
MyApps carrying it, and an instance never applies over a MyApp carrying another,
nor over one made by hand unless it is handed over: :func:`refusal_of`), and it
names the instance's Lease and sync status ConfigMap, so two instances in one
namespace neither share a leader nor overwrite each other's status.

Pure: no client, no I/O.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass, field

from gitsync.errors import ConfigError
from gitsync.model.api import ADOPT_ANNOTATION, SOURCE_LABEL, Obj
from gitsync.model.schema import is_dns_label

#: the name of an instance that syncs no repository (``gitsync run`` without --repo)
OPERATOR_ONLY = "operator"
LEASE_PREFIX = "gitsync-leader-"
STATUS_PREFIX = "gitsync-status-"
#: a label on the sync status ConfigMap, so ``gitsync drift`` finds every instance's
INSTANCE_LABEL = "gitsync.apps.example.com/instance"

_HASH_LENGTH = 10


@dataclass(frozen=True)
class Instance:
    name: str
    #: source label values this instance wrote before: before instance names existed
    #: (a hash of repository and path), and its default name before transports and
    #: refs were normalised. A MyApp carrying one is adopted when Git still declares
    #: it, but never pruned: two instances on one repository and path (different
    #: refs) both wrote the first, and a replica not yet upgraded still leads under
    #: the second
    legacy_labels: frozenset[str] = field(default=frozenset())

    @property
    def label(self) -> str:
        """The value of the source label (``gitsync.apps.example.com/source``)."""
        return self.name

    @property
    def lease_name(self) -> str:
        return LEASE_PREFIX + self.name

    @property
    def status_name(self) -> str:
        return STATUS_PREFIX + self.name

    def adopting(self, labels: set[str]) -> Instance:
        """This instance, adopting (never pruning) MyApps carrying one of ``labels`` too."""
        return Instance(self.name, self.legacy_labels | (labels - {self.name}))

    def owner_of(self, myapp: Obj | None) -> str | None:
        """The other instance whose source label ``myapp`` carries, or None when it
        carries ours, a legacy one of ours, or none (a MyApp made by hand: see
        :func:`made_by_hand`)."""
        if myapp is None:
            return None
        value = (myapp.get("metadata", {}).get("labels") or {}).get(SOURCE_LABEL)
        if not value or value == self.label or value in self.legacy_labels:
            return None
        return str(value)


def made_by_hand(myapp: Obj | None) -> bool:
    """Whether a live MyApp carries no source label: no instance applied it, so it is
    its maker's (a person, another tool), whatever a Git repository declares."""
    if myapp is None:
        return False
    return not (myapp.get("metadata", {}).get("labels") or {}).get(SOURCE_LABEL)


def handed_over(myapp: Obj | None) -> bool:
    """Whether the maker of a MyApp made by hand hands it to Git: the annotation
    ``gitsync.apps.example.com/adopt: "true"`` on the live object, which only someone
    who may edit it can put there (a push to Git cannot)."""
    if myapp is None:
        return False
    return (myapp.get("metadata", {}).get("annotations") or {}).get(ADOPT_ANNOTATION) == "true"


def refusal(who: str, other: str, me: str) -> str:
    """Why instance ``me`` does not apply MyApp ``who``, labelled by instance ``other``."""
    return (
        f"{who} belongs to gitsync instance {other!r} (label {SOURCE_LABEL});"
        f" instance {me!r} does not apply over it"
        " (declare it in one source only, or delete it to hand it over; if the ref moved,"
        " as a tag or commit does, pin --instance-name to the old instance's name)"
    )


def not_adopted(who: str) -> str:
    """Why MyApp ``who``, made by hand, is not applied over."""
    return (
        f"{who} exists without the label {SOURCE_LABEL} (made by hand): gitsync does not"
        " take it over (its owner may hand it to Git by annotating it"
        f" {ADOPT_ANNOTATION}=true, or run gitsync with --adopt; or delete it)"
    )


@dataclass(frozen=True)
class Refusal:
    """Why an instance does not apply its Git's MyApp over the live one."""

    #: the Event's reason
    reason: str
    message: str


def refusal_of(identity: Instance, who: str, live: Obj | None, adopt: bool) -> Refusal | None:
    """Why ``identity`` does not apply MyApp ``who`` over ``live``, or None when it may:
    another instance's MyApp is never applied over, and one made by hand only when
    handed over (``adopt``, or its owner's annotation). A push must not be able to
    take a MyApp over, rewrite it and then prune it as removed from Git."""
    other = identity.owner_of(live)
    if other is not None:
        return Refusal("OwnedByAnotherInstance", refusal(who, other, identity.name))
    if made_by_hand(live) and not (adopt or handed_over(live)):
        return Refusal("NotAdopted", not_adopted(who))
    return None


def resolve(name: str, repo: str, path: str, ref: str) -> Instance:
    """The instance named ``name``, or by default after ``repo``, ``path`` and ``ref``.

    ``repo`` is the URL that names the source (``--instance-repo`` or ``--repo``);
    empty for an operator without a repository."""
    legacy = frozenset({legacy_label(repo, path)}) if repo else frozenset()
    if name:
        return Instance(check_name(name), legacy)
    if not repo:
        return Instance(OPERATOR_ONLY)
    default = default_name(repo, path, ref)
    # the name this spelling had before transports and refs were normalised: its MyApps
    # are adopted (and relabelled) rather than refused after an upgrade
    previous = _name(_legacy_url(repo), path, ref.strip())
    return Instance(default, (legacy | {previous}) - {default})


def check_name(name: str) -> str:
    if not is_dns_label(name):
        raise ConfigError(
            f"--instance-name {name!r} is not a DNS-1123 label "
            "(a-z, 0-9 and '-', starting and ending with a letter or digit, at most 63)"
        )
    return name


def default_name(repo: str, path: str, ref: str) -> str:
    """A stable, DNS-safe name: the repository's base name and the ref, readable, then a
    hash of the normalised repository URL, path and ref, so that two sources never share
    a name however the readable part is cut (``platform-apps-main-3f9a0c12be``).

    Every spelling of one source gives one name (:func:`canonical_url`, and a ref
    ``refs/heads/main`` is ``main``); the usual one, an ``https://`` URL and a branch
    name, keeps the name it had before that normalisation."""
    return _name(canonical_url(repo), path, _normalise_ref(ref))


def _name(url: str, path: str, ref: str) -> str:
    key = f"{url}\n{_normalise_path(path)}\n{ref}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:_HASH_LENGTH]
    # no query or fragment in the readable part: a token there must not become a label
    bare = re.split(r"[?#]", url, maxsplit=1)[0].replace("\\", "/").rstrip("/")
    base = posixpath.basename(bare.rpartition(":")[2]).removesuffix(".git")
    readable = _slug(f"{base}-{ref}")[: 63 - _HASH_LENGTH - 1].strip("-")
    return f"{readable}-{digest}" if readable else f"gitsync-{digest}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _normalise_ref(ref: str) -> str:
    # git resolves a branch name through refs/heads/ first: the two spellings are one ref
    return ref.strip().removeprefix("refs/heads/")


def legacy_label(repo_url: str, path: str) -> str:
    """The source label value of gitsync before instance names: repository and path,
    hashed (the ref was not part of it, so two refs of one repository collided).

    Two spellings of one repository (a trailing ``/`` or ``.git``, credentials, upper-case
    host) name the same instance; otherwise a restart with a cosmetic change of ``--repo``
    would orphan every MyApp it created.
    """
    key = f"{_legacy_url(repo_url)}\n{_normalise_path(path)}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


_SCHEME_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<auth>[^/@]*@)?(?P<rest>.*)")
# git's rule: no "://", and a ":" before the first "/" ("[user@]host:path")
_SCP_URL = re.compile(r"(?:[^@/:]*@)?(?P<host>\[[^\]/]*\]|[^@/:\[\]]+):(?P<path>(?!//).*)")
_PORTED_HOST = re.compile(r"(?P<host>\[[^\]]*\]|[^:]*)(?::(?P<port>[0-9]*))?")
#: the port each transport uses when the URL names none
_DEFAULT_PORTS = {"https": "443", "http": "80", "ssh": "22", "git": "9418"}
_SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git")


def canonical_url(url: str) -> str:
    """One spelling per repository, whatever the transport it is reached by.

    A Git host serves one repository over every transport, so ``https://host/x``,
    ``http://host:80/x``, ``ssh://git@host:22/x``, ``git@host:x`` and ``git://host/x``
    are all ``https://host/x``: the scheme, the user, a default port, a trailing ``/``
    or ``.git`` and the host's case do not name another repository. A port that is not
    its transport's default may be another server, so it stays, with its scheme
    (``ssh://host:2222/x``). A local repository is ``file://`` and its path, as a
    directory or as a ``file://`` URL; a relative directory is left as given, since
    only the caller knows what it is relative to.
    """
    url = url.strip()
    m = _SCHEME_URL.fullmatch(url)
    if m is not None:
        scheme = m["scheme"].lower()
        scheme = "ssh" if scheme in _SSH_SCHEMES else scheme
        netloc, _, path = m["rest"].partition("/")
        if scheme == "file":
            return "file://" + _repo_path("/" + path)
        hp = _PORTED_HOST.fullmatch(netloc)
        if scheme not in _DEFAULT_PORTS or hp is None:
            return _legacy_url(url)  # a transport git has no default for: as before
        return _network_url(scheme, hp["host"], hp["port"] or "", path)
    scp = _SCP_URL.fullmatch(url)
    if scp is not None and "://" not in url:
        return _network_url("ssh", scp["host"], "", scp["path"])
    if url.startswith("/"):
        return "file://" + _repo_path(url)
    return _repo_path(url)


def _network_url(scheme: str, host: str, port: str, path: str) -> str:
    path = _repo_path(path).lstrip("/")
    if port in ("", _DEFAULT_PORTS[scheme]):
        return f"https://{host.lower()}/{path}"
    return f"{scheme}://{host.lower()}:{port}/{path}"


def _repo_path(path: str) -> str:
    path = re.sub(r"/{2,}", "/", path).rstrip("/")
    return path.removesuffix(".git").rstrip("/")


def _legacy_url(url: str) -> str:
    """The URL as gitsync normalised it before transports were: the source label values
    written then (:func:`legacy_label`, and names before :func:`canonical_url`)."""
    url = url.strip()
    m = _SCHEME_URL.fullmatch(url)
    if m is not None:
        host, _, rest = m["rest"].partition("/")
        url = f"{m['scheme'].lower()}://{host.lower()}/{rest}"
    url = url.rstrip("/")
    return url.removesuffix(".git").rstrip("/")


def _normalise_path(path: str) -> str:
    norm = posixpath.normpath(path.strip().replace("\\", "/") or ".")
    return norm.lstrip("/") or "."
