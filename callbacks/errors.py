"""The exception type for checkpoint problems the user must fix (storage, credentials, run conflicts)."""

from common.errors import UserError


class CheckpointError(UserError):
    """A checkpoint cannot be saved, synced or resumed; the message says what is wrong and how to fix it.

    Command-line tools print it without a traceback.
    """
