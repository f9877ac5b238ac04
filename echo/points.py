"""Where in the input pipeline an echo stage sits (Choi et al. 2019, section 3)."""

from __future__ import annotations

from enum import Enum

__all__ = ["ECHO_POINTS", "EchoPoint"]


class EchoPoint(str, Enum):
    """Insertion point of an echo stage.

    The values are the strings used in config files, run records and plot labels.

    Attributes:
        BEFORE_AUGMENT: Example echoing before augmentation: each copy of a read example is
            augmented independently, so copies differ.
        AFTER_AUGMENT: Example echoing after augmentation: copies are identical and only the
            shuffle buffer spreads them apart.
        AFTER_BATCH: Batch echoing: whole batches are repeated after batching.
    """

    BEFORE_AUGMENT = "before_augment"
    AFTER_AUGMENT = "after_augment"
    AFTER_BATCH = "after_batch"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: EchoPoint | str) -> EchoPoint:
        """Return the `EchoPoint` named by ``value``.

        Args:
            value: An `EchoPoint` or one of its string values.

        Raises:
            ValueError: ``value`` names no insertion point; the message lists the valid ones.
        """
        try:
            return cls(value)
        except ValueError:
            raise ValueError(
                f"point={value!r} is not an echo insertion point; "
                f"valid values: {', '.join(ECHO_POINTS)}"
            ) from None


ECHO_POINTS: tuple[str, ...] = tuple(p.value for p in EchoPoint)
