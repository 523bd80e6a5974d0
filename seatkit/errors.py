"""The kit's one exception: a message for the user and a hint on what to do next."""


class SeatError(Exception):
    """An error the CLI prints without a traceback (exit code `code`)."""

    def __init__(self, message: str, hint: str = "", code: int = 1):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class NotRunning(SeatError):
    """Nothing to stop: the state `seat down` asks for already holds (its caller exits 0)."""
