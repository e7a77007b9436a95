"""The real model, counting what it is asked to embed (help's tests check what gets embedded)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from loom_core.embedding import LocalModel


class CountingModel(LocalModel):
    """The real model, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return super().encode(texts)
