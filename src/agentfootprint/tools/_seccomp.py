"""A small seccomp filter for the sandbox: the system calls a program has no business making.

Why, on top of namespaces and a separate uid: each of these calls is kernel attack surface or
a way to look across a boundary — ``ptrace`` and ``process_vm_readv/writev`` (other processes'
memory), ``unshare``/``setns``/``clone`` with namespace flags and the mount family (a new user
namespace grants capabilities inside it), keyrings, ``bpf``, ``perf_event_open``,
``userfaultfd`` and ``io_uring``. They fail with ``EPERM``; ``clone3`` fails with ``ENOSYS`` so
the C library falls back to ``clone``, whose flags the filter can read. Calls of another ABI
(x32, i386 on x86-64) fail too. Everything else is allowed.

The filter is classic BPF, built here by hand (no libseccomp needed) for x86-64 and AArch64;
:func:`seccomp_filter` returns ``None`` on other machines and the sandbox says it has no filter.
bubblewrap loads it (``--seccomp FD``) just before it starts the program.
"""

from __future__ import annotations

import errno
import platform
import struct
from typing import Final

__all__ = ["seccomp_filter"]

_LD_W_ABS: Final = 0x20
_JEQ_K: Final = 0x15
_JGE_K: Final = 0x35
_JSET_K: Final = 0x45
_RET_K: Final = 0x06
_ALLOW: Final = 0x7FFF0000
_ERRNO: Final = 0x00050000
_NR: Final = 0  # offsets into struct seccomp_data
_ARCH: Final = 4
_ARG0_LOW: Final = 16  # little-endian: the low 32 bits of args[0]
_X32_BIT: Final = 0x40000000
_NAMESPACE_FLAGS: Final = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET."""

_DENIED: Final = ("ptrace", "process_vm_readv", "process_vm_writev", "unshare", "setns",
                  "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen",
                  "fsconfig", "fsmount", "fspick", "mount_setattr", "keyctl", "add_key",
                  "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
                  "io_uring_enter", "io_uring_register", "kexec_load", "init_module",
                  "finit_module", "delete_module")

_MACHINES: Final[dict[str, tuple[int, dict[str, int]]]] = {
    "x86_64": (0xC000003E, {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "unshare": 272,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "keyctl": 250,
        "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
        "userfaultfd": 323, "kexec_load": 246, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "clone": 56}),
    "aarch64": (0xC00000B7, {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "unshare": 97,
        "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "keyctl": 219,
        "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "kexec_load": 104, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "clone": 220}),
}
_COMMON: Final = {  # the same number on every architecture since Linux 5.0
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "mount_setattr": 442, "clone3": 435}


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The filter as bytes of ``struct sock_filter``; ``None`` for a machine it does not know."""
    machine = machine or platform.machine()
    known = _MACHINES.get(machine)
    if known is None:
        return None
    arch, numbers = known
    numbers = {**numbers, **_COMMON}
    # (code, jump-if-true label, jump-if-false label, k); labels resolve to relative offsets
    program: list[tuple[int, str | None, str | None, int]] = [
        (_LD_W_ABS, None, None, _ARCH),
        (_JEQ_K, None, "deny", arch),
        (_LD_W_ABS, None, None, _NR),
    ]
    if machine == "x86_64":  # x32 calls share the architecture tag: refuse them by number
        program.append((_JGE_K, "deny", None, _X32_BIT))
    program.append((_JEQ_K, "enosys", None, numbers["clone3"]))
    program.append((_JEQ_K, "clone", None, numbers["clone"]))
    program += [(_JEQ_K, "deny", None, numbers[name]) for name in _DENIED]
    program.append((_RET_K, None, None, _ALLOW))
    labels = {"clone": len(program)}  # jumps only go forward: the clone check ends in its own
    program += [(_LD_W_ABS, None, None, _ARG0_LOW), (_JSET_K, "deny", None, _NAMESPACE_FLAGS),
                (_RET_K, None, None, _ALLOW)]
    labels["deny"] = len(program)
    program.append((_RET_K, None, None, _ERRNO | errno.EPERM))
    labels["enosys"] = len(program)
    program.append((_RET_K, None, None, _ERRNO | errno.ENOSYS))
    out = bytearray()
    for index, (code, true, false, k) in enumerate(program):
        jt = labels[true] - index - 1 if true else 0
        jf = labels[false] - index - 1 if false else 0
        out += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(out)
