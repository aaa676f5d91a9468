"""The run browser (``agentfootprint ui``): runs list, one run's report, and a prove button.

Its app is ``agentfootprint.serve.browser_app``; the modules here are private.
"""

from __future__ import annotations

__all__: list[str] = []
