"""The one base type for mistakes a user can fix: a bad recipe, data file, store, input file or argument.

Every command line catches ``UserError`` alone and prints ``error: <message>`` with exit status 2, never a
traceback. Subclasses (``RecipeError``, ``DataError``, ``CheckpointError``, ...) say which part complained;
their messages name the file, key or row, what was expected, and a fix.
"""


class UserError(ValueError):
    """A problem the user can fix; the message says where, what was expected, and how to fix it."""
