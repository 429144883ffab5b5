from tests.chat.conftest import copilot  # noqa: F401 - the live workflow-copilot server
