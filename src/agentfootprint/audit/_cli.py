"""``agentfootprint audit verify FILE`` and ``agentfootprint audit export RUN_ID``.

``verify`` prints one line and exits 0 when the bundle verifies, 1 when it is broken (naming
the first broken record), 2 when it cannot be checked at all (no such file, an unreadable or
empty key file, the ``rfc8785`` package missing) — never a traceback. ``export`` writes a
stored run's bundle, with the proofs the store kept, to ``-o FILE`` or standard output.

``stored_run_warning`` is what ``explain`` and ``report`` say about a stored run that no longer
matches the chain head kept when it was saved.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..flow._display import terminal_text

__all__ = ["add_audit_commands", "run_audit", "stored_run_warning"]


def add_audit_commands(commands: Any, store_option: argparse.ArgumentParser) -> None:
    """The ``audit`` command and its ``verify`` and ``export`` subcommands."""
    audit = commands.add_parser("audit", parents=[store_option],
                                help="export or verify a run's hash-chained audit bundle")
    actions = audit.add_subparsers(dest="audit_command", required=True)
    verify = actions.add_parser("verify", help="check a bundle offline; exit 0 ok, 1 broken, "
                                               "2 bad input")
    verify.add_argument("file", metavar="FILE")
    verify.add_argument("--key-file", metavar="F", default=None,
                        help="the HMAC key the bundle was exported with (the file's bytes)")
    export = actions.add_parser("export", parents=[store_option],
                                help="write a stored run's audit bundle (with its kept proofs)")
    export.add_argument("run_id")
    export.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="the file to write (default: standard output)")
    export.add_argument("--key-file", metavar="F", default=None,
                        help="an HMAC key (the file's bytes): only its holder can verify")
    export.add_argument("--full-content", action="store_true",
                        help="keep argument values, results and answers (bounded by default)")


def _say(text: str) -> None:
    print(f"agentfootprint audit: {terminal_text(text)}", file=sys.stderr)


def _key(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        key = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the key file {path!r} ({exc.strerror or exc}); pass "
                         "--key-file with the file holding the HMAC key") from exc
    if not key:
        raise ValueError(f"the key file {path!r} is empty; write the HMAC key into it")
    return key


def run_audit(options: argparse.Namespace) -> int:
    """Run ``audit verify`` or ``audit export``; the exit status."""
    from ..errors import ConfigurationError

    try:
        if options.audit_command == "verify":
            return _verify(options)
        return _export(options)
    except (ValueError, ConfigurationError) as exc:
        _say(str(exc))
        return 2


def _verify(options: argparse.Namespace) -> int:
    from ._verify import verify_audit_bundle

    key = _key(options.key_file)
    try:
        bundle = Path(options.file).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {options.file!r} ({exc.strerror or exc}); pass the "
                         "bundle file audit export wrote") from exc
    found = verify_audit_bundle(bundle, key=key)
    if found.ok:
        print(terminal_text(f"ok: {found.reason}"))
        return 0
    print(terminal_text(f"broken at record {found.broken_at}: {found.reason} "
                 f"({found.records_checked} record(s) verified before it)"))
    return 1


def _export(options: argparse.Namespace) -> int:
    from ..runs._sqlite import DEFAULT_RUN_STORE, RunStore
    from ._export import audit_export

    key = _key(options.key_file)
    given = getattr(options, "store", None)
    path = Path(given) if given else DEFAULT_RUN_STORE
    if not path.exists():
        _say(f"no run store at {str(path)!r}; pass --store FILE")
        return 1
    with RunStore(path) as store:
        try:
            recording = store.load(options.run_id)
            proofs = store.proofs(options.run_id)
        except KeyError as exc:
            _say(str(exc.args[0]))
            return 1
    bundle = audit_export(recording, key=key, full_content=options.full_content,
                          proofs=proofs)
    if options.output is None:
        sys.stdout.buffer.write(bundle)
        sys.stdout.flush()
        return 0
    try:
        Path(options.output).write_bytes(bundle)
    except OSError as exc:
        _say(f"cannot write {options.output!r} ({exc.strerror or exc}); pass -o with a "
             "writable path")
        return 1
    records = bundle.count(b"\n") - 1
    print(terminal_text(f"{options.output}: {records} record(s) of run {recording.run_id}"))
    return 0


def stored_run_warning(store: Any, recording: Any) -> str | None:
    """The sentence ``explain``/``report`` must lead with when a stored run no longer matches
    the chain head kept when it was saved; None when it matches or no head was kept."""
    from ..runs._chain import check_chain_head

    reader = getattr(store, "chain_head", None)
    if reader is None:
        return None
    check = check_chain_head(recording, reader(recording.run_id))
    return check.sentence if check.broken else None
