"""Git's smart HTTP protocol (version 0/1), the client's half, over pkt-lines
read and written by dulwich (``dulwich.protocol``).

1. Discovery: ``GET <repo>/info/refs?service=git-upload-pack`` answers
   ``application/x-git-upload-pack-advertisement``: a ``# service=`` line, a
   flush, then one line per ref (``<sha> <name>``, the first with the server's
   capabilities after a NUL; ``<name>^{}`` gives the commit an annotated tag
   points at), then a flush. ``parse_advertisement`` reads it.
2. Fetch: ``POST <repo>/git-upload-pack`` with one ``want`` or a few (and
   ``deepen 1`` when the server can send a shallow history), a flush and
   ``done``. The answer: ``shallow`` lines and ``NAK``, then the pack in
   side-band packets (band 1 the pack, 2 progress, 3 an error).
   ``PackReceiver`` sorts them as they arrive.
3. Push: discovery as in 1 with ``service=git-receive-pack``, then ``POST
   <repo>/git-receive-pack`` with one command ``<old> <new> <ref>`` (the old
   sha all zeros: the ref must not exist yet), the client's capabilities after
   a NUL, a flush and the pack (``receive_request``). The answer is the
   report (``report-status``): ``unpack ok`` or why the pack was refused, then
   ``ok <ref>`` or ``ng <ref> <reason>``, a flush; with ``side-band-64k`` those
   pkt-lines come inside band 1. ``ReportReceiver`` reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from io import BytesIO

from dulwich.errors import GitProtocolError
from dulwich.protocol import PktLineParser, Protocol, extract_capabilities, pkt_line

from agentsvc_adapters.git.errors import GitFailure, ServerRefused

__all__ = [
    "Advertisement",
    "PackReceiver",
    "ReportReceiver",
    "ServerRefused",
    "parse_advertisement",
    "receive_request",
    "upload_request",
]

_SHA = re.compile(r"[0-9a-fA-F]{40}")
_PEELED = b"^{}"


def _not_git(host: str) -> GitFailure:
    return GitFailure(f"{host} answered something that is not git's smart HTTP protocol")


@dataclass
class Advertisement:
    """A repository's refs (name -> the commit or tag sha, peeled when the server
    says what a tag points at) and the names of the server's capabilities."""

    refs: dict[bytes, bytes] = field(default_factory=dict)
    capabilities: frozenset[bytes] = frozenset()
    head: bytes | None = None  # the ref HEAD names (``symref=HEAD:<ref>``), when said

    def default_branch(self) -> str:
        """The branch HEAD names: from the server's word, else the one branch at
        HEAD's commit (``main`` or ``master`` first); ``HEAD`` when none is."""
        if self.head is not None and self.head.startswith(b"refs/heads/"):
            return self.head.removeprefix(b"refs/heads/").decode(errors="replace")
        at = self.refs.get(b"HEAD")
        names = [b"refs/heads/main", b"refs/heads/master", *sorted(self.refs)]
        for name in names:
            if name.startswith(b"refs/heads/") and at is not None and self.refs.get(name) == at:
                return name.removeprefix(b"refs/heads/").decode(errors="replace")
        return "HEAD"

    def want(self, ref: str | None) -> bytes:
        """The sha to ask for: ``ref`` read as the port says (HEAD, a branch
        before a tag, a ``refs/`` name, a full sha)."""
        if ref is None or ref == "HEAD":
            if b"HEAD" not in self.refs:
                raise GitFailure("the repository has no HEAD (is it empty?)")
            return self.refs[b"HEAD"]
        if _SHA.fullmatch(ref):
            return ref.lower().encode()
        names = [ref] if ref.startswith("refs/") else [f"refs/heads/{ref}", f"refs/tags/{ref}"]
        for name in names:
            if (sha := self.refs.get(name.encode())) is not None:
                return sha
        raise GitFailure(f"ref {ref!r} not found in the repository")

    def advertises(self, sha: bytes) -> bool:
        return sha in self.refs.values()


def parse_advertisement(
    body: bytes, host: str, service_name: bytes = b"git-upload-pack"
) -> Advertisement:
    """Read a discovery answer for ``service_name`` (module docstring)."""
    proto = Protocol(BytesIO(body).read, BytesIO().write)
    adv = Advertisement()
    peeled: dict[bytes, bytes] = {}
    try:
        service = proto.read_pkt_line()
        if service is None or service.strip() != b"# service=" + service_name:
            raise _not_git(host)
        if proto.read_pkt_line() is not None:
            raise _not_git(host)
        line = proto.read_pkt_line()
        if line is not None:  # the first line carries the capabilities
            line, caps = extract_capabilities(line)
            adv.capabilities = frozenset(c.partition(b"=")[0] for c in caps)
            head = b"symref=HEAD:"
            adv.head = next((c[len(head) :] for c in caps if c.startswith(head)), None)
        while line is not None:
            sha, _, name = line.rstrip(b"\n").partition(b" ")
            if len(sha) != 40 or not name:
                raise _not_git(host)
            if name.endswith(_PEELED):
                # also an empty repository's ``capabilities^{}``, which names no ref
                peeled[name[: -len(_PEELED)]] = sha
            else:
                adv.refs[name] = sha
            line = proto.read_pkt_line()
    except (GitProtocolError, ValueError):
        raise _not_git(host) from None
    adv.refs.update((name, sha) for name, sha in peeled.items() if name in adv.refs)
    return adv


def upload_request(
    want: bytes, capabilities: frozenset[bytes], also: tuple[bytes, ...] = ()
) -> bytes:
    """The body of the ``git-upload-pack`` POST for one commit (and the commits
    ``also``), shallow when the server can: depth 1, only the files of each."""
    if b"side-band-64k" in capabilities:
        ours = [b"side-band-64k"]
    elif b"side-band" in capabilities:
        ours = [b"side-band"]
    else:
        raise GitFailure("the git server does not support side-band, which is required")
    # thin-pack: a pack may hold deltas against objects the client has; having
    # sent no ``have``, it has none, so the pack is whole (and some servers,
    # dulwich's among them, refuse a client that does not say it)
    wanted = (b"ofs-delta", b"thin-pack", b"no-progress", b"shallow")
    ours += [c for c in wanted if c in capabilities]
    if b"agent" in capabilities:
        ours.append(b"agent=agentsvc")
    lines = [pkt_line(b"want " + want + b" " + b" ".join(ours) + b"\n")]
    lines += [pkt_line(b"want " + sha + b"\n") for sha in also if sha != want]
    if b"shallow" in capabilities:
        lines.append(pkt_line(b"deepen 1\n"))
    lines += [pkt_line(None), pkt_line(b"done\n")]
    return b"".join(lines)


class PackReceiver:
    """Sorts an upload-pack answer, fed as it arrives: the pack's bytes (band 1)
    are kept, progress (band 2) and the lines before the pack (``shallow``,
    ``NAK``) dropped, an error (band 3 or ``ERR``) kept to report."""

    def __init__(self) -> None:
        self.pack = bytearray()
        self.error: str | None = None
        self._parser = PktLineParser(self._packet)

    def feed(self, data: bytes) -> None:
        try:
            self._parser.parse(data)
        except ValueError:
            self.error = self.error or "an answer that is not git's protocol"

    def _packet(self, pkt: bytes | None) -> None:
        if pkt is None:
            return
        if pkt[:1] == b"\x01":
            self.pack += pkt[1:]
        elif pkt[:1] == b"\x03" or pkt.startswith(b"ERR "):
            text = pkt[1:] if pkt[:1] == b"\x03" else pkt[4:]
            self.error = text.decode(errors="replace").strip()[:200]

    def finish(self, host: str) -> bytes:
        """The pack, or ``GitFailure`` with the server's own reason."""
        if self.error is not None:
            raise ServerRefused(f"{host} refused the fetch: {self.error}")
        if self._parser.get_tail() or not self.pack:
            raise GitFailure(f"{host} sent no complete pack")
        return bytes(self.pack)


def receive_request(new: bytes, ref: bytes, capabilities: frozenset[bytes], pack: bytes) -> bytes:
    """The body of the ``git-receive-pack`` POST that creates ``ref`` at ``new``
    (module docstring); the report is asked for, in side-band when offered."""
    if b"report-status" not in capabilities:
        raise GitFailure(
            "the git server does not report on a push (report-status), which is required"
        )
    ours = [b"report-status"]
    ours += [c for c in (b"side-band-64k", b"quiet") if c in capabilities]
    if b"agent" in capabilities:
        ours.append(b"agent=agentsvc")
    command = b"0" * 40 + b" " + new + b" " + ref + b"\0" + b" ".join(ours) + b"\n"
    return pkt_line(command) + pkt_line(None) + pack


def _text(raw: bytes) -> str:
    return raw.decode(errors="replace").strip()[:200]


class ReportReceiver:
    """Reads a receive-pack answer, fed as it arrives (module docstring): the
    report's lines, inside band 1 when ``sideband``; progress (band 2) dropped,
    an error (band 3 or ``ERR``) kept to report."""

    def __init__(self, *, sideband: bool) -> None:
        self.lines: list[bytes] = []
        self.error: str | None = None
        self._ended = False
        self._inner = PktLineParser(self._line)
        self._outer = PktLineParser(self._packet if sideband else self._line)

    def feed(self, data: bytes) -> None:
        try:
            self._outer.parse(data)
        except ValueError:
            self.error = self.error or "an answer that is not git's protocol"

    def _packet(self, pkt: bytes | None) -> None:
        if pkt is None:
            return
        if pkt[:1] == b"\x01":
            try:
                self._inner.parse(pkt[1:])
            except ValueError:
                self.error = self.error or "an answer that is not git's protocol"
        elif pkt[:1] == b"\x03":
            self.error = _text(pkt[1:])

    def _line(self, pkt: bytes | None) -> None:
        if pkt is None:
            self._ended = True
        elif pkt.startswith(b"ERR "):
            self.error = _text(pkt[4:])
        else:
            self.lines.append(pkt.rstrip(b"\n"))

    def finish(self, host: str, ref: bytes) -> None:
        """Nothing when the server took ``ref``; else ``GitFailure`` with its reason."""
        if self.error is not None:
            raise GitFailure(f"{host} refused the push: {self.error}")
        if not self._ended or not self.lines or not self.lines[0].startswith(b"unpack "):
            raise GitFailure(f"{host} sent no complete report on the push", permanent=False)
        unpacked = self.lines[0].removeprefix(b"unpack ")
        if unpacked != b"ok":
            raise GitFailure(f"{host} could not unpack the push: {_text(unpacked)}")
        for line in self.lines[1:]:
            status, _, rest = line.partition(b" ")
            name, _, reason = rest.partition(b" ")
            if name == ref and status == b"ok":
                return
            if name == ref and status == b"ng":
                raise GitFailure(f"{host} refused the push: {_text(reason)}")
        raise GitFailure(f"{host} did not report on {ref.decode(errors='replace')}")
