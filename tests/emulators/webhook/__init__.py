"""A Slack-compatible incoming webhook receiver for the tests and the sandbox: it records every JSON POST and can
answer 429 (with ``Retry-After``), 500 or nothing (a timeout) on demand. See :mod:`.receiver`."""
