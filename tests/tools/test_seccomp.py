"""The sandbox's seccomp filter is well-formed classic BPF for the machines it knows."""

from __future__ import annotations

import struct

import pytest

from agentfootprint.tools._seccomp import seccomp_filter


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_is_whole_instructions_with_forward_jumps(machine: str) -> None:
    """8-byte instructions; every jump lands inside the program; it ends in a return."""
    program = seccomp_filter(machine)
    assert program is not None and len(program) % 8 == 0
    count = len(program) // 8
    for index in range(count):
        code, jt, jf, _ = struct.unpack_from("=HBBI", program, index * 8)
        if code & 0x07 == 0x05:  # a jump
            assert index + 1 + max(jt, jf) < count
    assert struct.unpack_from("=HBBI", program, (count - 1) * 8)[0] == 0x06


def test_an_unknown_machine_gets_no_filter() -> None:
    """No guessed syscall numbers: the sandbox then says it runs without one."""
    assert seccomp_filter("riscv64") is None
