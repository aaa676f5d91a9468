"""An audit bundle: export a run as a hash chain, verify it offline, and catch a changed byte.

Offline (the mock model). The agent looks up an order with a tool and answers; the run is
exported with ``audit_export`` — canonical JSON lines, one typed record per decision, model
call, tool call and the answer, each hashed with the one before — and checked with
``verify_audit_bundle``. Then one byte of the tool call's record is changed, as someone editing
the file would, and the verifier names that record. By default a record holds no one's words:
the tool's argument names, the result's type and length, never the order id or the answer.
"""

from __future__ import annotations

import asyncio
import json

from agentfootprint import Agent, tool
from agentfootprint.audit import audit_export, verify_audit_bundle
from agentfootprint.providers import mock
from agentfootprint.runs import Recording


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return f"order {order_id}: delivered 3 days ago"


async def main() -> None:
    agent = Agent(
        provider=mock(script=[
            {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]},
            "Order A-1001 was delivered 3 days ago.",
        ]),
        model="mock",
        tools=[lookup_order],
    )
    result = await agent.run("Where is my order A-1001?")

    bundle = audit_export(Recording.of(result))  # bytes: a header line, then the records
    lines = bundle.decode().splitlines()
    print(f"exported {len(lines) - 1} records; record types:",
          ", ".join(json.loads(line)["record"]["type"] for line in lines[1:]))
    tool_line = next(line for line in lines[1:] if '"type":"tool_call"' in line)
    print("the tool call as recorded:", json.dumps(json.loads(tool_line)["record"]))

    checked = verify_audit_bundle(bundle)
    print(f"verify: ok={checked.ok}, records checked {checked.records_checked}")
    print(f"the head to publish elsewhere: final_hash, {len(checked.final_hash or '')} hex "
          "characters (it differs on every run: the run id and the time are in the chain)")

    position = bundle.index(b'"result_type":"string"') + len('"result_type":"')
    tampered = bundle[:position] + b"S" + bundle[position + 1:]  # "string" -> "String"
    broken = verify_audit_bundle(tampered)
    print(f"after one changed byte: ok={broken.ok}, broken_at={broken.broken_at}")
    print(f"  {broken.reason}")


if __name__ == "__main__":
    asyncio.run(main())
